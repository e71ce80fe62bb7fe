package jscluster

import (
	"errors"
	"time"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/jetstream/streamrun"
	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/store/memstore"
	"github.com/cairnmq/cairn/internal/stream"
)

// The consumers of a memory stream of one replica scaled up
// (docs/cluster.md, "Memory streams", "From one replica"): their
// delivery and acknowledgement state lives only in their runtimes, and
// the stream's scale-up stops the stream and with it its consumers
// before the meta leader's AssignConsumer of each consumer reaches this
// server. So scaleUpFromOne first detaches each consumer the meta group
// assigns here (jetstream.JetStream.DetachConsumer: stopped, its
// committed state returned) and keeps its state in Cluster.handed; the
// consumer's first replica takes it as its group's base (adoptSingle),
// as a file stream's consumer's comes from its files. A state is kept
// until taken, or until the next scale-up of the stream replaces it; a
// restart loses it, as it loses the memory stream's messages. A file
// stream of one replica's mem_storage consumers are handed over the
// same way at its scale-up and its conversions (their state too lives
// only in their runtimes; the others' is in their files).

// The same hand-over carries the consumers of a memory stream of one
// replica through its move (singlestream.go: docs/cluster.md, "Moving a
// stream of one replica"), whose consumers stay of one replica: at step
// 1 the old server's scale-up detaches them, and each consumer of one
// replica started again over the stream's group takes its state
// (startHanded, from startSingle); at step 2 each one's state goes to the
// destination through a group of its own (adoptSingle, caught up by a
// snapshot), whose end there starts the consumer of one replica from the
// group's committed state (convertConsumer); at step 3 the destination's
// conversion of the stream (scaledown.go convert) detaches them again,
// and they start once more with their states over the stream of one
// replica. A rollback's conversion on the old server does the same.

// handedState is a detached consumer's committed state (the encoding of
// a replicated consumer's snapshots) and its assignment's creation time
// (unix ns), which the consumer taking it must have.
type handedState struct {
	created int64
	state   []byte
}

// handConsumers detaches every consumer of stream k of one replica
// running here that the meta group assigns and that keeps its state in
// memory (every one of a memory stream, memory true; a file stream's
// mem_storage ones), and keeps its state in c.handed. The meta group's
// state may be ahead of the event being applied (the consumers'
// AssignConsumer applied already), so every assigned consumer is asked
// for, whatever its replicas: the engine runs only this stream's
// consumers of one replica. Errors are logged: such a consumer starts
// again without its state.
func (c *Cluster) handConsumers(acc *account, k streamKey, memory bool) {
	var cas []meta.ConsumerAssignment
	c.meta.View(func(st *meta.State) { cas = st.Consumers(k.account, k.name) })
	for _, ca := range cas {
		if !memory && persistedConsumer(ca) {
			continue // its files hold its state
		}
		ck := consumerKey{k.account, k.name, ca.Name}
		state, found, jerr := acc.js.DetachConsumer(k.name, ca.Name, time.Unix(0, ca.Created), nil)
		if jerr != nil || !found {
			if jerr != nil {
				c.cfg.Logf("jscluster: consumer %s > %s > %s: kept in memory, its stream of one replica stopping, its state is lost: %v", k.account, k.name, ca.Name, jerr)
			}
			continue
		}
		c.mu.Lock()
		c.handed[ck] = handedState{created: ca.Created, state: state}
		c.mu.Unlock()
	}
}

// takeHanded returns and forgets the state handConsumers kept for
// consumer k created at created (unix ns); false when there is none.
func (c *Cluster) takeHanded(k consumerKey, created int64) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.handed[k]
	if !ok || h.created != created {
		return nil, false
	}
	delete(c.handed, k)
	return h.state, true
}

// startHanded starts consumer k of one replica (config cfg, created at
// created) from the state kept for it in c.handed (takeHanded), when
// there is one: jetstream.JetStream.CreateConsumerState, checked against
// the config the meta group assigns its stream. A runtime the engine
// holds for it already (started without that state) is detached first
// and its state dropped, as adoptSingle's. found reports whether a state
// was kept. Errors: the engine's; the state is then kept again for the
// next attempt.
func (c *Cluster) startHanded(acc *account, k consumerKey, cfg consumer.Config, created time.Time) (found bool, _ error) {
	state, ok := c.takeHanded(k, created.UnixNano())
	if !ok {
		return false, nil
	}
	scfg, ok := c.assignedConfig(streamKey{k.account, k.stream})
	if !ok {
		c.handBack(k, created.UnixNano(), state)
		return true, errors.New("its stream is not assigned here")
	}
	jerr := acc.js.CreateConsumerState(k.stream, k.name, cfg, created, scfg, state)
	if jerr != nil && jerr.ErrCode == uint16(jserr.ConsumerNameExist) {
		if _, _, derr := acc.js.DetachConsumer(k.stream, k.name, created, nil); derr == nil {
			jerr = acc.js.CreateConsumerState(k.stream, k.name, cfg, created, scfg, state)
		}
	}
	if jerr != nil {
		c.handBack(k, created.UnixNano(), state)
		return true, jerr
	}
	c.cfg.Infof("JetStream cluster: consumer '%s > %s > %s' of one replica runs on this server with the state handed over in memory", k.account, k.stream, k.name)
	return true, nil
}

// keepsFiles reports whether consumer k of one replica (config cfg)
// keeps its state in files here: not mem_storage, and its stream, as
// the meta group assigns it, a file stream (consumerrun.Persisted).
func (c *Cluster) keepsFiles(k consumerKey, cfg consumer.Config) bool {
	scfg, ok := c.assignedConfig(streamKey{k.account, k.stream})
	return !cfg.MemoryStorage && (!ok || scfg.Storage != stream.MemoryStorage)
}

// handBack keeps state again for consumer k created at created (unix
// ns), after an attempt that took it failed.
func (c *Cluster) handBack(k consumerKey, created int64, state []byte) {
	c.mu.Lock()
	c.handed[k] = handedState{created: created, state: state}
	c.mu.Unlock()
}

// A replicated memory stream scaled down to one replica
// (docs/cluster.md, "Memory streams", "Back to one replica") goes
// through the steps of a file stream's ("Scaling down to one replica")
// up to the conversion, where its memory store, which holds everything
// the group committed once its runtime applied the log through the
// barrier (streamckpt.Replica.Final), is handed to the stream of one
// replica rather than written to files: finishMemoryConvert. A restart
// before the group's tombstone finds its group in the WAL and runs the
// replica again (it replays the whole log: startReplica), then converts
// it anew; one after it starts the stream of one replica empty, as a
// memory stream of one replica restarts (nats-server v2.15.2 too).

// finishMemoryConvert ends the conversion of this server's replica of
// the memory stream k (assignment sa, config cfg for one replica),
// stopped and detached with its own state and store st: meta.json for
// one replica, the group removed (its tombstone fsynced), the store
// reopened and started as the stream of one replica with that state.
// Errors leave the stream stopped; a restart starts it (empty, or from
// its group's log when the tombstone was not written).
func (c *Cluster) finishMemoryConvert(acc *account, k streamKey, sa meta.StreamAssignment, cfg stream.Config, state []byte, st store.Store) error {
	ms, ok := st.(*memstore.Store)
	if !ok {
		return errors.New("the replica's store is not a memory store")
	}
	created := time.Unix(0, sa.Created).UTC()
	if err := acc.js.WriteStreamMeta(cfg, created); err != nil {
		return err
	}
	if err := c.removeGroupWait(sa.Group); err != nil {
		return err
	}
	ms.Reopen()
	_, jerr := acc.js.StartReplica(cfg, jetstream.ReplicaStart{
		Created: created, Store: ms,
		// The stream's own state (its config for one replica, applied
		// through its log before the conversion; its duplicate window)
		// over the store as it is.
		Start: func(rt *streamrun.Stream) error { return rt.Restore(state, 0) },
	})
	if jerr != nil {
		return jerr
	}
	c.runAsSingle(k, sa, ", in memory")
	return nil
}
