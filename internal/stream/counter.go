package stream

import (
	"encoding/json"
	"errors"
	"math/big"
	"strconv"
	"strings"

	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/store"
)

// Distributed counters (ADR-49; nats-server v2.15.2 processJetStreamMsg
// and checkMsgHeadersPreClusteredProposal). A stream with
// allow_msg_counter stores only counters: every publish carries
//
//	Nats-Incr: <a base-10 integer, optional sign, any size>
//
// and an empty payload. The apply function loads the last message on
// the (mapped) subject, adds the increment to its value and stores
//
//	{"val":"<the new value, base 10>"}
//
// with the publish's header kept. The PubAck says the new value:
//
//	{"stream":"C","seq":3,"val":"42"}
//
// A message copied by a source of a counter stream (it carries
// Nats-Stream-Source) is not added as its Nats-Incr says: the sourcing
// stream remembers, in the header
//
//	Nats-Counter-Sources: {"<origin stream>":{"<origin subject>":"<last value seen>"}}
//
// (encoding/json's form, keys sorted), the last value it took from each
// origin stream and subject, replaces Nats-Incr by the difference between
// the origin's new value and that one, and adds the difference. Every
// counter message carries the header once any source contributed to its
// subject, so nothing is lost when older messages go. The value is
// decided by the apply function from the stream's store alone, so every
// replica computes the same one; the size limit of the result is the
// server's max_payload the proposer put into the entry (Entry.MaxPayload).

// Header fields of counters.
const (
	hdrCounterSources = "Nats-Counter-Sources"
)

// counterValue is the body of a counter message (nats-server
// CounterValue).
type counterValue struct {
	Value string `json:"val"`
}

// counterSources is the value of Nats-Counter-Sources: by origin stream,
// by origin subject, the last value seen (nats-server CounterSources).
type counterSources map[string]map[string]string

// counterTotal is the running value of one subject while a batch is
// checked: the messages of the batch are not stored yet
// (nats-server msgCounterRunningTotal).
type counterTotal struct {
	total   big.Int
	sources counterSources
}

// checkIncr parses Nats-Incr into m.incr and refuses what nats-server
// v2.15.2 refuses before anything else of a counter: an increment that is
// not a base-10 integer (10171, also for a copy from a source); for a
// publish (not a copy), an increment on a stream without
// allow_msg_counter (10168), with a payload (10170), or with a header a
// counter cannot honour (Nats-Rollup, Nats-Expected-Stream,
// Nats-Expected-Last-Msg-Id, Nats-Expected-Last-Sequence,
// Nats-Expected-Last-Subject-Sequence[-Subject]; 10171). A copy with
// Nats-Incr into a stream without counters is stored as it is.
func (s *Stream) checkIncr(m *pub) *jserr.Error {
	v := m.value(hdrIncr)
	if len(v) == 0 {
		return nil
	}
	incr, ok := new(big.Int).SetString(string(v), 10)
	if !ok {
		return jserr.New(jserr.MessageIncrInvalid)
	}
	m.incr = incr
	if m.sourced {
		return nil
	}
	switch {
	case !s.cfg.AllowMsgCounter:
		return jserr.New(jserr.MessageIncrDisabled)
	case len(m.data) > 0:
		return jserr.New(jserr.MessageIncrPayload)
	}
	for _, key := range []string{hdrRollup, hdrExpectedStream, hdrExpectedLastMsgID, hdrExpectedSubjSubj, hdrExpectedLastSeq, hdrExpectedSubjSeq} {
		if len(m.value(key)) > 0 {
			return jserr.New(jserr.MessageIncrInvalid)
		}
	}
	return nil
}

// applyCounter turns m, a publish or copy to a counter stream, into the
// counter message to store: 10169 without Nats-Incr; else the running
// value of its subject (from running when the batch has one, else from
// the last stored message: 10172 when that is not a counter) plus the
// increment (for a copy from a source, plus what the origin gained since
// the value last seen from it), m.data the new body, the header with
// Nats-Incr and Nats-Counter-Sources rewritten as needed. The result must
// fit max, the smaller of the entry's max_payload and (when limit is set)
// the stream's max_msg_size (10054). running, when not nil, gets the
// subject's new running value.
func (s *Stream) applyCounter(m *pub, running map[string]*counterTotal, limit bool) *jserr.Error {
	if m.incr == nil {
		return jserr.New(jserr.MessageIncrMissing)
	}
	var value big.Int
	var sources counterSources
	if t, ok := running[m.subject]; ok {
		value.Set(&t.total)
		sources = t.sources.clone()
	} else if err := s.lastCounter(m.subject, &value, &sources); err != nil {
		return err
	}
	incr := new(big.Int).Set(m.incr)
	if src, ok := headerValue(m.hdr, hdrStreamSource); ok {
		if err := sources.take(src, m.subject, m.data, incr); err != nil {
			return err
		}
		m.hdr = replaceHeader(m.hdr, hdrIncr, incr.String())
	}
	value.Add(&value, incr)
	m.data = counterBody(value.String())
	if len(sources) > 0 {
		b, err := json.Marshal(sources)
		if err != nil {
			return jserr.New(jserr.MessageCounterBroken)
		}
		m.hdr = replaceHeader(m.hdr, hdrCounterSources, string(b))
	}
	max := m.maxPayload
	if limit && s.cfg.MaxMsgSize > 0 && (max <= 0 || int64(s.cfg.MaxMsgSize) < max) {
		max = int64(s.cfg.MaxMsgSize)
	}
	if max > 0 && (int64(len(m.hdr)) > max || int64(len(m.data)) > max-int64(len(m.hdr))) {
		return jserr.New(jserr.StreamMessageExceedsMaximum)
	}
	m.counter = value.String()
	if running != nil {
		t := &counterTotal{sources: sources}
		t.total.Set(&value)
		running[m.subject] = t
	}
	return nil
}

// lastCounter reads the value and the source table of the last message
// stored on subj into value and sources: zero and none when there is no
// message; 10172 when its body or Nats-Counter-Sources is not a
// counter's. A store that fails to load it gives its error (10077).
func (s *Stream) lastCounter(subj string, value *big.Int, sources *counterSources) *jserr.Error {
	last, err := s.store.LoadLast(subj)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return storeError(err)
	}
	var v counterValue
	if json.Unmarshal(last.Data, &v) != nil {
		return jserr.New(jserr.MessageCounterBroken)
	}
	if cs, ok := headerValue(last.Header, hdrCounterSources); ok && len(cs) > 0 {
		if json.Unmarshal(cs, sources) != nil {
			return jserr.New(jserr.MessageCounterBroken)
		}
	}
	// As nats-server, a "val" that is not a number is read as far as
	// math/big reads it ("12x" is 12, "x" is 0) rather than refused.
	value.SetString(v.Value, 10)
	return nil
}

// take records in cs the value a copy from a source brings (body data,
// the origin's counter message) and sets incr to what the origin gained
// since the value last seen from the same origin stream and subject.
// src is the copy's Nats-Stream-Source: "<origin> <seq> <filter>
// <destination> <origin subject> ..."; with fewer than five fields the
// origin subject is taken to be subj. 10172 when data is not a counter's
// body.
func (cs *counterSources) take(src []byte, subj string, data []byte, incr *big.Int) *jserr.Error {
	fields := strings.Split(string(src), " ")
	origin, origSubj := fields[0], subj
	if len(fields) >= 5 {
		origSubj = fields[4]
	}
	var v counterValue
	if json.Unmarshal(data, &v) != nil {
		return jserr.New(jserr.MessageCounterBroken)
	}
	var sourced, previous big.Int
	sourced.SetString(v.Value, 10) // as lastCounter reads a "val"
	if *cs == nil {
		*cs = counterSources{}
	}
	if (*cs)[origin] == nil {
		(*cs)[origin] = map[string]string{}
	}
	previous.SetString((*cs)[origin][origSubj], 10)
	(*cs)[origin][origSubj] = sourced.String()
	incr.Sub(&sourced, &previous)
	return nil
}

// clone returns a deep copy of cs (nil for nil).
func (cs counterSources) clone() counterSources {
	if cs == nil {
		return nil
	}
	out := make(counterSources, len(cs))
	for origin, subjects := range cs {
		m := make(map[string]string, len(subjects))
		for k, v := range subjects {
			m[k] = v
		}
		out[origin] = m
	}
	return out
}

// counterBody returns {"val":"<v>"}, as nats-server writes it.
func counterBody(v string) []byte {
	b := make([]byte, 0, len(v)+11)
	b = append(b, `{"val":`...)
	b = strconv.AppendQuote(b, v)
	return append(b, '}')
}
