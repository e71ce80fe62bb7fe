package streamckpt

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"path"
	"slices"
	"time"

	"github.com/cairnmq/cairn/internal/cluster/catchup"
	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/store/filestore"
	"github.com/cairnmq/cairn/internal/stream"
)

// Stream snapshots: the package comment's "Snapshots" section.

// PinFor is how long a capture keeps the store's removed records on disk
// after it was last handed out or served from (package comment,
// "Capture").
const PinFor = time.Minute

// StageName is the staging file of an install, in Config.Dir.
const StageName = "catchup.stage"

// capture is the latest manifest this replica captured.
type capture struct {
	index uint64
	data  []byte
}

// SnapshotAt returns the manifest of this replica's latest capture when
// it is at or above min, or asks the checkpoint goroutine for a new one
// and returns raftnode.ErrSnapshotPending (streamlog.Snapshotter; it
// never blocks). Handing a capture out pins it (PinFor).
func (r *Replica) SnapshotAt(min uint64) (uint64, []byte, error) {
	r.capMu.Lock()
	c := r.capture
	if c == nil || c.index < min {
		r.capWant = max(r.capWant, min)
		c = nil
	}
	r.capMu.Unlock()
	if c == nil {
		select {
		case r.capPoke <- struct{}{}:
		default:
		}
		return 0, nil, raftnode.ErrSnapshotPending
	}
	r.pin()
	return c.index, c.data, nil
}

// pin keeps the records of messages removed after the latest capture on
// disk for PinFor from now: checkpoints taken meanwhile do not tell the
// store their position is saved (filestore.Store.PositionSaved), so the
// segments emptied since stay.
func (r *Replica) pin() { r.pinnedUntil.Store(time.Now().Add(PinFor).UnixNano()) }

func (r *Replica) pinned() bool { return time.Now().UnixNano() < r.pinnedUntil.Load() }

// Message serves the message at seq to a replica catching up
// (catchup.Source): as the store has it, or its record when it was
// removed since the capture (filestore.Store.LoadRemoved). It pins the
// capture.
func (r *Replica) Message(seq uint64) (*store.StoredMsg, error) {
	r.pin()
	if r.store == nil {
		return r.ms.Load(seq) // a memory store keeps no removed record
	}
	return r.store.LoadRemoved(seq)
}

// savePosition tells the store pos is saved, unless a capture is pinned:
// then the newest position waits (unsaved) until the pin ends. Called
// with r.mu held.
func (r *Replica) savePosition(pos *filestore.Position) {
	if r.store == nil {
		return // a memory stream's: no positions
	}
	if pos != nil {
		r.unsaved = pos
	}
	if r.unsaved != nil && !r.pinned() {
		r.store.PositionSaved(*r.unsaved)
		r.unsaved = nil
	}
}

// captureNow takes a capture at the index the stream's state reflects
// (package comment, "Capture") if one was asked for above the latest.
func (r *Replica) captureNow() error {
	r.capMu.Lock()
	want, have := r.capWant, r.capture
	r.capMu.Unlock()
	if have != nil && have.index >= want {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rt == nil || r.log == nil {
		return ErrStopped
	}
	var (
		index uint64
		st    store.State
		ck    *stream.Checkpoint
	)
	held := r.rt.Held(func() {
		index = r.rt.AppliedIndex()
		if data, latest := r.log.Seen(); data <= index {
			index = max(index, latest)
		}
		st = r.ms.State(true)
		ck, _ = r.rt.Checkpoint()
		r.pin() // before the apply goroutine goes on: nothing removed after index may go
	})
	if !held {
		return ErrStopped
	}
	if st.Lost != nil {
		return fmt.Errorf("the store reports %d lost messages: no snapshot is taken from a damaged replica", len(st.Lost.Msgs))
	}
	state, err := ck.Append(nil)
	if err != nil {
		return err
	}
	m := &manifest{index: index, source: r.cfg.Server, first: st.FirstSeq, last: st.LastSeq, msgs: st.Msgs, bytes: st.Bytes,
		gaps: gapsOf(st.Deleted), state: state}
	data := m.encode()
	if len(data) > maxManifest {
		return fmt.Errorf("a manifest of %d bytes (%d deleted sequences) is too large for a snapshot", len(data), st.NumDeleted)
	}
	r.capMu.Lock()
	r.capture = &capture{index: index, data: data}
	r.capMu.Unlock()
	r.cfg.Infof("streamckpt: group %d: captured the stream at index %d for a snapshot (%d messages, %d-%d)", r.cfg.Group, index, st.Msgs, st.FirstSeq, st.LastSeq)
	return nil
}

// Restore installs the snapshot at index whose manifest is data
// (streamlog.Snapshotter; raftnode runs it in the background): the
// messages this replica lacks are fetched from the manifest's source, or
// the other replicas, into the staging file; then, the stream's apply
// goroutine held, the store is made to hold exactly the manifest's
// messages, fsynced, checked against the manifest, the stream's state
// replaced, and the checkpoint at index written, before it returns
// (package comment, "Install"). Errors: ErrBadManifest (fences),
// raftnode.ErrRestoreRetry wrapping why the messages could not be had
// (the replica goes on as it was), and a store or file-system error, or
// a store that ends unlike the manifest, during the install (fences: the
// store was changed; a restart rolls it back to the last checkpoint).
func (r *Replica) Restore(index uint64, data []byte) error {
	m, err := decodeManifest(data)
	if err != nil {
		return err
	}
	if m.index != index {
		return fmt.Errorf("%w: the manifest is at %d, the snapshot at %d", ErrBadManifest, m.index, index)
	}
	if r.cfg.Catchup == nil {
		return fmt.Errorf("%w: no catch-up service", raftnode.ErrRestoreRetry)
	}
	r.cfg.Infof("streamckpt: group %d: installing the snapshot at %d (sequences %d-%d, %d messages) from %s", r.cfg.Group, index, m.first, m.last, m.msgs, m.source)
	stage := path.Join(r.cfg.Dir, StageName)
	defer func() { _ = r.fs.Remove(stage) }()
	if err := r.stage(m, stage); err != nil {
		if errors.Is(err, raftnode.ErrRestoreRetry) {
			return err
		}
		return fmt.Errorf("%w: %w", raftnode.ErrRestoreRetry, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rt == nil {
		return fmt.Errorf("%w: %w", raftnode.ErrRestoreRetry, ErrStopped)
	}
	var ierr error
	if !r.rt.Held(func() { ierr = r.install(m, stage) }) {
		return fmt.Errorf("%w: %w", raftnode.ErrRestoreRetry, ErrStopped)
	}
	if ierr != nil {
		return fmt.Errorf("streamckpt: group %d: install of the snapshot at %d: %w", r.cfg.Group, index, ierr)
	}
	r.cfg.Infof("streamckpt: group %d: installed the snapshot at %d", r.cfg.Group, index)
	return nil
}

// stage fetches the manifest's messages past the store's last sequence
// into the staging file (package comment, "Staging file").
func (r *Replica) stage(m *manifest, name string) error {
	if err := r.ensureDir(); err != nil {
		return err
	}
	f, err := r.fs.Create(name)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 256<<10)
	last := r.ms.State(false).LastSeq
	want := catchup.Want{First: max(m.first, last+1), Last: m.last}
	want.Gaps = gapsBetween(m.gaps, want.First, want.Last)
	if want.First <= want.Last {
		sources := []raftnode.ServerID{m.source}
		if r.cfg.Peers != nil {
			for _, s := range r.cfg.Peers() {
				if !slices.Contains(sources, s) && s != r.cfg.Server {
					sources = append(sources, s)
				}
			}
		}
		err = r.cfg.Catchup.Fetch(r.ctx, r.cfg.Group, sources, want, func(msg *store.StoredMsg) error {
			_, err := w.Write(appendStaged(nil, msg))
			return err
		})
	}
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// gapsBetween returns the parts of gaps within first..last.
func gapsBetween(gaps []catchup.Range, first, last uint64) []catchup.Range {
	var out []catchup.Range
	for _, g := range gaps {
		if g.To >= first && g.From <= last {
			out = append(out, catchup.Range{From: max(g.From, first), To: min(g.To, last)})
		}
	}
	return out
}

// appendStaged appends a staging record: seq u64, time i64, subject
// length u16, header length u32, data length u32, subject, header, data,
// CRC-32C u32 of the record's bytes before it.
func appendStaged(b []byte, m *store.StoredMsg) []byte {
	start := len(b)
	b = binary.LittleEndian.AppendUint64(b, m.Seq)
	b = binary.LittleEndian.AppendUint64(b, uint64(m.Time))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(m.Subject)))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(m.Header)))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(m.Data)))
	b = append(b, m.Subject...)
	b = append(b, m.Header...)
	b = append(b, m.Data...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[start:], crcTable))
}

// readStaged reads the next staging record; io.EOF at the end.
func readStaged(r *bufio.Reader) (*store.StoredMsg, error) {
	var h [26]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		if err == io.ErrUnexpectedEOF {
			return nil, errors.New("staging file: truncated record")
		}
		return nil, err
	}
	ns, nh, nd := int(binary.LittleEndian.Uint16(h[16:])), int(binary.LittleEndian.Uint32(h[18:])), int(binary.LittleEndian.Uint32(h[22:]))
	if nh > filestore.MaxRecordSize || nd > filestore.MaxRecordSize {
		return nil, fmt.Errorf("staging file: a record of %d+%d bytes", nh, nd)
	}
	body := make([]byte, ns+nh+nd+4)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, errors.New("staging file: truncated record")
	}
	crc := crc32.Update(crc32.Checksum(h[:], crcTable), crcTable, body[:len(body)-4])
	if crc != binary.LittleEndian.Uint32(body[len(body)-4:]) {
		return nil, errors.New("staging file: CRC mismatch")
	}
	m := &store.StoredMsg{Seq: binary.LittleEndian.Uint64(h[:]), Time: int64(binary.LittleEndian.Uint64(h[8:])), Subject: string(body[:ns])}
	if nh > 0 {
		m.Header = body[ns : ns+nh]
	}
	if nd > 0 {
		m.Data = body[ns+nh : ns+nh+nd]
	}
	return m, nil
}

// install makes the store hold the manifest's messages and the stream its
// state, with the apply goroutine held and r.mu held (package comment,
// "Install").
func (r *Replica) install(m *manifest, stage string) error {
	st := r.ms
	cur := st.State(false)
	if cur.LastSeq > m.last {
		return fmt.Errorf("the store ends at %d, past the snapshot's %d", cur.LastSeq, m.last)
	}
	cfg, err := stream.CheckpointConfig(m.state)
	if err != nil {
		return err
	}
	limits := cfg.StoreConfig()
	relaxed := store.Config{FirstSeq: limits.FirstSeq, MsgTTL: limits.MsgTTL, SubjectDeleteMarkers: limits.SubjectDeleteMarkers, Compress: limits.Compress}
	if err := st.UpdateConfig(relaxed); err != nil {
		return err
	}
	// What the store holds that the snapshot does not: below its first
	// sequence, and in its gaps.
	if cur.Msgs > 0 && cur.FirstSeq < m.first {
		if _, err := st.Compact(m.first); err != nil {
			return err
		}
	}
	for _, g := range m.gaps {
		if g.From > cur.LastSeq {
			break
		}
		to := min(g.To, cur.LastSeq)
		if st.NumPending(nil, g.From, to) == 0 {
			continue
		}
		var seqs []uint64
		for seq := g.From; seq <= to; {
			msg, err := st.LoadNext(nil, seq)
			if err != nil || msg.Seq > to {
				break
			}
			seqs = append(seqs, msg.Seq)
			seq = msg.Seq + 1
		}
		if _, err := st.DeleteMany(seqs); err != nil {
			return err
		}
	}
	// What the snapshot holds past the store's end, from the staging file.
	f, err := r.fs.Open(stage)
	if err != nil {
		return err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return err
	}
	br := bufio.NewReaderSize(io.NewSectionReader(f, 0, size), 256<<10)
	for {
		msg, err := readStaged(br)
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		last := st.State(false).LastSeq
		if msg.Seq <= last {
			continue // applied meanwhile by the log before the hold: the same message
		}
		if msg.Seq > last+1 {
			if err := st.SkipTo(msg.Seq); err != nil {
				return err
			}
		}
		seq, err := st.Append(store.Msg{Subject: msg.Subject, Header: msg.Header, Data: msg.Data, Time: msg.Time})
		if err != nil {
			return err
		}
		if seq != msg.Seq {
			return fmt.Errorf("message %d stored at %d", msg.Seq, seq)
		}
	}
	if last := st.State(false).LastSeq; last < m.last {
		if err := st.SkipTo(m.last + 1); err != nil {
			return err
		}
	}
	if s := st.State(false); s.FirstSeq < m.first {
		if _, err := st.Compact(m.first); err != nil {
			return err
		}
	}
	if err := st.UpdateConfig(limits); err != nil {
		return err
	}
	var pos filestore.Position
	if r.store != nil {
		if pos, err = r.store.Position(); err != nil {
			return err
		}
	}
	if s := st.State(false); s.FirstSeq != m.first || s.LastSeq != m.last || s.Msgs != m.msgs || s.Bytes != m.bytes || s.Lost != nil {
		return fmt.Errorf("the store holds %d messages (%d bytes) in %d-%d after the install, the snapshot %d (%d bytes) in %d-%d",
			s.Msgs, s.Bytes, s.FirstSeq, s.LastSeq, m.msgs, m.bytes, m.first, m.last)
	}
	if err := r.rt.RestoreHeld(m.state, m.index); err != nil {
		return err
	}
	if r.store != nil { // a memory stream's replica keeps no checkpoint file
		if err := writeFile(r.fs, r.cfg.Dir, &checkpoint{group: r.cfg.Group, replica: r.cfg.Replica, index: m.index, pos: pos, state: m.state}); err != nil {
			return err
		}
		r.savePosition(&pos)
	}
	r.lastIndex = m.index
	r.ckptBytes.Store(r.log.AppliedBytes()) // EveryBytes counts from this checkpoint
	r.log.Restored(m.index)
	return nil
}
