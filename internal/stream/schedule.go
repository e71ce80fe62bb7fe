package stream

import (
	"container/heap"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/subject"
)

// Message schedules (ADR-51; nats-server v2.15.2 server/scheduler.go and
// the schedule checks of processJetStreamMsg). On a stream with
// allow_msg_schedules, a message whose header holds
//
//	Nats-Schedule: @at <RFC 3339 time> | @every <Go duration, 1s or more> |
//	               <six cron fields> | @yearly | @annually | @monthly | @weekly | @daily | @midnight | @hourly
//	Nats-Schedule-Target: <a subject of the stream, not the message's own>
//	Nats-Schedule-TTL: <a Nats-TTL value>            (optional)
//	Nats-Schedule-Rollup: sub                         (optional)
//	Nats-Schedule-Source: <a subject of the stream>   (optional)
//	Nats-Schedule-Time-Zone: <IANA name>              (optional, cron only)
//
// is a schedule: it is stored with "Nats-Rollup: sub" added (so it
// replaces the schedule stored before on its subject), and when it is
// due the stream stores on the target a message with the schedule's
// payload (or the last message of the source subject, if there is one),
// its header without the Nats-Schedule*, Nats-Expected-*, Nats-Msg-Id,
// Nats-TTL and Nats-Rollup fields and with
//
//	Nats-Scheduler: <the schedule's subject>
//	Nats-Schedule-Next: purge | <the next time, RFC 3339 with nanoseconds>
//	Nats-TTL: <Nats-Schedule-TTL>                     (when given)
//	Nats-Rollup: <Nats-Schedule-Rollup>               (when given)
//
// appended. A message with "Nats-Schedule-Next: purge" purges its
// Nats-Scheduler subject: an @at schedule goes once it fired, and a
// client stops one that way. A repeating schedule fires again at the
// time its last produced message names.
//
// The stream keeps a table of its schedules (subject, sequence, when
// due), derived from its messages alone: the apply function updates it
// as messages are stored and Rebuild makes it again from the store. The
// leader decides only when to fire: it proposes a FireSchedules with its
// clock's time T, and the apply function stores the messages of every
// schedule due at T, in the order of their sequences, computing each
// next time from T (a schedule missed while the server was down fires
// once, then moves on from T). The time zone database is the one input
// from the host that apply reads (time.LoadLocation, once per name per
// process): replicas need the same one, as ADR-51 asks of nats-server's
// operators.

// Header fields of message schedules not in header.go.
const (
	hdrScheduleTTL    = "Nats-Schedule-TTL"
	hdrScheduleRollup = "Nats-Schedule-Rollup"
	hdrScheduleTarget = "Nats-Schedule-Target"
	hdrScheduleSource = "Nats-Schedule-Source"
	schedulePurge     = "purge" // Nats-Schedule-Next of a schedule that ends
)

// zones caches time.LoadLocation by name, so that a zone keeps its rules
// for the life of the process.
var zones sync.Map // name → zoneResult

type zoneResult struct {
	loc *time.Location
	err error
}

func loadZone(name string) (*time.Location, error) {
	if z, ok := zones.Load(name); ok {
		r := z.(zoneResult)
		return r.loc, r.err
	}
	loc, err := time.LoadLocation(name)
	zones.Store(name, zoneResult{loc, err})
	return loc, err
}

// scheduleZone returns the location of Nats-Schedule-Time-Zone: nil
// without the field; 10223 when it is empty or names no zone.
func scheduleZone(hdr []byte) (*time.Location, *jserr.Error) {
	tz, ok := headerValue(hdr, hdrScheduleTimeZone)
	if !ok {
		return nil, nil
	}
	if len(tz) == 0 {
		return nil, jserr.New(jserr.MessageSchedulesTimeZoneInvalid)
	}
	loc, err := loadZone(string(tz))
	if err != nil {
		return nil, jserr.New(jserr.MessageSchedulesTimeZoneInvalid)
	}
	return loc, nil
}

// parseSchedule reads a Nats-Schedule pattern as nats-server v2.15.2
// parseMsgSchedule does, with now (unix ns) in place of its clock: the
// time it fires after ts (unix ns), whether it repeats, and whether the
// pattern is valid. "" is valid and never fires (the zero time). @at and
// @every take no time zone. A repeating schedule whose next time is
// before now moves on from now, so that one missed while the server was
// down fires once.
func parseSchedule(pattern string, loc *time.Location, ts, now int64) (time.Time, bool, bool) {
	switch {
	case pattern == "":
		return time.Time{}, false, true
	case strings.HasPrefix(pattern, "@at "):
		if loc != nil {
			return time.Time{}, false, false
		}
		t, err := time.Parse(time.RFC3339, pattern[len("@at "):])
		return t, false, err == nil
	case strings.HasPrefix(pattern, "@every "):
		if loc != nil {
			return time.Time{}, false, false
		}
		d, err := time.ParseDuration(pattern[len("@every "):])
		if err != nil || d.Seconds() < 1 {
			return time.Time{}, false, false
		}
		next := time.Unix(0, ts).UTC().Round(time.Second).Add(d)
		if n := time.Unix(0, now).UTC(); next.Before(n) {
			next = n.Round(time.Second).Add(d)
		}
		return next, true, true
	}
	switch pattern {
	case "@yearly", "@annually":
		pattern = "0 0 0 1 1 *"
	case "@monthly":
		pattern = "0 0 0 1 * *"
	case "@weekly":
		pattern = "0 0 0 * * 0"
	case "@daily", "@midnight":
		pattern = "0 0 0 * * *"
	case "@hourly":
		pattern = "0 0 * * * *"
	}
	spec, err := parseCronSpec(pattern)
	if err != nil {
		return time.Time{}, false, false
	}
	if loc == nil {
		loc = time.UTC
	}
	next, err := spec.next(ts, loc)
	if err != nil {
		return time.Time{}, false, false
	}
	if n := time.Unix(0, now).UTC(); next.Before(n) {
		if next, err = spec.next(n.Round(time.Second).UnixNano(), loc); err != nil {
			return time.Time{}, false, false
		}
	}
	return next, true, true
}

// nextSchedule returns when the schedule in hdr fires after ts (unix
// ns), with now as parseSchedule takes it: the zero time when hdr holds
// no Nats-Schedule; 10223 for a bad time zone, 10189 for a bad pattern
// (nats-server nextMessageSchedule).
func nextSchedule(hdr []byte, ts, now int64) (time.Time, *jserr.Error) {
	if len(hdr) == 0 {
		return time.Time{}, nil
	}
	loc, err := scheduleZone(hdr)
	if err != nil {
		return time.Time{}, err
	}
	at, _, ok := parseSchedule(headerString(hdr, hdrSchedule), loc, ts, now)
	if !ok {
		return time.Time{}, jserr.New(jserr.MessageSchedulesPatternInvalid)
	}
	return at, nil
}

// scheduleTTL returns Nats-Schedule-TTL as given ("" without one), and
// false when it is not a valid Nats-TTL value.
func scheduleTTL(hdr []byte) (string, bool) {
	v := headerString(hdr, hdrScheduleTTL)
	if v == "" {
		return "", true
	}
	if _, ok := store.ParseTTL(v); !ok {
		return "", false
	}
	return v, true
}

// checkSchedule decides a publish's Nats-Schedule as nats-server v2.15.2
// does (check 10; copies from a source are not checked): a bad time zone
// (10223) or pattern (10189), or any schedule on a stream without
// allow_msg_schedules (10188); then a bad Nats-Schedule-TTL (10191), a
// Nats-Schedule-Rollup other than "sub" (10192), a TTL on a stream
// without allow_msg_ttl (10166), a target that is missing, not a literal
// subject, the publish subject or none of the stream's (10190), a source
// that is the target, the publish subject, not a literal subject or none
// of the stream's (10203), and a Nats-Rollup other than "sub" (10192).
// A schedule without Nats-Rollup gets "Nats-Rollup: sub" appended.
func (s *Stream) checkSchedule(m *pub) *jserr.Error {
	if m.sourced {
		return nil
	}
	at, err := nextSchedule(m.hdr, m.time, m.time)
	if err != nil {
		if !s.cfg.AllowMsgSchedules {
			return jserr.New(jserr.MessageSchedulesDisabled)
		}
		return err
	}
	if at.IsZero() {
		return nil
	}
	if !s.cfg.AllowMsgSchedules {
		return jserr.New(jserr.MessageSchedulesDisabled)
	}
	ttl, ok := scheduleTTL(m.hdr)
	if !ok {
		return jserr.New(jserr.MessageSchedulesTTLInvalid)
	}
	if r := string(m.value(hdrScheduleRollup)); r != "" && r != rollupSub {
		return jserr.New(jserr.MessageSchedulesRollupInvalid)
	}
	if ttl != "" && !s.cfg.AllowMsgTTL {
		return jserr.New(jserr.MessageTTLDisabled)
	}
	target := headerString(m.hdr, hdrScheduleTarget)
	if target == "" || !subject.ValidLiteral(target) || target == m.subject {
		return jserr.New(jserr.MessageSchedulesTargetInvalid)
	}
	source := headerString(m.hdr, hdrScheduleSource)
	if source != "" && (source == target || source == m.subject || !subject.ValidLiteral(source)) {
		return jserr.New(jserr.MessageSchedulesSourceInvalid)
	}
	if !s.captures(target) {
		return jserr.New(jserr.MessageSchedulesTargetInvalid)
	}
	if source != "" && !s.captures(source) {
		return jserr.New(jserr.MessageSchedulesSourceInvalid)
	}
	switch r := strings.ToLower(string(m.value(hdrRollup))); r {
	case "":
		m.hdr = appendHeader(m.hdr, hdrRollup, rollupSub)
	case rollupSub:
	default:
		return jserr.New(jserr.MessageSchedulesRollupInvalid)
	}
	m.schedule = true
	return nil
}

// captures reports whether subj overlaps one of the stream's subjects.
func (s *Stream) captures(subj string) bool {
	return slices.ContainsFunc(s.cfg.Subjects, func(p string) bool { return subject.Overlap(p, subj) })
}

// checkScheduler decides Nats-Schedule-Next and Nats-Scheduler on a
// publish (copies from a source are not checked): a client may send only
// "Nats-Schedule-Next: purge" with a Nats-Scheduler that is a literal
// subject other than the publish subject (10212), on a stream with
// schedules (10188), naming a subject whose last message is a schedule
// or that holds none (10212; in a batch, the batch's own last message on
// it counts, d); a Nats-Scheduler alone is 10212.
func (s *Stream) checkScheduler(m *pub, d *batchDiff) *jserr.Error {
	if m.sourced {
		return nil
	}
	scheduler := string(m.value(hdrScheduler))
	next := m.value(hdrScheduleNext)
	if len(next) == 0 {
		if scheduler != "" {
			return jserr.New(jserr.MessageSchedulesSchedulerInvalid)
		}
		return nil
	}
	if string(next) != schedulePurge || scheduler == "" || scheduler == m.subject || !subject.ValidLiteral(scheduler) {
		return jserr.New(jserr.MessageSchedulesSchedulerInvalid)
	}
	if !s.cfg.AllowMsgSchedules {
		return jserr.New(jserr.MessageSchedulesDisabled)
	}
	if d != nil {
		if in, ok := d.inflight[scheduler]; ok {
			if !in.schedule {
				return jserr.New(jserr.MessageSchedulesSchedulerInvalid)
			}
			return nil
		}
	}
	if last, err := s.store.LoadLast(scheduler); err == nil && len(headerString(last.Header, hdrSchedule)) == 0 {
		return jserr.New(jserr.MessageSchedulesSchedulerInvalid)
	}
	return nil
}

// appendHeader returns hdr with "key: value" added at the end of the
// block, fields of the same name kept (nats-server genHeader); nil gets
// a new block. hdr itself is never modified.
func appendHeader(hdr []byte, key, value string) []byte {
	out := make([]byte, 0, len(hdr)+len(key)+len(value)+len(emptyBlock)+4)
	if len(hdr) > len(crlf) {
		out = append(out, hdr[:len(hdr)-len(crlf)]...)
	} else {
		out = append(out, hdrVersion+crlf...)
	}
	out = append(append(append(append(out, key...), ": "...), value...), crlf...)
	return append(out, crlf...)
}

// schedEntry is one schedule of the table: its subject, the sequence of
// the message holding it and when it is due (unix ns; math.MaxInt64 while
// parked).
type schedEntry struct {
	subj  string
	seq   uint64
	at    int64
	index int // in the heap
}

// schedules is a stream's table of schedules, by subject and sequence,
// with a heap of the entries by due time.
type schedules struct {
	bySubj map[string]*schedEntry
	bySeq  map[uint64]*schedEntry
	due    schedHeap
}

func newSchedules() *schedules {
	return &schedules{bySubj: map[string]*schedEntry{}, bySeq: map[uint64]*schedEntry{}}
}

// add makes the message at seq on subj the schedule of subj, due at at
// (nats-server MsgScheduling.init).
func (t *schedules) add(seq uint64, subj string, at int64) {
	if e, ok := t.bySubj[subj]; ok {
		delete(t.bySeq, e.seq)
		e.seq, e.at = seq, at
		t.bySeq[seq] = e
		heap.Fix(&t.due, e.index)
		return
	}
	e := &schedEntry{subj: subj, seq: seq, at: at}
	t.bySubj[subj], t.bySeq[seq] = e, e
	heap.Push(&t.due, e)
}

// update moves the schedule of subj, if any, to at (the time a message
// it produced names).
func (t *schedules) update(subj string, at int64) {
	if e, ok := t.bySubj[subj]; ok {
		e.at = at
		heap.Fix(&t.due, e.index)
	}
}

// park keeps the schedule at seq from firing until a message moves it
// (its produced message was refused; nats-server leaves it in flight).
func (t *schedules) park(seq uint64) {
	if e, ok := t.bySeq[seq]; ok {
		e.at = math.MaxInt64
		heap.Fix(&t.due, e.index)
	}
}

// remove forgets the schedule held by the message at seq.
func (t *schedules) remove(seq uint64) {
	if e, ok := t.bySeq[seq]; ok {
		t.drop(e)
	}
}

// removeSubject forgets the schedule of subj.
func (t *schedules) removeSubject(subj string) {
	if e, ok := t.bySubj[subj]; ok {
		t.drop(e)
	}
}

func (t *schedules) drop(e *schedEntry) {
	delete(t.bySubj, e.subj)
	delete(t.bySeq, e.seq)
	heap.Remove(&t.due, e.index)
}

// next returns when the first schedule is due, false when none is.
func (t *schedules) next() (int64, bool) {
	if len(t.due) == 0 || t.due[0].at == math.MaxInt64 {
		return 0, false
	}
	return t.due[0].at, true
}

// dueAt returns the schedules due at now, in the order of their
// sequences, as copies.
func (t *schedules) dueAt(now int64) []schedEntry {
	var out []schedEntry
	for _, e := range t.due {
		if e.at <= now {
			out = append(out, *e)
		}
	}
	slices.SortFunc(out, func(a, b schedEntry) int {
		switch {
		case a.seq < b.seq:
			return -1
		case a.seq > b.seq:
			return 1
		}
		return 0
	})
	return out
}

// schedHeap orders entries by due time, then sequence.
type schedHeap []*schedEntry

func (h schedHeap) Len() int { return len(h) }
func (h schedHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h schedHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *schedHeap) Push(x any) {
	e := x.(*schedEntry)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *schedHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}

// noteSchedule updates the table for a message just stored at seq
// (nats-server's store, on every stored message of a stream with
// schedules): a message holding a valid schedule becomes its subject's
// schedule, due when parseSchedule says from the message's time; any
// other message without Nats-Scheduler ends its subject's schedule; a
// message naming the next time of the schedule that produced it
// (Nats-Scheduler and a Nats-Schedule-Next time) moves that schedule.
// The message's time stands in for the clock. It returns when the new
// schedule is due (0 for none).
func (t *schedules) noteSchedule(seq uint64, subj string, hdr []byte, ts int64) int64 {
	var due int64
	scheduler := headerString(hdr, hdrScheduler)
	if at, err := nextSchedule(hdr, ts, ts); err == nil && !at.IsZero() {
		due = at.UnixNano()
		t.add(seq, subj, due)
	} else if scheduler == "" {
		t.removeSubject(subj)
	}
	if next := headerString(hdr, hdrScheduleNext); next != "" && next != schedulePurge && scheduler != "" {
		if at, err := time.Parse(time.RFC3339Nano, next); err == nil {
			t.update(scheduler, at.UnixNano())
		}
	}
	return due
}

// NextSchedule returns when the stream's first schedule is due (unix
// ns), and false when it has none: the proposer proposes a FireSchedules
// once its clock reaches it.
func (s *Stream) NextSchedule() (int64, bool) {
	if s.sched == nil {
		return 0, false
	}
	return s.sched.next()
}

// applyFire stores the messages of the schedules due at now (the
// FireSchedules operation), in the order of the schedules' sequences,
// each as a copy (Entry.Sourced) stamped now: one Result per message
// tried. A schedule whose message is gone or no longer valid is
// forgotten; one whose message the stream refused is parked until a
// message moves it; an @at schedule that fired is forgotten (its message
// was purged by the one it produced). out.Next is when the next schedule
// is due.
func (s *Stream) applyFire(now int64, out *Outcome) {
	if s.sched == nil {
		return
	}
	for _, e := range s.sched.dueAt(now) {
		if cur, ok := s.sched.bySeq[e.seq]; !ok || cur.at != e.at {
			continue // moved by a message this pass stored
		}
		m, err := s.store.Load(e.seq)
		if err != nil {
			if errors.Is(err, store.ErrNotFound) {
				s.sched.remove(e.seq)
			} else {
				s.sched.park(e.seq)
				out.StoreErr = err
			}
			continue
		}
		entry, repeat, ok := s.produced(m, e.at, now)
		if !ok {
			s.sched.remove(e.seq)
			continue
		}
		r := s.Apply(entry)
		out.Results = append(out.Results, r)
		out.Changed = true
		switch {
		case r.Err != nil:
			s.sched.park(e.seq)
		case !repeat:
			s.sched.remove(e.seq)
		}
	}
	out.Next, _ = s.sched.next()
}

// produced returns the message the schedule in m, due at at, stores when
// it fires at now, and whether the schedule repeats; ok is false when m
// no longer holds a valid schedule (nats-server getScheduledMessages).
func (s *Stream) produced(m *store.StoredMsg, at, now int64) (e Entry, repeat, ok bool) {
	loc, jerr := scheduleZone(m.Header)
	if jerr != nil {
		return Entry{}, false, false
	}
	pattern := headerString(m.Header, hdrSchedule)
	if pattern == "" {
		return Entry{}, false, false
	}
	next, repeat, ok := parseSchedule(pattern, loc, at, now)
	if !ok {
		return Entry{}, false, false
	}
	ttl, ok := scheduleTTL(m.Header)
	target := headerString(m.Header, hdrScheduleTarget)
	if !ok || target == "" {
		return Entry{}, false, false
	}
	rollup := headerString(m.Header, hdrScheduleRollup)
	hdr, data := m.Header, m.Data
	if src := headerString(m.Header, hdrScheduleSource); src != "" {
		if last, err := s.store.LoadLast(src); err == nil {
			hdr, data = last.Header, last.Data
		}
	}
	hdr = removeHeaderPrefix(hdr, "Nats-Schedule")
	hdr = removeHeaderPrefix(hdr, "Nats-Expected-")
	hdr = removeHeader(hdr, hdrMsgID)
	hdr = removeHeader(hdr, hdrTTL)
	hdr = removeHeader(hdr, hdrRollup)
	hdr = appendHeader(hdr, hdrScheduler, m.Subject)
	if repeat {
		hdr = appendHeader(hdr, hdrScheduleNext, next.Format(time.RFC3339Nano))
	} else {
		hdr = appendHeader(hdr, hdrScheduleNext, schedulePurge)
	}
	if ttl != "" {
		hdr = appendHeader(hdr, hdrTTL, ttl)
	}
	if rollup != "" {
		hdr = appendHeader(hdr, hdrRollup, rollup)
	}
	return Entry{Subject: target, Header: hdr, Data: slices.Clone(data), Time: now, Sourced: true}, repeat, true
}

// purgeScheduler runs the purge of a stored message carrying
// "Nats-Schedule-Next: purge": every message on its Nats-Scheduler
// subject goes, when roll-ups and purges are allowed (nats-server
// processJetStreamMsgWithRollup). It returns the purge run (nil for
// none) and how many messages it removed.
func (s *Stream) purgeScheduler(m *pub) (*store.PurgeRequest, uint64, error) {
	if !s.cfg.AllowRollup || s.cfg.DenyPurge || string(m.value(hdrScheduleNext)) != schedulePurge {
		return nil, 0, nil
	}
	scheduler := headerString(m.hdr, hdrScheduler)
	if scheduler == "" {
		return nil, 0, nil
	}
	req := store.PurgeRequest{Subject: scheduler}
	n, err := s.store.Purge(req)
	if s.sched != nil && subject.ValidLiteral(scheduler) {
		s.sched.removeSubject(scheduler)
	}
	return &req, n, err
}

// rebuildSchedules makes the table again from the stored messages, in
// sequence order, as noteSchedule made it when they were stored.
// Damaged ranges are skipped.
func (s *Stream) rebuildSchedules() error {
	s.sched = newSchedules()
	for seq := s.store.State(false).FirstSeq; ; {
		m, err := s.loadNext(seq)
		if errors.Is(err, store.ErrEOF) || errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if len(m.Header) > 0 {
			s.sched.noteSchedule(m.Seq, m.Subject, m.Header, m.Time)
		}
		seq = m.Seq + 1
	}
}
