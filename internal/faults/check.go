package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// stored is one message read back from the stream.
type stored struct {
	seq  uint64
	k    key
	data []byte
	ok   bool // headers parsed
}

// readStream reads every message of the stream in order with an ordered
// consumer, until it has the stream's last sequence (from stream info)
// or d has passed. nats.go's ordered consumer retries the creation of
// its consumer without end inside Fetch, even on a closed connection, so
// a server that never creates it would hang the read: the read runs on
// its own goroutine, and past the deadline (and 5 s) the connection is
// closed and the read abandoned.
func readStream(js jetstream.JetStream, stream string, d time.Duration) ([]stored, error) {
	type result struct {
		msgs []stored
		err  error
	}
	done := make(chan result, 1)
	go func() {
		msgs, err := readOrdered(js, stream, d)
		done <- result{msgs, err}
	}()
	select {
	case r := <-done:
		return r.msgs, r.err
	case <-time.After(d + 5*time.Second):
		js.Conn().Close()
		return nil, fmt.Errorf("the ordered consumer's read did not return in %v (nats.go recreating its consumer)", d+5*time.Second)
	}
}

// readOrdered is readStream's read.
func readOrdered(js jetstream.JetStream, stream string, d time.Duration) ([]stored, error) {
	deadline := time.Now().Add(d)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, err
	}
	last := info.State.LastSeq
	var out []stored
	if info.State.Msgs == 0 {
		return nil, nil
	}
	oc, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, err
	}
	var at uint64
	for at < last {
		if time.Now().After(deadline) {
			return out, fmt.Errorf("read %d of stream up to sequence %d", at, last)
		}
		batch, err := oc.Fetch(1000, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		for m := range batch.Messages() {
			md, err := m.Metadata()
			if err != nil {
				continue
			}
			k, ok := parse(m.Headers())
			out = append(out, stored{seq: md.Sequence.Stream, k: k, data: m.Data(), ok: ok})
			at = md.Sequence.Stream
		}
	}
	return out, nil
}

// Report is the history check of one run.
type Report struct {
	Attempted, Acked, Stored int
	Lost                     []string // acknowledged, not in the stream
	Duplicates               []string // stored more than once
	Phantoms                 []string // stored, never attempted or with other bytes
	AckMismatch              []string // PubAck sequence differs from where it is stored
	OrderViolations          []string // a producer's messages out of order in the stream
	ConsumerMissing          []string // stored, never delivered by the durable consumer
	Problems                 []string // anything else (unreadable stream, stuck replica, ...)
}

// OK reports whether the run passed every check.
func (r *Report) OK() bool {
	return len(r.Lost)+len(r.Duplicates)+len(r.Phantoms)+len(r.AckMismatch)+
		len(r.OrderViolations)+len(r.ConsumerMissing)+len(r.Problems) == 0
}

// String summarises the failures (at most 5 of each kind).
func (r *Report) String() string {
	if r.OK() {
		return "ok"
	}
	var b strings.Builder
	for _, part := range []struct {
		name string
		list []string
	}{{"lost", r.Lost}, {"duplicates", r.Duplicates}, {"phantoms", r.Phantoms},
		{"ack mismatch", r.AckMismatch}, {"order", r.OrderViolations},
		{"consumer missing", r.ConsumerMissing}, {"problems", r.Problems}} {
		if len(part.list) == 0 {
			continue
		}
		l := part.list
		if len(l) > 5 {
			l = append(l[:5:5], "...")
		}
		fmt.Fprintf(&b, "%s %d: %s; ", part.name, len(part.list), strings.Join(l, ", "))
	}
	return strings.TrimSuffix(b.String(), "; ")
}

// check compares the producers' history with the stream's content:
// every acknowledged message is stored, at the sequence of its PubAck;
// nothing is stored twice (every retry carried the same Nats-Msg-Id) or
// without having been attempted; each producer's messages are in the
// stream in the order the producer sent them, for a synchronous producer
// all of them, for an asynchronous one those never sent twice (a retry
// legitimately lands after later messages).
func check(h *history, msgs []stored, async map[int]bool) *Report {
	rep := &Report{Stored: len(msgs)}
	h.mu.Lock()
	defer h.mu.Unlock()
	rep.Attempted = len(h.recs)
	at := map[key]uint64{}
	lastSeq := map[int]uint64{} // per producer, the last in-order seq seen
	for _, m := range msgs {
		if !m.ok {
			rep.Phantoms = append(rep.Phantoms, fmt.Sprintf("seq %d without producer headers", m.seq))
			continue
		}
		if prev, dup := at[m.k]; dup {
			rep.Duplicates = append(rep.Duplicates, fmt.Sprintf("%s at %d and %d", m.k, prev, m.seq))
			continue
		}
		at[m.k] = m.seq
		r := h.recs[m.k]
		if r == nil || !bytes.Equal(m.data, payload(m.k)) {
			rep.Phantoms = append(rep.Phantoms, fmt.Sprintf("%s at %d", m.k, m.seq))
			continue
		}
		if async[m.k.p] && r.retried {
			continue
		}
		if m.k.seq <= lastSeq[m.k.p] {
			rep.OrderViolations = append(rep.OrderViolations,
				fmt.Sprintf("%s at %d after p%d#%d", m.k, m.seq, m.k.p, lastSeq[m.k.p]))
		}
		lastSeq[m.k.p] = m.k.seq
	}
	keys := make([]key, 0, len(h.recs))
	for k, r := range h.recs {
		if r.acked {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].p < keys[j].p || keys[i].p == keys[j].p && keys[i].seq < keys[j].seq
	})
	rep.Acked = len(keys)
	for _, k := range keys {
		r := h.recs[k]
		seq, ok := at[k]
		switch {
		case !ok:
			rep.Lost = append(rep.Lost, fmt.Sprintf("%s (acked at %d)", k, r.ackSeq))
		case seq != r.ackSeq:
			rep.AckMismatch = append(rep.AckMismatch, fmt.Sprintf("%s acked at %d, stored at %d", k, r.ackSeq, seq))
		}
	}
	return rep
}

// replicaState is a server's own replica of the stream, from its /jsz.
type replicaState struct {
	Messages uint64 `json:"messages"`
	Bytes    uint64 `json:"bytes"`
	FirstSeq uint64 `json:"first_seq"`
	LastSeq  uint64 `json:"last_seq"`
}

// localState reads the state of the stream's replica on the server whose
// monitoring URL is mon (/jsz?streams=true, nats-server's account detail).
func localState(mon, stream string) (*replicaState, error) {
	cl := http.Client{Timeout: 2 * time.Second}
	resp, err := cl.Get(mon + "/jsz?accounts=true&streams=true")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var jsz struct {
		Accounts []struct {
			Streams []struct {
				Name  string       `json:"name"`
				State replicaState `json:"state"`
			} `json:"stream_detail"`
		} `json:"account_details"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&jsz); err != nil {
		return nil, err
	}
	for _, a := range jsz.Accounts {
		for _, s := range a.Streams {
			if s.Name == stream {
				return &s.State, nil
			}
		}
	}
	return nil, fmt.Errorf("%s: no stream %s in /jsz", mon, stream)
}
