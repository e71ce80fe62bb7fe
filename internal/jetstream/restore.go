package jetstream

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/jetstream/consumerrun"
	"github.com/cairnmq/cairn/internal/jetstream/metafile"
	"github.com/cairnmq/cairn/internal/jetstream/streamrun"
	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/snapshot"
	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/store/memstore"
	"github.com/cairnmq/cairn/internal/stream"
	"github.com/nats-io/nuid"
)

// Stream restores ($JS.API.STREAM.RESTORE), as nats-server v2.15.2 takes
// them (jetstream_api.go jsStreamRestoreRequest and processStreamRestore;
// stream_backup.go RestoreStreamV2). The API answers with a deliver
// subject $JS.SNAPSHOT.RESTORE.<stream>.<id>; the client sends the
// snapshot there in chunks, each a request that is answered with an
// empty message once the chunk is taken, and then an empty message. The
// answer to that one is a stream_create_response: the new stream's info,
// or the error ("restore failed: <why>", 10062, or the API error that
// stopped it). 5 s without a chunk abandon the restore without an
// answer, as nats-server does.
//
// Unlike nats-server, which creates the stream when the snapshot's state
// arrives and fills it as the messages come, cairn builds the stream
// aside and installs it only once the whole snapshot was read and
// checked: a damaged or cut snapshot (package snapshot: the S2 chunks'
// CRC-32C, the end entry) leaves nothing behind, and a crash during a
// restore leaves nothing a start would take for a stream. A file stream
// is built in <streams>/.restore.<id>/ (a start removes it: dirs.go),
// with its consumers, and renamed into place; a memory stream in memory.

// restoreStallTimeout abandons a restore that receives no chunk for this
// long (nats-server's activityInterval). A variable for tests.
var restoreStallTimeout = 5 * time.Second

// restoreMaxQueued bounds the chunk bytes queued for a restore: a client
// that sends chunks without waiting for their answers fails its restore
// beyond it instead of growing the server's memory.
const restoreMaxQueued = 64 << 20

// restoreMaxEntry bounds one entry of a snapshot being restored (a
// message, a consumer's JSON), so that a damaged size cannot make the
// server allocate without bound.
const restoreMaxEntry = 256 << 20

// RestoreDone receives the outcome of a restore, once: the reply subject
// to answer ("" when nothing is to be answered), and the restored
// stream's info or the error. It runs on the restore's goroutine.
type RestoreDone func(reply string, info *StreamInfo, err *jserr.Error)

// BeginRestore checks a restore request for stream cfg.Name as
// nats-server v2.15.2 does before it answers (the config as a create
// checks it, the storage limits, a stream or a restore of that name:
// 10130), subscribes to a new deliver subject for the chunks and returns
// it; done is called when the restore ends. client is the requester's
// ClientInfo JSON for the restore advisories (nil when not known: they
// say "client":null). The caller has checked the name (10056, 10128).
func (js *JetStream) BeginRestore(cfg stream.Config, client []byte, done RestoreDone) (string, *jserr.Error) {
	if err := cfg.PrepareRestore(); err != nil {
		return "", err
	}
	js.mu.Lock()
	if js.closed {
		js.mu.Unlock()
		return "", jserr.New(jserr.NotEnabled)
	}
	if err := js.checkReservationLocked(&cfg); err != nil {
		js.mu.Unlock()
		return "", err
	}
	if js.streams[cfg.Name] != nil || js.restoring[cfg.Name] {
		js.mu.Unlock()
		return "", jserr.New(jserr.StreamNameExistRestoreFailed)
	}
	if js.restoring == nil {
		js.restoring = map[string]bool{}
	}
	js.restoring[cfg.Name] = true
	js.mu.Unlock()

	rs := &restoreSession{js: js, cfg: cfg, client: advisoryClient(client), done: done, start: js.now().UTC(), wake: make(chan struct{}, 1)}
	js.adviseRestoreCreate(cfg.Name, rs.start, rs.client)
	subj := fmt.Sprintf("$JS.SNAPSHOT.RESTORE.%s.%s", cfg.Name, nuid.Next())
	sub, err := js.tr.Subscribe(subj, "", rs.onChunk)
	if err != nil {
		js.endRestore(cfg.Name)
		return "", jserr.New(jserr.RestoreSubscribeFailed, jserr.Sub("subject", subj), jserr.Sub("err", err))
	}
	rs.sub = sub
	if !js.background(rs.run) {
		sub.Unsubscribe()
		js.endRestore(cfg.Name)
		return "", jserr.New(jserr.NotEnabled)
	}
	return subj, nil
}

// endRestore frees the name a restore reserved.
func (js *JetStream) endRestore(name string) {
	js.mu.Lock()
	delete(js.restoring, name)
	js.mu.Unlock()
}

// restoreSession is one restore: the chunk subscription's handler queues
// chunks (on the publisher's read loop, without blocking); run, on its
// own goroutine, feeds them to the importer (importArchive, on another)
// through a pipe, answers them, and installs the stream at the end.
type restoreSession struct {
	js     *JetStream
	cfg    stream.Config
	client json.RawMessage // the requester, for the advisories
	done   RestoreDone
	start  time.Time
	sub    Subscription

	mu     sync.Mutex
	chunks []restoreChunk
	queued int   // bytes in chunks
	failed error // a chunk without a reply, or too many bytes queued
	wake   chan struct{}
}

type restoreChunk struct {
	reply string
	data  []byte
}

func (rs *restoreSession) onChunk(_, reply string, _, data []byte) {
	rs.mu.Lock()
	switch {
	case rs.failed != nil:
	case reply == "":
		rs.failed = fmt.Errorf("restore for stream '$G > %s' requires reply subject for each chunk", rs.cfg.Name)
	case rs.queued+len(data) > restoreMaxQueued:
		rs.failed = fmt.Errorf("restore for stream '$G > %s' received more than %d bytes of chunks not yet taken", rs.cfg.Name, restoreMaxQueued)
	default:
		rs.chunks = append(rs.chunks, restoreChunk{reply: reply, data: append([]byte(nil), data...)})
		rs.queued += len(data)
	}
	rs.mu.Unlock()
	select {
	case rs.wake <- struct{}{}:
	default:
	}
}

func (rs *restoreSession) take() ([]restoreChunk, error) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	cs := rs.chunks
	rs.chunks, rs.queued = nil, 0
	return cs, rs.failed
}

// staged is what importArchive built: the stream's store, its directory
// when it is a file stream ("" otherwise) and its consumers.
type staged struct {
	st        store.Store
	dir       string
	consumers []stagedConsumer
}

type stagedConsumer struct {
	cfg   consumer.Config
	state *store.ConsumerState
}

// run drives the restore (the section comment above).
func (rs *restoreSession) run() {
	js := rs.js
	defer js.endRestore(rs.cfg.Name)
	defer rs.sub.Unsubscribe()
	pr, pw := io.Pipe()
	var res *staged
	var importErr error
	imported := make(chan struct{})
	go func() {
		res, importErr = rs.importArchive(pr)
		pr.CloseWithError(importErr) // nil: later writes fail with io.ErrClosedPipe
		close(imported)
	}()
	fail := func(err error) {
		pw.CloseWithError(err)
		<-imported
		rs.discard(res)
	}
	stall := time.NewTimer(restoreStallTimeout)
	defer stall.Stop()
	var total int64
	for {
		select {
		case <-rs.wake:
		case <-stall.C:
			err := fmt.Errorf("restore for stream '$G > %s' is stalled", rs.cfg.Name)
			js.logf("jetstream: %v", err)
			fail(err)
			return
		case <-js.quit:
			fail(errShutdown)
			return
		}
		chunks, failed := rs.take()
		for _, c := range chunks {
			if len(c.data) == 0 { // the end of the snapshot
				_ = pw.Close()
				<-imported
				rs.finish(c.reply, res, importErr, total)
				return
			}
			if _, err := pw.Write(c.data); err != nil {
				select {
				case <-imported:
					if importErr == nil { // bytes after the end entry
						total += int64(len(c.data))
						js.tr.Publish(c.reply, "", nil, nil)
						continue
					}
				default:
				}
				fail(err)
				js.adviseRestoreComplete(rs.cfg.Name, rs.start, total, rs.client)
				rs.answer(c.reply, nil, jserr.From(err, jserr.StreamRestore))
				return
			}
			total += int64(len(c.data))
			js.tr.Publish(c.reply, "", nil, nil)
		}
		if failed != nil {
			js.logf("jetstream: %v", failed)
			fail(failed)
			rs.js.adviseRestoreComplete(rs.cfg.Name, rs.start, total, rs.client)
			rs.answer("", nil, jserr.From(failed, jserr.StreamRestore))
			return
		}
		if len(chunks) > 0 {
			stall.Reset(restoreStallTimeout)
		}
	}
}

// finish installs what was imported, or reports why not, answering
// reply with the outcome.
func (rs *restoreSession) finish(reply string, res *staged, importErr error, total int64) {
	js := rs.js
	var info *StreamInfo
	err := importErr
	if err == nil {
		info, err = rs.install(res)
	}
	if err != nil {
		rs.discard(res)
		js.logf("jetstream: restore of stream %s failed after %d bytes: %v", rs.cfg.Name, total, err)
	} else {
		js.cfg.Infof("jetstream: restored stream %s (%d bytes)", rs.cfg.Name, total)
	}
	js.adviseRestoreComplete(rs.cfg.Name, rs.start, total, rs.client)
	var jerr *jserr.Error
	if err != nil {
		jerr = jserr.From(err, jserr.StreamRestore)
	}
	rs.answer(reply, info, jerr)
}

// answer frees the restore's name, then reports the outcome (done): a
// client that restores again as soon as it read a failure must not find
// the name still taken (10130; seen in TestDifferential under load). A
// restore that installed its stream holds the name as a stream already.
func (rs *restoreSession) answer(reply string, info *StreamInfo, err *jserr.Error) {
	rs.js.endRestore(rs.cfg.Name)
	rs.done(reply, info, err)
}

// discard closes and removes what an import that did not install built.
func (rs *restoreSession) discard(res *staged) {
	if res == nil {
		return
	}
	if res.st != nil {
		_ = res.st.Close()
	}
	if res.dir != "" {
		if err := metafile.RemoveAll(rs.js.cfg.FS, res.dir); err != nil {
			rs.js.logf("jetstream: remove %s after a failed restore: %v (the next start removes it)", res.dir, err)
		}
	}
}

// restoreDir returns a new directory to build a restored file stream in;
// its name holds a second '.', so it is no stream's and no deleted
// stream's (dirs.go), and a start removes it.
func (js *JetStream) restoreDir() string {
	return path.Join(js.streamsDir(), ".restore."+nuid.Next())
}

// importArchive reads the snapshot from r into a new store (stream_backup.go
// RestoreStreamV2's checks and texts). It returns what it built, also
// on failure (for discard).
func (rs *restoreSession) importArchive(r io.Reader) (*staged, error) {
	rd := snapshot.NewReader(r)
	rd.MaxPayload = restoreMaxEntry
	h, p, err := rd.Next()
	if err != nil {
		return nil, truncatedAtEOF(err)
	}
	if h.Name != snapshot.StateName {
		return nil, errors.New("expected state.json first")
	}
	var ns StreamState
	if err := json.Unmarshal(p, &ns); err != nil {
		return nil, fmt.Errorf("error in state.json: %w", err)
	}
	if err := checkSnapshotState(&ns); err != nil {
		return nil, err
	}
	if err := rs.js.checkRestoreUsage(rs.cfg.Storage, int64(min(ns.Bytes, 1<<62))); err != nil {
		return nil, err
	}
	res, err := rs.js.stagingStore(rs.cfg)
	if err != nil {
		return nil, fmt.Errorf("error adding stream: %w", err)
	}
	if ns.FirstSeq > 1 {
		if err := res.st.SkipTo(ns.FirstSeq); err != nil {
			return res, fmt.Errorf("error purging stream: %w", err)
		}
	}
	for range ns.Consumers {
		sc, err := rs.readConsumer(rd)
		if err != nil {
			return res, err
		}
		res.consumers = append(res.consumers, sc)
	}
	return res, rs.importMsgs(rd, res.st, &ns)
}

// truncatedAtEOF reports a snapshot that ended cleanly between entries,
// before its end entry, as cut short.
func truncatedAtEOF(err error) error {
	if err == io.EOF {
		return snapshot.ErrTruncated
	}
	return err
}

// checkSnapshotState refuses a state whose counts contradict each other
// (nats-server's checks).
func checkSnapshotState(ns *StreamState) error {
	bad := errors.New("invalid stream state: inconsistent message count or sequence range")
	switch {
	case ns.Consumers < 0:
		return errors.New("invalid stream state: negative consumer count")
	case ns.FirstSeq == 0:
		if ns.LastSeq != 0 || ns.Msgs != 0 {
			return bad
		}
	case ns.FirstSeq > ns.LastSeq:
		if ns.FirstSeq-1 != ns.LastSeq || ns.Msgs != 0 {
			return bad
		}
	case ns.Msgs > ns.LastSeq-ns.FirstSeq+1:
		return errors.New("invalid stream state: message count exceeds sequence range")
	}
	return nil
}

// readConsumer reads and decodes one consumer entry.
func (rs *restoreSession) readConsumer(rd *snapshot.Reader) (stagedConsumer, error) {
	h, p, err := rd.Next()
	if err != nil {
		return stagedConsumer{}, truncatedAtEOF(err)
	}
	name, ok := strings.CutPrefix(h.Name, snapshot.ConsumerPrefix)
	if !ok {
		return stagedConsumer{}, fmt.Errorf("expected consumer, found %q", h.Name)
	}
	var ce snapshot.ConsumerEntry
	if err := json.Unmarshal(p, &ce); err != nil {
		return stagedConsumer{}, fmt.Errorf("failed to decode consumer %q state: %w", name, err)
	}
	if len(ce.Config) == 0 || string(ce.Config) == "null" {
		return stagedConsumer{}, fmt.Errorf("consumer %q is missing config", name)
	}
	if ce.State == nil {
		return stagedConsumer{}, fmt.Errorf("consumer %q is missing state", name)
	}
	var cfg consumer.Config
	if err := json.Unmarshal(ce.Config, &cfg); err != nil {
		return stagedConsumer{}, fmt.Errorf("failed to decode consumer %q state: %w", name, err)
	}
	if cfg.Name == "" {
		cfg.Name = name
	}
	if cfg.Name != name {
		return stagedConsumer{}, fmt.Errorf("failed to add consumer %q: its config names %q", name, cfg.Name)
	}
	return stagedConsumer{cfg: cfg, state: fromSnapshotState(ce.State)}, nil
}

// fromSnapshotState converts a snapshot's consumer state to cairn's.
func fromSnapshotState(s *snapshot.ConsumerState) *store.ConsumerState {
	st := &store.ConsumerState{
		Delivered: store.SequencePair{Consumer: s.Delivered.Consumer, Stream: s.Delivered.Stream},
		AckFloor:  store.SequencePair{Consumer: s.AckFloor.Consumer, Stream: s.AckFloor.Stream},
	}
	for seq, p := range s.Pending {
		if p == nil {
			continue
		}
		st.Pending = append(st.Pending, store.StreamPending{Stream: seq, Pending: store.Pending{Sequence: p.Sequence, Timestamp: p.Timestamp}})
	}
	slices.SortFunc(st.Pending, func(a, b store.StreamPending) int { return cmp.Compare(a.Stream, b.Stream) })
	if len(s.Redelivered) > 0 {
		st.Redelivered = map[uint64]uint64{}
		for seq, n := range s.Redelivered {
			st.Redelivered[seq] = n
		}
	}
	return st
}

// importMsgs stores the snapshot's messages at their sequences, then
// keeps the snapshot's last sequence (nats-server's texts).
func (rs *restoreSession) importMsgs(rd *snapshot.Reader, st store.Store, ns *StreamState) error {
	cfg := &rs.cfg
	maxPayload := rs.js.cfg.MaxPayload
	lseq := ns.FirstSeq - min(ns.FirstSeq, 1)
	now := rs.js.now()
	for {
		h, p, err := rd.Next()
		if err != nil {
			return truncatedAtEOF(err)
		}
		seq := h.Sequence
		if seq == 0 {
			if h.IsEnd() {
				break
			}
			return errors.New("expected message sequence")
		}
		if maxPayload > 0 && (h.HeaderSize > maxPayload || h.PayloadSize > maxPayload-h.HeaderSize) {
			return fmt.Errorf("message sequence %d exceeds maximum payload size", seq)
		}
		if mms := int64(cfg.MaxMsgSize); mms >= 0 && (h.HeaderSize > mms || h.PayloadSize > mms-h.HeaderSize) {
			return fmt.Errorf("message sequence %d exceeds maximum message size", seq)
		}
		if seq <= lseq {
			return fmt.Errorf("message sequence %d out of order", seq)
		}
		if seq > lseq+1 {
			if err := st.SkipTo(seq); err != nil {
				return fmt.Errorf("failed to process gap: %w", err)
			}
		}
		lseq = seq
		hdr, data := p[:h.HeaderSize], p[h.HeaderSize:]
		if len(hdr) == 0 {
			hdr = nil
		}
		if ttl := store.MsgTTL(hdr); ttl > 0 && ttl != store.TTLNever && now.After(time.Unix(0, h.Timestamp).Add(time.Duration(ttl)*time.Second)) {
			// Expired already: the sequence stays used, the message
			// is not stored.
			if err := st.SkipTo(seq + 1); err != nil {
				return fmt.Errorf("failed to process expired message sequence %d: %w", seq, err)
			}
			continue
		}
		if err := rs.js.checkRestoreUsage(cfg.Storage, int64(streamrun.StoredBytes(st))+int64(cfg.StoreConfig().MsgSize(h.Name, hdr, data))); err != nil {
			return err
		}
		got, err := st.Append(store.Msg{Subject: h.Name, Header: hdr, Data: data, Time: h.Timestamp})
		if err != nil {
			return fmt.Errorf("failed to store message sequence %d: %w", seq, err)
		}
		if got != seq {
			return fmt.Errorf("failed to store message sequence %d: stored as %d", seq, got)
		}
	}
	if lseq < ns.LastSeq {
		if err := st.SkipTo(ns.LastSeq + 1); err != nil {
			return fmt.Errorf("failed to process trailing gap: %w", err)
		}
	}
	return nil
}

// checkRestoreUsage refuses a restore that would take the server's
// usage of its storage type (every account's) past the limit (10047
// file, 10028 memory), counting n bytes more.
func (js *JetStream) checkRestoreUsage(st stream.StorageType, n int64) error {
	limit, limited := js.storageLimit(st)
	if !limited || js.storage.Used(st)+n <= limit {
		return nil
	}
	if st == stream.MemoryStorage {
		return jserr.New(jserr.MemoryResourcesExceeded)
	}
	return jserr.New(jserr.StorageResourcesExceeded)
}

// stagingStore opens the store a restore fills: a memory store, or a
// file store in a new restore directory.
func (js *JetStream) stagingStore(cfg stream.Config) (*staged, error) {
	if cfg.Storage == stream.MemoryStorage {
		return &staged{st: memstore.New(cfg.StoreConfig())}, nil
	}
	dir := js.restoreDir()
	if err := js.cfg.FS.MkdirAll(dir); err != nil {
		return nil, err
	}
	st, err := js.openStore(cfg, dir)
	if err != nil {
		_ = metafile.RemoveAll(js.cfg.FS, dir)
		return nil, err
	}
	return &staged{st: st, dir: dir}, nil
}

// install makes the imported stream a stream of the server: its
// consumers are checked, a file stream's are written into its directory
// with the stream's metadata, the directory is renamed into place and
// opened as at a start; then the consumers that keep no files
// (mem_storage, and every consumer of a memory stream) are added with
// their state.
func (rs *restoreSession) install(res *staged) (*StreamInfo, error) {
	js, cfg := rs.js, rs.cfg
	created := js.now().UTC()
	for i := range res.consumers {
		if err := prepareRestoredConsumer(&cfg, js.consumerLimits(), &res.consumers[i]); err != nil {
			return nil, err
		}
	}
	if res.dir != "" {
		if err := js.writeRestoredFiles(res, cfg, created); err != nil {
			return nil, err
		}
	}
	js.mu.Lock()
	r, err := js.installLocked(res, cfg, created)
	js.mu.Unlock()
	if err != nil {
		return nil, err
	}
	res.dir, res.st = "", nil // the stream owns them now
	js.adviseStream(cfg.Name, actionCreate)
	for _, sc := range res.consumers {
		if !consumerrun.Persisted(r.Dir(), &sc.cfg) {
			r.addRestoredConsumer(sc.cfg, sc.state, created)
		}
	}
	return r.info(InfoOptions{}), nil
}

// prepareRestoredConsumer checks a consumer of the snapshot as a create
// would, against the stream's config and the account's limits acc, and
// its state; a refusal is the restore's (10062 with the create's error
// in its text), as in nats-server.
func prepareRestoredConsumer(scfg *stream.Config, acc consumer.AccountLimits, sc *stagedConsumer) error {
	cfg := &sc.cfg
	cfg.SetStaticMetadata()
	// The cause's text, not its code: nats-server v2.15.2 answers 10062
	// "restore failed: failed to add consumer "PG": consumer max ack
	// pending exceeds system limit of 50 (10121)" (measured).
	if err := cfg.SetDefaultsIn(scfg, acc, false); err != nil {
		return fmt.Errorf("failed to add consumer %q: %v", cfg.Name, err)
	}
	if err := cfg.ValidateIn(scfg, acc, false); err != nil {
		return fmt.Errorf("failed to add consumer %q: %v", cfg.Name, err)
	}
	cfg.SetEphemeralThreshold()
	if err := store.CheckConsumerState(sc.state); err != nil {
		return fmt.Errorf("failed to set consumer %q state: %w", cfg.Name, err)
	}
	return nil
}

// writeRestoredFiles writes, in a restored file stream's directory, the
// files of its consumers that keep them and the stream's metadata, and
// closes its store: the directory is then what a start restores.
func (js *JetStream) writeRestoredFiles(res *staged, cfg stream.Config, created time.Time) error {
	for _, sc := range res.consumers {
		if !consumerrun.Persisted(res.dir, &sc.cfg) {
			continue
		}
		_, cs, err := consumerrun.WriteFiles(js.cfg.FS, res.dir, res.st, sc.cfg, created)
		if err != nil {
			return err
		}
		err = cs.Update(sc.state)
		if cerr := cs.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("failed to set consumer %q state: %w", sc.cfg.Name, err)
		}
	}
	err := res.st.Close()
	res.st = nil
	if err != nil {
		return err
	}
	return metafile.Write(js.cfg.FS, res.dir, metaFile{Config: cfg, Created: created})
}

// installLocked checks the name, the subjects and the limits again (a
// stream may have been created meanwhile) and makes the stream the
// server's. The caller holds js.mu.
func (js *JetStream) installLocked(res *staged, cfg stream.Config, created time.Time) (*streamEntry, error) {
	if js.closed {
		return nil, errShutdown
	}
	if js.streams[cfg.Name] != nil {
		return nil, jserr.New(jserr.StreamNameExistRestoreFailed)
	}
	if err := cfg.CheckOrigins(js.configLocked, false); err != nil {
		return nil, err
	}
	if err := js.checkReservationLocked(&cfg); err != nil {
		return nil, err
	}
	if js.overlapsLocked(cfg.Name, cfg.Subjects) {
		return nil, jserr.New(jserr.StreamSubjectOverlap)
	}
	var r *streamEntry
	if res.dir != "" {
		dir := js.streamDir(cfg.Name)
		if err := js.setAside(cfg.Name, dir); err != nil {
			return nil, err
		}
		if err := js.cfg.FS.Rename(res.dir, dir); err != nil {
			return nil, err
		}
		res.dir = dir // a failure from here removes the stream's directory
		if err := js.cfg.FS.SyncDir(js.streamsDir()); err != nil {
			return nil, err
		}
		var err error
		if r, err = js.openRunner(cfg, created, dir); err != nil {
			return nil, err
		}
	} else {
		st := res.st
		res.st = nil // startEntry closes it on an error
		var err error
		if r, err = js.startEntry(cfg, created, "", st); err != nil {
			return nil, err
		}
	}
	js.addLocked(r, cfg)
	return r, nil
}

// addRestoredConsumer starts a restored consumer that keeps no files,
// with its state (consumerrun.FromState).
func (r *streamEntry) addRestoredConsumer(cfg consumer.Config, st *store.ConsumerState, created time.Time) {
	c := consumerrun.FromState(r.js.consumerEnv(), r.Stream, cfg.Name, cfg, st, created)
	r.cons.mu.Lock()
	if r.cons.done || r.cons.byName[cfg.Name] != nil {
		r.cons.mu.Unlock()
		return
	}
	r.cons.byName[cfg.Name] = c
	r.cons.mu.Unlock()
	r.js.succeedRetired(r.Name(), c)
	c.Start()
}
