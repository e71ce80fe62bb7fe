package jetstream

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/snapshot"
	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/stream"
	"github.com/nats-io/nuid"
)

// Stream snapshots ($JS.API.STREAM.SNAPSHOT), as nats-server v2.15.2 sends
// them (jetstream_api.go jsStreamSnapshotRequest and streamSnapshot;
// stream_backup.go streamSnapshotV2). The API answers with the stream's
// config and state; then the snapshot (package snapshot's format) goes
// to the requester's deliver subject in chunks, each with a reply
// subject $JS.SNAPSHOT.ACK.<stream>.<id>.<size>.<index> that the
// requester answers to ask for more: at most window/chunk chunks are
// unanswered at a time. The last chunk (shorter than the others, or
// none when the data fill whole chunks) has no reply subject, and an
// empty message ends the snapshot: with the header "NATS/1.0 204" once a
// full chunk was sent (none before, so a snapshot smaller than a chunk
// ends with a bare empty message), "NATS/1.0 408 No Interest" when the
// requester unsubscribed, "NATS/1.0 408 No Flow Response" when 5 s passed
// without an answer, "NATS/1.0 500 <error>" when the snapshot failed.

// Snapshot chunking, nats-server v2.15.2's defaults and bounds.
const (
	snapChunkDefault  = 128 * 1024
	snapChunkMin      = 1024
	snapChunkMax      = 1024 * 1024
	snapWindowDefault = 8 * 1024 * 1024
	snapWindowMin     = 1024
	snapWindowMax     = 32 * 1024 * 1024
	// snapInterestWait is how long it waits for the requester to
	// subscribe to the deliver subject before it sends anyway.
	snapInterestWait = 2 * time.Second
	// snapInterestPoll is how often it looks for the requester's
	// subscription (the transport tells nothing when it comes or goes).
	snapInterestPoll = 10 * time.Millisecond
)

// snapAckTimeout is how long the sender waits for an answer before it
// gives up (408 No Flow Response). A variable for tests.
var snapAckTimeout = 5 * time.Second

// SnapshotRequest holds the options of a STREAM.SNAPSHOT request.
type SnapshotRequest struct {
	DeliverSubject string // where the chunks go; checked by the caller
	NoConsumers    bool   // leave the consumers out
	ChunkSize      int    // bytes per chunk; 0 = 128 KiB, clamped to 1 KiB..1 MiB
	WindowSize     int    // unanswered bytes at most; 0 = 8 MiB, clamped to 1 KiB..32 MiB
	// Client is the requester's ClientInfo JSON, which the snapshot
	// advisories name; nil when not known ("client":null).
	Client []byte
}

// SnapshotStart is a snapshot that has begun: the stream's config (as
// stored, for the API response) and state when it began, and Send, which
// starts streaming the snapshot to the deliver subject on a goroutine of
// its own and returns. The caller answers the request first and then
// calls Send once.
type SnapshotStart struct {
	Config stream.Config
	State  StreamState
	Send   func()
}

// Snapshot begins a snapshot of stream name: it waits until every stored
// message is durable (only durable messages are snapshotted), takes the
// stream's state and the consumers' configs and states, and returns what
// the API answers with and the sender. Errors: 10059 stream not found,
// 10064 "snapshot failed: <err>" when the store cannot be synced.
func (js *JetStream) Snapshot(name string, req SnapshotRequest) (*SnapshotStart, *jserr.Error) {
	r, jerr := js.lookup(name)
	if jerr != nil {
		return nil, jerr
	}
	st := r.Store().State(false)
	if err := r.Store().WaitDurable(st.LastSeq); err != nil {
		return nil, jserr.New(jserr.StreamSnapshot, jserr.Sub("err", err))
	}
	state := toState(st, nil)
	state.Consumers = r.numConsumers()
	var consumers []snapshot.ConsumerEntry
	var names []string
	if !req.NoConsumers {
		names, consumers = r.consumerSnapshots(st.LastSeq)
	}
	archState := state
	archState.Consumers = len(consumers)
	start := &SnapshotStart{Config: r.Config(), State: state}
	started := js.now().UTC()
	client := advisoryClient(req.Client)
	start.Send = func() {
		if !js.background(func() {
			js.adviseSnapshotCreate(name, state, client)
			pr, pw := io.Pipe()
			go func() {
				pw.CloseWithError(r.writeSnapshot(pw, archState, names, consumers))
			}()
			err := js.sendSnapshot(r, pr, req)
			_ = pr.CloseWithError(errSnapshotStopped) // the writer stops if the sender gave up
			js.adviseSnapshotComplete(name, started, client, err)
			if err != nil {
				js.logf("jetstream: snapshot of stream %s failed: %v", name, err)
			}
		}) {
			js.tr.Publish(req.DeliverSubject, "", fmt.Appendf(nil, "NATS/1.0 500 %s\r\n\r\n", errShutdown), nil)
		}
	}
	return start, nil
}

var (
	errSnapshotStopped = errors.New("snapshot stopped")
	errShutdown        = errors.New("server shutdown")
)

// consumerSnapshots returns the names and snapshot entries of the
// stream's consumers, in name order, bounded to the stream's last
// sequence last as nats-server bounds them.
func (r *streamEntry) consumerSnapshots(last uint64) ([]string, []snapshot.ConsumerEntry) {
	names := r.consumerNames()
	var out []snapshot.ConsumerEntry
	var kept []string
	for _, name := range names {
		r.cons.mu.Lock()
		c := r.cons.byName[name]
		r.cons.mu.Unlock()
		if c == nil {
			continue
		}
		cfg, st := c.ConfigAndState()
		cj, err := json.Marshal(&cfg)
		if err != nil {
			continue
		}
		out = append(out, snapshot.ConsumerEntry{Config: cj, State: toSnapshotState(st, last)})
		kept = append(kept, name)
	}
	return kept, out
}

// toSnapshotState converts a consumer state to nats-server's form in a
// snapshot, without what lies beyond the stream's last sequence last.
// Dead-letter marks (cairn's own) are left out: the messages stay pending
// or held, and a redelivery or +TERM moves them again.
func toSnapshotState(st *store.ConsumerState, last uint64) *snapshot.ConsumerState {
	out := &snapshot.ConsumerState{
		Delivered: snapshot.SequencePair{Consumer: st.Delivered.Consumer, Stream: min(st.Delivered.Stream, last)},
		AckFloor:  snapshot.SequencePair{Consumer: st.AckFloor.Consumer, Stream: min(st.AckFloor.Stream, last)},
	}
	for _, p := range st.Pending {
		if p.Stream > last {
			continue
		}
		if out.Pending == nil {
			out.Pending = map[uint64]*snapshot.Pending{}
		}
		out.Pending[p.Stream] = &snapshot.Pending{Sequence: p.Sequence, Timestamp: p.Timestamp}
	}
	for seq, n := range st.Redelivered {
		if seq > last {
			continue
		}
		if out.Redelivered == nil {
			out.Redelivered = map[uint64]uint64{}
		}
		out.Redelivered[seq] = n
	}
	return out
}

// writeSnapshot writes the archive: the state, the consumers, every
// stored message from the first through state.LastSeq, the end entry.
func (r *streamEntry) writeSnapshot(w io.Writer, state StreamState, names []string, consumers []snapshot.ConsumerEntry) error {
	aw := snapshot.NewWriter(w)
	now := r.js.now().UnixNano()
	sj, err := json.Marshal(state)
	if err != nil {
		return err
	}
	if err := aw.WriteEntry(snapshot.Header{Name: snapshot.StateName, Timestamp: now, PayloadSize: int64(len(sj))}, sj); err != nil {
		return err
	}
	for i, ce := range consumers {
		cj, err := json.Marshal(ce)
		if err != nil {
			return err
		}
		h := snapshot.Header{Name: snapshot.ConsumerPrefix + names[i], Timestamp: now, PayloadSize: int64(len(cj))}
		if err := aw.WriteEntry(h, cj); err != nil {
			return err
		}
	}
	var buf []byte
	for seq := state.FirstSeq; seq <= state.LastSeq && state.LastSeq > 0; {
		m, err := r.Store().LoadNext(nil, seq)
		if errors.Is(err, store.ErrEOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("couldn't load next message after seq %d: %w", seq, err)
		}
		if m.Seq > state.LastSeq {
			break
		}
		buf = append(append(buf[:0], m.Header...), m.Data...)
		h := snapshot.Header{Name: m.Subject, Timestamp: m.Time, Sequence: m.Seq,
			HeaderSize: int64(len(m.Header)), PayloadSize: int64(len(m.Data))}
		if err := aw.WriteEntry(h, buf); err != nil {
			return err
		}
		seq = m.Seq + 1
	}
	return aw.End()
}

// Status frames that end a snapshot (nats-server v2.15.2 streamSnapshot).
var (
	snapEOF        = []byte("NATS/1.0 204\r\n\r\n")
	snapNoInterest = []byte("NATS/1.0 408 No Interest\r\n\r\n")
	snapNoFlow     = []byte("NATS/1.0 408 No Flow Response\r\n\r\n")
)

// sendSnapshot streams what rd yields to req.DeliverSubject in chunks
// under flow control (the section comment at the top of this file) and
// ends it with the status frame; it returns why it stopped early.
func (js *JetStream) sendSnapshot(r *streamEntry, rd io.Reader, req SnapshotRequest) error {
	chunkSize, window := snapshotWindow(req.ChunkSize, req.WindowSize)
	deliver := req.DeliverSubject
	// Losing interest ends the snapshot only once there was some (as
	// nats-server's interest notification fires on a change).
	seen := js.waitInterest(deliver, snapInterestWait)

	slots := make(chan struct{}, window/chunkSize)
	for range cap(slots) {
		slots <- struct{}{}
	}
	ackSubj := fmt.Sprintf("$JS.SNAPSHOT.ACK.%s.%s", r.Name(), nuid.Next())
	sub, err := js.tr.Subscribe(ackSubj+".>", "", func(string, string, []byte, []byte) {
		select {
		case slots <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return err
	}
	defer sub.Unsubscribe()

	var end []byte
	var sendErr error
	chunk := make([]byte, chunkSize)
	poll := time.NewTicker(100 * time.Millisecond)
	defer poll.Stop()
	ackWait := time.NewTimer(snapAckTimeout)
	defer ackWait.Stop()
	for index := 1; ; {
		if !js.waitSlot(slots, poll.C, ackWait.C, deliver, &seen) {
			if seen && !js.hasExactInterest(deliver) {
				end, sendErr = snapNoInterest, errors.New("no interest")
			} else {
				end, sendErr = snapNoFlow, errors.New("no flow response")
			}
			break
		}
		n, rerr := io.ReadFull(rd, chunk)
		if rerr != nil {
			if rerr != io.EOF && rerr != io.ErrUnexpectedEOF {
				end, sendErr = fmt.Appendf(nil, "NATS/1.0 500 %s\r\n\r\n", rerr), rerr
				break
			}
			if n > 0 {
				js.tr.Publish(deliver, "", nil, chunk[:n])
			}
			break
		}
		js.tr.Publish(deliver, fmt.Sprintf("%s.%d.%d", ackSubj, n, index), nil, chunk[:n])
		if end == nil {
			end = snapEOF
		}
		ackWait.Reset(snapAckTimeout)
		index++
	}
	js.tr.Publish(deliver, "", end, nil)
	return sendErr
}

// waitSlot waits for a free slot of the window; it reports false when
// the requester, seen listening on deliver before, stopped, when nothing
// was answered for snapAckTimeout, or at shutdown.
func (js *JetStream) waitSlot(slots chan struct{}, poll, ackWait <-chan time.Time, deliver string, seen *bool) bool {
	for {
		interest := js.hasExactInterest(deliver)
		if *seen && !interest {
			return false
		}
		*seen = *seen || interest
		select {
		case <-slots:
			return true
		case <-ackWait:
			return false
		case <-js.quit:
			return false
		case <-poll:
		}
	}
}

// waitInterest waits up to d for a subscriber of subj and reports
// whether one came.
func (js *JetStream) waitInterest(subj string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for !js.hasExactInterest(subj) {
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-js.quit:
			return false
		case <-time.After(snapInterestPoll):
		}
	}
	return true
}

// snapshotWindow applies nats-server's defaults and bounds to a chunk
// size and a window size; the window holds at least one chunk and is a
// whole number of them.
func snapshotWindow(chunk, window int) (int, int) {
	if chunk == 0 {
		chunk = snapChunkDefault
	}
	if window == 0 {
		window = snapWindowDefault
	}
	chunk = min(max(snapChunkMin, chunk), snapChunkMax)
	window = min(max(snapWindowMin, window), snapWindowMax)
	window = max(window, chunk)
	return chunk, window / chunk * chunk
}
