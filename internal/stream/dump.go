package stream

import (
	"encoding/json"
	"fmt"
	"slices"
)

// AppendState appends the stream's whole state to dst as text, in an
// order that depends on nothing but the state: the config (JSON), the
// Nats-Msg-Id of the last message, the duplicate window in storage
// order, the message schedules by subject, the store's state with its deleted sequences, and every stored
// message (sequence, time, subject, header and payload, quoted). Two
// streams that applied the same operations from the same start produce
// the same bytes, whatever their store (memory or file) and whatever
// their clocks: the determinism tests compare replicas with it
// (docs/engine.md, "Testing the promise").
func (s *Stream) AppendState(dst []byte) []byte {
	cfg, err := json.Marshal(&s.cfg)
	if err != nil {
		cfg = []byte(err.Error())
	}
	dst = fmt.Appendf(dst, "config %s\nlast_msg_id %q\n", cfg, s.lastMsgID)
	for i := s.dedupe.head; i < len(s.dedupe.queue); i++ {
		r := s.dedupe.queue[i]
		if e, ok := s.dedupe.ids[r.id]; ok && e == r.dedupeEntry {
			dst = fmt.Appendf(dst, "dedupe %q %d %d\n", r.id, r.seq, r.time)
		}
	}
	if s.sched != nil {
		subjects := make([]string, 0, len(s.sched.bySubj))
		for subj := range s.sched.bySubj {
			subjects = append(subjects, subj)
		}
		slices.Sort(subjects)
		for _, subj := range subjects {
			e := s.sched.bySubj[subj]
			dst = fmt.Appendf(dst, "schedule %q %d %d\n", subj, e.seq, e.at)
		}
	}
	st := s.store.State(true)
	dst = fmt.Appendf(dst, "state msgs=%d bytes=%d first=%d@%d last=%d@%d subjects=%d deleted=%v\n",
		st.Msgs, st.Bytes, st.FirstSeq, st.FirstTime, st.LastSeq, st.LastTime, st.NumSubjects, st.Deleted)
	for seq := st.FirstSeq; seq <= st.LastSeq && seq > 0; {
		m, err := s.store.LoadNext(nil, seq)
		if err != nil {
			break
		}
		dst = fmt.Appendf(dst, "msg %d %d %q %q %q\n", m.Seq, m.Time, m.Subject, m.Header, m.Data)
		seq = m.Seq + 1
	}
	return dst
}
