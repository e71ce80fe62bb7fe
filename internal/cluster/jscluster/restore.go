package jscluster

import (
	"encoding/json"
	"time"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/jsapi"
	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/stream"
)

// Restoring a stream in a cluster (docs/cluster.md, "Restoring a
// stream"): nats-server v2.15.2 (jsClusteredStreamRestoreRequest) places
// the stream's group, assigns it with the snapshot's state, and the
// preferred replica takes the snapshot. cairn, on the meta leader:
//
//  1. checks the request (the config, a stream of that name: 10130) and
//     places the stream, this server first (it takes the snapshot, so
//     it must match the placement: 10005 otherwise);
//  2. takes the snapshot into its engine as a stream of one replica, as
//     one server restores (jetstream.BeginRestore: checked and installed
//     only once complete);
//  3. assigns that stream, of one replica on this server, through the
//     meta group (startReplica adopts the running stream instead of
//     creating it), then each consumer the snapshot held, of one replica
//     on this server (startSingle starts it from the files the restore
//     wrote, with its state);
//  4. for more replicas, scales the stream up as an update does
//     (UpdateStream: the new replicas are added as learners and caught up
//     by a stream snapshot); its consumers keep their one replica, as
//     those of any stream scaled up from one replica.
//
// A failure after step 2 deletes the installed stream and answers the
// error: nothing of the restore is left behind.

var _ jsapi.Restorer = (*account)(nil)

// StreamRestore implements jsapi.Restorer on the meta leader (the steps
// above): the answer is the subject the client sends the snapshot's
// chunks to; done answers the last chunk with the stream's info or the
// error. Errors: 10008 when this server does not lead the meta group;
// the config's (as one server checks it); 10130 a stream of that name;
// the account's limits over the cluster (checkLimits);
// 10005 when the stream cannot be placed, or not on this server; a memory
// stream 10009 (not built); the engine's (BeginRestore).
func (a *account) StreamRestore(cfg stream.Config, client []byte, done jetstream.RestoreDone) (string, *jserr.Error) {
	c := a.c
	one := cfg
	one.Replicas = 1
	if err := one.PrepareRestore(); err != nil {
		return "", err
	}
	if !c.metaLeader() {
		return "", jserr.New(jserr.ClusterNotAvail)
	}
	if one.Storage == stream.MemoryStorage {
		return "", jserr.New(jserr.ClusterNotLeader) // docs/cluster.md, "Not yet built"
	}
	k := streamKey{a.name, cfg.Name}
	if _, _, ok, _ := c.assignment(k); ok {
		return "", jserr.New(jserr.StreamNameExistRestoreFailed)
	}
	limited := cfg
	limited.Replicas = max(cfg.Replicas, 1)
	if err := a.checkLimits(&limited); err != nil {
		return "", err
	}
	servers, perr := c.restoreServers(max(cfg.Replicas, 1), cfg.Placement)
	if perr != nil {
		return "", perr
	}
	return a.js.BeginRestore(one, client, func(reply string, info *jetstream.StreamInfo, err *jserr.Error) {
		if err == nil {
			info, err = a.assignRestored(k, servers, info)
		}
		done(reply, info, err)
	})
}

// restoreServers places a restored stream of replicas replicas with
// placement p, this server first (step 1 above).
func (c *Cluster) restoreServers(replicas int, p *stream.Placement) ([]raftnode.ServerID, *jserr.Error) {
	var servers []raftnode.ServerID
	var perr *jserr.Error
	c.meta.View(func(st *meta.State) {
		pr := c.placeRequest(st, replicas, p)
		if !meta.Eligible(st, pr, c.name) {
			if _, perr = meta.Place(st, pr); perr == nil {
				perr = noPeers("no suitable peers for placement")
			}
			return
		}
		pr.Existing = []raftnode.ServerID{c.name}
		servers, perr = meta.Place(st, pr)
	})
	return servers, perr
}

// assignRestored runs steps 3 and 4 above for stream k, which the
// restore installed in this server's engine (info), and returns the
// stream's info. On an error the stream is deleted here.
func (a *account) assignRestored(k streamKey, servers []raftnode.ServerID, info *jetstream.StreamInfo) (*jetstream.StreamInfo, *jserr.Error) {
	c := a.c
	cfg, ok := a.js.StreamConfig(k.name)
	body, err := json.Marshal(&cfg)
	if !ok || err != nil {
		return a.dropRestored(k, jserr.New(jserr.StreamRestore, jserr.Sub("err", "restored stream not found")))
	}
	c.mu.Lock()
	if c.restored == nil {
		c.restored = map[streamKey]bool{}
	}
	c.restored[k] = true
	c.mu.Unlock()
	res, jerr := c.propose(&meta.AssignStream{Account: k.account, Name: k.name, Config: body, Created: info.Created.UnixNano(), Servers: servers[:1]})
	if jerr == nil && res.Existed {
		jerr = jserr.New(jserr.StreamNameExistRestoreFailed)
	}
	if jerr != nil {
		c.takeRestored(k)
		return a.dropRestored(k, jerr)
	}
	if !c.waitReplica(k) {
		return a.dropRestored(k, jserr.New(jserr.ClusterNotAvail))
	}
	if jerr := a.assignRestoredConsumers(k, servers[0]); jerr != nil {
		return a.dropRestored(k, jerr)
	}
	if len(servers) > 1 {
		full := cfg
		full.Replicas = len(servers)
		if body, err = json.Marshal(&full); err != nil {
			return a.dropRestored(k, jserr.From(err, jserr.StreamRestore))
		}
		if _, jerr := c.propose(&meta.UpdateStream{Account: k.account, Name: k.name, Config: body, Servers: servers}); jerr != nil {
			return a.dropRestored(k, jerr)
		}
		c.waitConfig(a, full)
	}
	si, jerr := a.js.StreamInfo(k.name, jetstream.InfoOptions{})
	if jerr != nil {
		return nil, jerr
	}
	return si, nil
}

// assignRestoredConsumers assigns each consumer the restore brought to
// stream k, with one replica on server (step 3 above): 10062 "restore
// failed: failed to add consumer ..." when the meta group refuses one.
func (a *account) assignRestoredConsumers(k streamKey, server raftnode.ServerID) *jserr.Error {
	cons, jerr := a.js.StreamConsumers(k.name)
	if jerr != nil {
		return jerr
	}
	for _, m := range cons {
		body, err := json.Marshal(&m.Config)
		if err != nil {
			return jserr.From(err, jserr.StreamRestore)
		}
		op := &meta.AssignConsumer{Account: k.account, Stream: k.name, Name: m.Config.Name, Action: meta.Create,
			Config: body, Created: m.Created.UnixNano(), Servers: []raftnode.ServerID{server}}
		if _, jerr := a.c.propose(op); jerr != nil {
			return jserr.New(jserr.StreamRestore, jserr.Sub("err", "failed to add consumer \""+m.Config.Name+"\": "+jerr.Error()))
		}
	}
	return nil
}

// dropRestored deletes the stream a restore installed here, through the
// meta group when it was assigned, and returns jerr.
func (a *account) dropRestored(k streamKey, jerr *jserr.Error) (*jetstream.StreamInfo, *jserr.Error) {
	c := a.c
	if _, _, assigned, _ := c.assignment(k); assigned {
		if _, err := c.propose(&meta.RemoveStream{Account: k.account, Name: k.name}); err == nil {
			return nil, jerr
		}
	}
	_ = a.js.DeleteStream(k.name)
	return nil, jerr
}

// takeRestored reports whether stream k is one a restore installed here
// and is being assigned (startReplica adopts it), and forgets it.
func (c *Cluster) takeRestored(k streamKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	ok := c.restored[k]
	delete(c.restored, k)
	return ok
}

// waitReplica waits, at most proposeTimeout, until this server runs a
// replica of stream k.
func (c *Cluster) waitReplica(k streamKey) bool {
	deadline := time.Now().Add(proposeTimeout)
	for c.replicaOf(k) == nil {
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-c.quit:
			return false
		case <-time.After(configPoll):
		}
	}
	return true
}
