package jetstream

import (
	"fmt"
	"path"
	"time"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/jetstream/consumerrun"
	"github.com/cairnmq/cairn/internal/jetstream/metafile"
	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/vfs"
)

// DetachConsumer stops the consumer name of stream streamName as a
// shutdown stops it (its state saved, its files kept), but retires it
// (retired.go): its subscriptions and waiting pull requests stay until
// the consumer's next runtime here takes them over, within 10 s, and
// returns its committed state in the encoding of a replicated
// consumer's snapshots (consumerrun.Consumer.CommittedSnapshot), taken
// once settle (if not nil) returned: a replicated consumer's caller
// waits there for what its group committed to be applied. A consumer of
// one replica in a clustered JetStream that becomes replicated hands its
// state to its group's first replica, and a replicated one scaled down
// to one replica to the consumer of one replica it becomes
// (docs/cluster.md, "Scaling consumers"). When the consumer does not
// run here, its files are read instead if they record the creation time
// created (a restart came between its stop and the replica's
// checkpoint). found is false when it neither runs nor has such files.
// Errors: 10059; files that cannot be read or a state that does not
// encode (jserr.ConsumerCreate).
func (js *JetStream) DetachConsumer(streamName, name string, created time.Time, settle func()) (state []byte, found bool, _ *jserr.Error) {
	r, jerr := js.lookup(streamName)
	if jerr != nil {
		return nil, false, jerr
	}
	r.cons.mu.Lock()
	c := r.cons.byName[name]
	delete(r.cons.byName, name)
	r.cons.mu.Unlock()
	if c == nil {
		if c = js.readConsumer(r, name, created); c == nil {
			return nil, false, nil
		}
	}
	js.retire(streamName, c)
	if settle != nil {
		settle()
	}
	_, state, err := c.CommittedSnapshot()
	if err != nil {
		return nil, true, jserr.From(err, jserr.ConsumerCreate)
	}
	return state, true, nil
}

// readConsumer returns the runtime of consumer name of stream r made
// from its files, not started, when they record created; nil otherwise.
func (js *JetStream) readConsumer(r *streamEntry, name string, created time.Time) *consumerrun.Consumer {
	if r.Dir() == "" {
		return nil
	}
	var m consumerrun.Meta
	if err := metafile.Read(js.cfg.FS, consumerrun.Dir(r.Dir(), name), &m); err != nil || !m.Created.Equal(created) {
		return nil
	}
	c, err := consumerrun.Restore(js.consumerEnv(), r.Stream, name)
	if err != nil {
		js.logf("consumer %s > %s: its files cannot be read: %v", r.Name(), name, err)
		return nil
	}
	return c
}

// RemoveConsumerFiles removes the files of the consumer name of stream
// streamName, which must not run here: its directory is renamed aside
// (obs/<name>.scaled-<unix ns>, a name no start reads) durably first, so
// that a crash leaves either the whole consumer or none, then its state
// in the stream's store and the directory set aside are removed (a
// state left by a crash is replaced by the next consumer of the name).
// DetachConsumer's caller removes them once the state is durable
// elsewhere. A consumer without files is no error. Errors: 10059, 10012
// (it runs), the file system's (jserr.ConsumerCreate).
func (js *JetStream) RemoveConsumerFiles(streamName, name string) *jserr.Error {
	r, jerr := js.lookup(streamName)
	if jerr != nil {
		return jerr
	}
	r.cons.mu.Lock()
	running := r.cons.byName[name] != nil
	r.cons.mu.Unlock()
	if running {
		return jserr.New(jserr.ConsumerNameExist)
	}
	if r.Dir() == "" {
		return nil
	}
	dir := consumerrun.Dir(r.Dir(), name)
	if _, _, err := js.cfg.FS.Stat(dir); vfs.IsNotExist(err) {
		return nil
	}
	aside := fmt.Sprintf("%s.scaled-%d", dir, js.now().UnixNano())
	if err := js.cfg.FS.Rename(dir, aside); err != nil {
		return jserr.From(err, jserr.ConsumerCreate)
	}
	if err := js.cfg.FS.SyncDir(path.Dir(dir)); err != nil {
		return jserr.From(err, jserr.ConsumerCreate)
	}
	cs, err := r.Store().ConsumerStore(name)
	if err == nil {
		err = cs.Delete()
	}
	if err != nil {
		return jserr.From(err, jserr.ConsumerCreate)
	}
	if err := metafile.RemoveAll(js.cfg.FS, aside); err != nil && !vfs.IsNotExist(err) {
		js.logf("consumer %s > %s: remove %s: %v", streamName, name, aside, err)
	}
	return nil
}

// WriteConsumerState writes the files of the consumer name of stream
// streamName (config cfg, created at created), which must not run here,
// with the committed state data of a replicated consumer as its stored
// state, durably (consumerrun.WriteSnapshotFiles): the consumer of one
// replica a replicated consumer scaled down to one replica becomes
// (docs/cluster.md, "Scaling consumers"); RestoreConsumer then starts
// it. Errors: 10059, 10012 (it runs), a stream without files or a
// consumer kept in memory (jserr.ConsumerCreate), the file system's.
func (js *JetStream) WriteConsumerState(streamName, name string, cfg consumer.Config, created time.Time, data []byte) *jserr.Error {
	r, jerr := js.lookup(streamName)
	if jerr != nil {
		return jerr
	}
	r.cons.mu.Lock()
	running := r.cons.byName[name] != nil
	r.cons.mu.Unlock()
	if running {
		return jserr.New(jserr.ConsumerNameExist)
	}
	if !consumerrun.Persisted(r.Dir(), &cfg) {
		return jserr.New(jserr.ConsumerCreate, jserr.Sub("err", "a consumer kept in memory has no files to hold its state"))
	}
	cfg.Name = name
	if err := consumerrun.WriteSnapshotFiles(js.cfg.FS, r.Dir(), r.Store(), cfg, created, data); err != nil {
		return jserr.From(err, jserr.ConsumerCreate)
	}
	return nil
}
