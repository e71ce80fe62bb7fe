package jetstream

import (
	"github.com/cairnmq/cairn/internal/jetstream/metafile"
	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/stream"
)

// SetAssignedConfig makes cfg the config of the stream named cfg.Name,
// on the server that leads it in a clustered JetStream, once the meta
// group decided the update (internal/cluster/jscluster;
// docs/cluster.md, "Stream updates"). The config was checked by the
// meta leader (stream.CheckClusteredUpdate and the checks needing the
// other streams), so none is made here. It is proposed to the stream as
// an UpdateConfig operation: a replicated stream's log carries it to
// every replica in log order (each applies it, stream.Stream.ApplyOp and
// the runtime's configApplied), a stream with one replica applies it at
// once and writes its meta.json, as an update on a single server does (a
// replicated stream's meta.json keeps its config at creation: its
// replicas restart from their checkpoints' config). Then the stream's
// subscriptions follow the new subjects, interest retention drops what
// no consumer needs, the sourcers restart, and the update advisory is
// sent. changed is false when the stream already has cfg.
//
// It holds no engine lock while the operation is applied: a leadership
// change (SetStreamLeader) may arrive meanwhile from the goroutine that
// applies the stream's log. Errors: 10059 when the stream does not run
// here; 10069 with the store's text when the store refuses the new
// limits (then no replica changed: the outcome is decided by apply);
// 10069 "stream not led here" when the operation could not enter the log
// (this replica no longer leads it) or the stream stopped.
func (js *JetStream) SetAssignedConfig(cfg stream.Config) (changed bool, _ *jserr.Error) {
	r := js.streamNamed(cfg.Name)
	if r == nil {
		return false, jserr.New(jserr.StreamNotFound)
	}
	if cur := r.Config(); cur.Equal(&cfg) {
		return false, nil
	}
	if cfg.Replicas <= 1 && r.Dir() != "" {
		if err := metafile.Write(js.cfg.FS, r.Dir(), metaFile{Config: cfg, Created: r.Created()}); err != nil {
			return false, jserr.From(err, jserr.StreamUpdate)
		}
	}
	out, ok := r.Do(&stream.UpdateConfig{Config: cfg})
	if !ok {
		return false, jserr.New(jserr.StreamUpdate, jserr.Sub("err", "stream not led here"))
	}
	if out.Err != nil {
		return false, out.Err
	}
	if err := r.Resubscribe(cfg); err != nil {
		js.logf("jetstream: stream %s: subscribe to its updated subjects: %v", cfg.Name, err)
	}
	js.mu.Lock()
	js.refreshCapturesLocked()
	js.mu.Unlock()
	js.adviseStream(cfg.Name, actionModify)
	r.DropUnneededWait()
	r.srcs.Restart()
	return true, nil
}

// StreamConfig returns the config the stream named name runs with (its
// runtime's, as its log applied it: without the dynamic metadata an info
// adds), and false when it does not run here.
func (js *JetStream) StreamConfig(name string) (stream.Config, bool) {
	r := js.streamNamed(name)
	if r == nil {
		return stream.Config{}, false
	}
	return r.Config(), true
}

// refreshTables rebuilds the account's tables that follow its streams'
// subjects and limits (refreshCapturesLocked): a replica that applied a
// config update from its stream's log refreshes them when it comes to
// lead the stream (SetStreamLeader).
func (js *JetStream) refreshTables() {
	js.mu.Lock()
	defer js.mu.Unlock()
	js.refreshCapturesLocked()
}
