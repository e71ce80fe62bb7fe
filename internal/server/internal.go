package server

import (
	"github.com/cairnmq/cairn/internal/subject"
)

// MsgHandler receives a message delivered to an internal subscription:
// the published subject, the reply subject (empty when none), the header
// block (nil when none) and the payload. It runs on the publisher's
// goroutine (a client's read loop, or the caller of Publish), so it must
// not block: it copies what it keeps and hands slow work to its own
// goroutines (docs/architecture.md rule 2). The slices are valid only during the call.
type MsgHandler func(subject, reply string, hdr, data []byte)

// InternalSub is a subscription owned by code inside the server (the
// JetStream API, streams, consumers, imports) rather than by a client
// connection.
type InternalSub struct {
	srv *Server
	sub *subscription
}

// SubscribeInternal subscribes h, in the global account $G, to subject
// (wildcards allowed) and, when queue is not empty, to that queue group.
// It returns an error wrapping sublist.ErrInvalidSubject or
// sublist.ErrInvalidQueue for bad input.
func (s *Server) SubscribeInternal(subj, queue string, h MsgHandler) (*InternalSub, error) {
	return s.subscribeIn(s.gacc, subj, queue, h, subKindInternal)
}

// Kinds of internal subscriptions: an import's are told apart so that a
// message an import delivers is not imported again (imports.go), and are
// announced to the peers, which an internal subscription is not
// (interest.go); the system request subscriptions (sysreq.go) are
// announced too, so that every server of a cluster answers.
const (
	subKindInternal = iota
	subKindImport
	subKindSystem
)

// shared reports whether an internal subscription is the cluster's
// rather than this server's alone: announced to the peers and delivered
// what they route (an import's, a system request's, a clustered
// JetStream's); a JetStream's internal subscriptions on a server without
// JetStream clustering stay local.
func (sub *subscription) shared() bool { return sub.imported || sub.system || sub.cluster }

// subscribeIn subscribes h in acc.
func (s *Server) subscribeIn(acc *account, subj, queue string, h MsgHandler, kind int) (*InternalSub, error) {
	return s.insertInternal(&subscription{acc: acc, subject: subj, queue: queue, handler: h, imported: kind == subKindImport, system: kind == subKindSystem})
}

// insertInternal inserts an internal subscription made whole (fields
// are not set after it is published) into its account's subject index,
// and announces it when it is shared.
func (s *Server) insertInternal(sub *subscription) (*InternalSub, error) {
	if err := sub.acc.sl.Insert(sub.subject, sub.queue, sub); err != nil {
		return nil, err
	}
	if sub.shared() {
		s.interestAdded(sub)
	}
	return &InternalSub{srv: s, sub: sub}, nil
}

// Unsubscribe removes the subscription; later calls do nothing.
func (is *InternalSub) Unsubscribe() {
	if is.sub.removed.CompareAndSwap(false, true) {
		_ = is.sub.acc.sl.Remove(is.sub.subject, is.sub.queue, is.sub)
		if is.sub.shared() && is.srv != nil {
			is.srv.interestRemoved(is.sub)
		}
	}
}

// Withdraw stops announcing a subscription shared with the cluster to
// the peers, while it goes on receiving what they routed before they
// learned it: a stream's leader handing its leadership over
// (docs/cluster.md, "Lame duck mode and shutdown") withdraws its
// subscriptions, flushes its routes (Server.FlushRoutes), then drops
// them, so that no publish on its way to it is lost. It does nothing to
// a subscription that is not shared.
func (is *InternalSub) Withdraw() {
	if is.srv != nil {
		is.srv.withdrawInterest(is.sub)
	}
}

// Publish delivers a message from inside the server, in the global
// account $G, to every matching subscription, as if a client had
// published it (docs/protocol.md 1.7): hdr is a complete NATS header block or
// nil. It is safe to call from any goroutine. It reports whether anything
// received the message. An invalid subject reaches nobody.
func (s *Server) Publish(subj, reply string, hdr, data []byte) bool {
	return s.publishIn(s.gacc, subj, subj, reply, hdr, data, pubNormal)
}

// PublishAs is Publish matched by the subject match, with subj written on
// the MSG or HMSG line in its place: JetStream delivers a stored message
// to a deliver subject or pull inbox under its stored subject (docs/protocol.md
// section 5.1). It reports whether anything received the message.
func (s *Server) PublishAs(match, subj, reply string, hdr, data []byte) bool {
	return s.publishIn(s.gacc, match, subj, reply, hdr, data, pubNormal)
}

// How an internal publish spreads (imports.go): pubNormal as a client's
// publish; pubImported skips import subscriptions (an imported message is
// not imported again); pubLocal also stays on this server (a stream
// import: each server imports what its own subscribers need).
const (
	pubNormal = iota
	pubImported
	pubLocal
)

// publishIn publishes in acc.
func (s *Server) publishIn(acc *account, match, subj, reply string, hdr, data []byte, how int) bool {
	return s.publishTraced(acc, match, subj, reply, hdr, data, how, nil, nil)
}

// publishTraced is publishIn for a message an import carries into acc
// with its trace t (nil: untraced), which the deliveries record as the
// publisher's read loop would; si is the stream import that carries it,
// nil for a service import. It runs on the goroutine that owns t.
func (s *Server) publishTraced(acc *account, match, subj, reply string, hdr, data []byte, how int, t *msgTrace, si *streamImport) bool {
	if !subject.ValidLiteral(match) {
		return false
	}
	p := s.internalPublisher()
	defer s.publishers.Put(p)
	p.acc, p.importing, p.localOnly = acc, how != pubNormal, how == pubLocal
	msg, hdrLen := data, -1
	if hdr != nil {
		msg = append(append(p.scratch[:0], hdr...), data...)
		p.scratch = msg
		hdrLen = len(hdr)
	}
	p.trace, p.viaImport = t, si
	delivered := p.deliverAllAs([]byte(match), []byte(subj), []byte(reply), hdrLen, msg)
	p.trace, p.viaImport = nil, nil
	p.flushReceivers()
	p.stallOn = nil // internal publishers are never stalled
	return delivered
}

// internalPublisher returns a connectionless client used to deliver
// messages published from inside the server; one per concurrent caller.
func (s *Server) internalPublisher() *client {
	if p, ok := s.publishers.Get().(*client); ok {
		return p
	}
	return &client{srv: s, opts: connectOpts{Echo: true, Headers: true}, internal: true}
}

// callHandler delivers to an internal subscription.
func callHandler(sub *subscription, subj, reply []byte, hdrLen int, msg []byte) {
	var hdr []byte
	data := msg
	if hdrLen > 0 {
		hdr, data = msg[:hdrLen:hdrLen], msg[hdrLen:]
	}
	sub.handler(string(subj), string(reply), hdr, data)
}

// HasExactInterest reports whether a plain subscription (no queue group)
// of the global account, a client's or an internal one, is on exactly the
// literal subject subj, not on a wildcard that matches it: nats-server
// v2.15.2's interest notifications (Sublist.RegisterNotification), which
// a snapshot waits for on its deliver subject.
func (s *Server) HasExactInterest(subj string) bool { return s.hasExactInterestIn(s.gacc, subj) }

func (s *Server) hasExactInterestIn(acc *account, subj string) bool {
	if !subject.ValidLiteral(subj) {
		return false
	}
	for _, sub := range acc.sl.Match([]byte(subj)).Plain {
		if sub.subject == subj {
			return true
		}
	}
	return false
}

// HasInterest reports whether any subscription of the global account, a
// client's or an internal one, matches the literal subject subj.
func (s *Server) HasInterest(subj string) bool { return s.hasInterestIn(s.gacc, subj) }

func (s *Server) hasInterestIn(acc *account, subj string) bool {
	return s.interestIn(acc, subj, 0)
}

// maxImportDepth bounds how many stream imports interestIn follows, so
// that accounts importing from each other in a circle end.
const maxImportDepth = 8

// interestIn reports whether a subscription of acc matches the literal
// subj, a stream import's counting only when its importing account has
// interest in the subject it carries (subscription.interest), followed
// at most maxImportDepth imports deep. An import with no subscriber
// behind it is no interest: a push consumer whose deliver subject only
// an idle import matches goes inactive and is deleted after its
// inactive_threshold, as in nats-server v2.15.2 (an external source's
// old consumers were never reaped; docs/external-sourcing.md).
func (s *Server) interestIn(acc *account, subj string, depth int) bool {
	if !subject.ValidLiteral(subj) {
		return false
	}
	r := acc.sl.Match([]byte(subj))
	if len(r.Queues) > 0 {
		return true
	}
	for _, sub := range r.Plain {
		if sub.interest == nil || depth < maxImportDepth && sub.interest(subj, depth+1) {
			return true
		}
	}
	return false
}
