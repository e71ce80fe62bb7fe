package streamrun

// The other parties of a stream's runtime: its consumers (the consumer
// runtime, jetstream/consumerrun) and the sourcers that read it or feed
// it (jetstream/sourcing). The stream knows them only through these
// interfaces, so that its package imports neither.

// Consumer is what a stream's runtime asks of one of its consumers:
// whether it still needs a message (interest retention), and to follow
// what left the stream. Every method is safe for concurrent use and
// takes the consumer's own lock; the stream calls them holding none of
// its locks but the consumer set's (ConsumerSet.List returns a copy).
type Consumer interface {
	// Matches reports whether the consumer's filters match subj.
	Matches(subj string) bool
	// NeedAck reports whether the consumer still needs the message seq
	// on subj: not yet delivered, or awaiting an ack, or held after
	// max_deliver.
	NeedAck(seq uint64, subj string) bool
	// NeedsAllAbove reports whether the consumer has no filter and so
	// needs every message above floor.
	NeedsAllAbove() (floor uint64, all bool)
	// PurgeRelation returns how a purge of subj relates to the
	// consumer's filters (consumer.PurgeRelation).
	PurgeRelation(subj string) int
	// SkipTo moves the consumer past what a purge removed below seq.
	SkipTo(seq uint64)
	// DropGone drops the deliveries of messages the stream no longer
	// holds, with MSG_TERMINATED advisories when advise is set.
	DropGone(advise bool)
	// DropPending drops the delivery of the deleted message seq.
	DropPending(seq uint64)
	// Signal wakes the consumer: new messages are durable.
	Signal()
}

// ConsumerSet is a stream's consumers (jetstream/consumerrun's table).
type ConsumerSet interface {
	// List returns the consumers (a copy).
	List() []Consumer
	// Held reports whether interest retention must remove nothing: a
	// consumer a start could not restore may need anything.
	Held() bool
	// Len returns the number of consumers.
	Len() int
	// StopAll stops every consumer (status: what their waiting pull
	// requests get, nil for nothing) and adds none after.
	StopAll(status []byte)
}

// noConsumers is the set of a stream before SetConsumers.
type noConsumers struct{}

// List returns no consumer.
func (noConsumers) List() []Consumer { return nil }

// Held returns false.
func (noConsumers) Held() bool { return false }

// Len returns 0.
func (noConsumers) Len() int { return 0 }

// StopAll does nothing.
func (noConsumers) StopAll([]byte) {}

// Watcher is a sourcer of another stream that reads this one (Watch):
// interest and work-queue retention keep what it has yet to copy, and
// it is woken when the stream's durable sequence moves.
type Watcher interface {
	// Matches reports whether the sourcer copies messages on subj.
	Matches(subj string) bool
	// Needs reports whether the sourcer has yet to copy seq on subj.
	Needs(seq uint64, subj string) bool
	// NeedsAllAbove reports whether the sourcer copies every subject and
	// so needs every message above floor, what it has copied.
	NeedsAllAbove() (floor uint64, all bool)
	// Signal wakes the sourcer; it must not block.
	Signal()
}

// SourceSet is a stream's own sourcers (jetstream/sourcing): its mirror's
// or its sources'.
type SourceSet interface {
	// Close stops the sourcers for good; with release they stop counting
	// as interest in their origins (the stream is deleted), without it
	// (a shutdown) the origins keep what they have yet to copy.
	Close(release bool)
}

// Watch makes w woken by this stream's durable sequence, and counted by
// its retention.
func (r *Stream) Watch(w Watcher) {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	if r.watchers == nil {
		r.watchers = map[Watcher]struct{}{}
	}
	r.watchers[w] = struct{}{}
}

// Unwatch undoes Watch.
func (r *Stream) Unwatch(w Watcher) {
	r.wmu.Lock()
	delete(r.watchers, w)
	r.wmu.Unlock()
}

// watcherList returns the sourcers reading this stream.
func (r *Stream) watcherList() []Watcher {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	ws := make([]Watcher, 0, len(r.watchers))
	for w := range r.watchers {
		ws = append(ws, w)
	}
	return ws
}

// signalWatchers wakes the sourcers reading this stream.
func (r *Stream) signalWatchers() {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	for w := range r.watchers {
		w.Signal()
	}
}

func watchersNeed(ws []Watcher, skip Watcher, seq uint64, subj string) bool {
	for _, w := range ws {
		if w != skip && w.Needs(seq, subj) {
			return true
		}
	}
	return false
}

func anyNeeds(cs []Consumer, skip Consumer, seq uint64, subj string) bool {
	for _, c := range cs {
		if c != skip && c.NeedAck(seq, subj) {
			return true
		}
	}
	return false
}
