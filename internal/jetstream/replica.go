package jetstream

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/cairnmq/cairn/internal/jetstream/consumerrun"
	"github.com/cairnmq/cairn/internal/jetstream/metafile"
	"github.com/cairnmq/cairn/internal/jetstream/streamrun"
	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/store/filestore"
	"github.com/cairnmq/cairn/internal/stream"
	"github.com/cairnmq/cairn/internal/vfs"
)

// ReplicaStart is how a replicated file stream's replica starts in a
// clustered JetStream (internal/cluster/jscluster), over a store its
// checkpoint opened (internal/cluster/streamckpt): not from its files as
// a stream of one server restarts, but rolled back to its checkpoint and
// restored from the checkpoint's state, its log applying what followed.
type ReplicaStart struct {
	// Created is the stream's creation time (its assignment's).
	Created time.Time
	// Store is the stream's store, opened in StreamDir's msgs directory.
	Store store.Store
	// NewLog makes the replica's log (streamrun.Env.NewReplicatedLog).
	NewLog NewLogFunc
	// Start readies the runtime in place of its Open
	// (streamckpt.Replica.Start); an error stops the start.
	Start func(*streamrun.Stream) error
}

// StreamDir returns the directory of the stream named name (its
// metadata, its store under msgs, a replica's checkpoint).
func (js *JetStream) StreamDir(name string) string { return js.streamDir(name) }

// FileStoreConfig returns the file store configuration of a file stream
// whose directory is dir, as the engine opens it (sync policy, logs,
// statistics).
func (js *JetStream) FileStoreConfig(dir string) filestore.Config {
	sync := filestore.SyncAlways
	if js.cfg.AckBeforeSyncInterval > 0 {
		sync = filestore.SyncEveryInterval
	}
	return filestore.Config{
		Dir: path.Join(dir, "msgs"), FS: js.cfg.FS, Sync: sync, SyncInterval: js.cfg.AckBeforeSyncInterval,
		Logf: js.cfg.Logf, Infof: js.cfg.Infof, SyncStats: js.cfg.SyncStats,
	}
}

// StartReplica makes the replica of a replicated file stream with config
// cfg one of the account's streams, started as rs says: its metadata
// written in StreamDir (unless there already), its runtime made over
// rs.Store with rs.NewLog, readied by rs.Start, its consumers restored,
// then served. On an error rs.Store is closed. Errors: 10039 once the
// engine shut down, 10058 when a stream of that name runs, and a failed
// start as the stream create error (jserr.StreamCreate, "{err}").
func (js *JetStream) StartReplica(cfg stream.Config, rs ReplicaStart) (*StreamInfo, *jserr.Error) {
	js.mu.Lock()
	defer js.mu.Unlock()
	if js.closed {
		_ = rs.Store.Close()
		return nil, jserr.New(jserr.NotEnabled)
	}
	if js.streams[cfg.Name] != nil {
		_ = rs.Store.Close()
		return nil, jserr.New(jserr.StreamNameExist)
	}
	dir := js.streamDir(cfg.Name)
	var m metaFile
	if err := metafile.Read(js.cfg.FS, dir, &m); err != nil {
		if err := js.makeStreamDir(dir, metaFile{Config: cfg, Created: rs.Created}); err != nil {
			_ = rs.Store.Close()
			return nil, jserr.From(err, jserr.StreamCreate)
		}
	}
	env := js.streamEnv()
	env.NewReplicatedLog = rs.NewLog
	r := js.newEntryEnv(env, cfg, rs.Created, dir, rs.Store)
	if err := rs.Start(r.Stream); err != nil {
		_ = rs.Store.Close()
		return nil, jserr.From(err, jserr.StreamCreate)
	}
	r.restoreConsumers()
	if err := r.Serve(); err != nil {
		_ = rs.Store.Close()
		return nil, jserr.From(err, jserr.StreamCreate)
	}
	js.addLocked(r, cfg)
	return r.info(InfoOptions{}), nil
}

// RestoreStream starts the stream named name from its directory, as a
// start restores the streams of one server (its metadata, its store as
// recovery leaves it, its consumers): a clustered JetStream's stream with
// one replica, which has no log to be rebuilt from, after its server
// restarted. found is false when the directory holds no stream (a create
// then makes it). Errors: the stream's own (its metadata or store cannot
// be opened: it is left on disk untouched), 10058 when it already runs.
func (js *JetStream) RestoreStream(name string) (found bool, _ *jserr.Error) {
	var m metaFile
	if err := metafile.Read(js.cfg.FS, js.streamDir(name), &m); err != nil {
		return false, nil
	}
	js.mu.Lock()
	running := js.streams[name] != nil
	js.mu.Unlock()
	if running {
		return true, jserr.New(jserr.StreamNameExist)
	}
	r, err := js.restoreOne(name)
	if err != nil {
		return true, jserr.From(err, jserr.StreamCreate)
	}
	js.mu.Lock()
	js.addLocked(r, r.Config())
	js.mu.Unlock()
	return true, nil
}

// WriteStreamMeta replaces the metadata (meta.json: config, created) in
// the directory of the stream cfg.Name, durably (written new, fsynced,
// renamed, the directory fsynced): a replicated stream's replica that
// becomes the stream of one replica (a scale-down; docs/cluster.md,
// "Scaling down to one replica") is restored from its files from then
// on (RestoreStream), with the config it has as one replica. Errors: the
// file system's.
func (js *JetStream) WriteStreamMeta(cfg stream.Config, created time.Time) error {
	return metafile.Write(js.cfg.FS, js.streamDir(cfg.Name), metaFile{Config: cfg, Created: created})
}

// DetachStream stops the stream named name and its sourcers as a
// shutdown stops them, retires its consumers for their next runtimes
// here (consumerrun.Consumer.Retire, retired.go: their subscriptions
// and waiting pull requests stay until taken over), and leaves its
// files as they are: a stream of
// one replica in a clustered JetStream that becomes replicated (a scale
// up; docs/cluster.md, "Scaling") restarts over them as the first
// replica of its new group (StartReplica). It returns the stream's own
// state once it stopped (stream.AppendCheckpoint: config, duplicate
// window, schedules), and its store, closed (a memory stream's, which
// memstore.Store.Reopen hands to the replica, holds its messages).
// Errors: 10059 when no such stream runs, a failed close of its store
// (jserr.StreamCreate, its text).
func (js *JetStream) DetachStream(name string) ([]byte, store.Store, *jserr.Error) {
	js.mu.Lock()
	r := js.streams[name]
	delete(js.streams, name)
	js.refreshCapturesLocked()
	js.mu.Unlock()
	if r == nil {
		return nil, nil, jserr.New(jserr.StreamNotFound)
	}
	r.srcs.Close(false)
	r.cons.mu.Lock()
	r.cons.retireTo = func(c *consumerrun.Consumer) { js.retire(name, c) }
	r.cons.mu.Unlock()
	if err := r.Stop(nil); err != nil {
		return nil, nil, jserr.From(err, jserr.StreamCreate)
	}
	ck, _ := r.Checkpoint() // the apply goroutine has ended: nothing changes it
	state, err := ck.Append(nil)
	if err != nil {
		return nil, nil, jserr.From(err, jserr.StreamCreate)
	}
	return state, r.Store(), nil
}

// StreamConsumers returns the consumers of stream name known here, by
// name: those running, and a file stream's persisted ones its start left
// on disk (a clustered JetStream starts only those its meta group
// assigns: Config.RestoreConsumer), each with its config and created
// time. A clustered restore assigns the consumers the snapshot brought
// (docs/cluster.md, "Restoring a stream"). Errors: 10059.
func (js *JetStream) StreamConsumers(name string) ([]consumerrun.Meta, *jserr.Error) {
	r, jerr := js.lookup(name)
	if jerr != nil {
		return nil, jerr
	}
	byName := map[string]consumerrun.Meta{}
	r.cons.mu.Lock()
	for n, c := range r.cons.byName {
		byName[n] = consumerrun.Meta{Config: c.Config(), Created: c.Created()}
	}
	r.cons.mu.Unlock()
	if r.Dir() != "" {
		names, _ := js.cfg.FS.ReadDir(path.Join(r.Dir(), "obs"))
		for _, n := range names {
			if _, ok := byName[n]; ok || strings.Contains(n, ".") {
				continue
			}
			var m consumerrun.Meta
			if err := metafile.Read(js.cfg.FS, consumerrun.Dir(r.Dir(), n), &m); err == nil {
				if m.Config.Name == "" {
					m.Config.Name = n
				}
				byName[n] = m
			}
		}
	}
	out := make([]consumerrun.Meta, 0, len(byName))
	for _, n := range slices.Sorted(maps.Keys(byName)) {
		out = append(out, byName[n])
	}
	return out, nil
}

// QuarantineStream moves the directory of stream name, which must not
// run here, out of the streams directory to
// <store>/jetstream/<account>/quarantine/<name>.<tag>[.n] (the first
// free name), durably, and returns where it went; "" when there is no
// such directory. A clustered JetStream moves there the files of a
// replica fenced for damage before its replacement starts on this
// server: damaged data is kept for an operator, never deleted by
// inference and never served (docs/cluster.md, "Fencing"). Errors:
// 10058 while a stream of that name runs, and the file system's.
func (js *JetStream) QuarantineStream(name, tag string) (string, error) {
	js.mu.Lock()
	running := js.streams[name] != nil
	js.mu.Unlock()
	if running {
		return "", jserr.New(jserr.StreamNameExist)
	}
	fs, dir := js.cfg.FS, js.streamDir(name)
	if _, _, err := fs.Stat(dir); err != nil {
		if vfs.IsNotExist(err) {
			return "", nil
		}
		return "", err
	}
	qdir := path.Join(path.Dir(js.streamsDir()), "quarantine")
	if err := fs.MkdirAll(qdir); err != nil {
		return "", err
	}
	to := path.Join(qdir, name+"."+tag)
	for n := 1; ; n++ {
		if _, _, err := fs.Stat(to); vfs.IsNotExist(err) {
			break
		} else if err != nil {
			return "", err
		}
		to = path.Join(qdir, fmt.Sprintf("%s.%s.%d", name, tag, n))
	}
	if err := fs.Rename(dir, to); err != nil {
		return "", err
	}
	if err := fs.SyncDir(js.streamsDir()); err != nil {
		return to, err
	}
	return to, fs.SyncDir(qdir)
}
