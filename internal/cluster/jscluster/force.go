package jscluster

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"time"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/jetstream/metafile"
	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/vfs"
)

// Forcing a new cluster (docs/cluster.md, "Forcing a new cluster"):
// the operator's way back when a majority of the meta group's servers
// lost their Raft WALs (damaged and quarantined, or deleted), so that
// the meta group, and the replicated streams and consumers whose
// majority was on them, can never elect a leader again. Modelled on
// etcd's --force-new-cluster (https://etcd.io/docs/v3.5/op-guide/recovery/).
//
// Config.ForceNew is given to ONE server whose WAL is intact. At its
// start, once the WAL is replayed, every replica it holds in the WAL,
// the meta group's and those of its replicated streams and consumers,
// is added with raftnode.GroupConfig.ForceSole: conf change entries
// that remove every other replica are appended to its log and committed
// by force, and it leads its groups alone. The servers whose WALs were
// lost are already joining the meta group as new replicas (a new store
// incarnation: quarantineWAL, storeChanged): the forced meta leader
// catalogues and adds them (reconcileMeta), replaces their stream and
// consumer replicas by new ones (replaceStale), and each forced stream
// or consumer leader adds those as learners, catches them up by a
// snapshot and promotes them (reconcileMembership): the groups grow
// back to their assigned replicas.
//
// The force is refused (logged, the server starts as it would without
// it) when this server's own WAL was just quarantined or fails to
// replay, or holds no replica of the meta group (nothing to recover
// from), when the record of an earlier force on this WAL exists
// (forcedFile: forcing again after the others rejoined would throw
// them out again), or when another member of the meta group says hello
// within forceWait with the store incarnation the meta group knows it
// by (intactPeers): its WAL is not lost, the group may have its quorum,
// and a force would split the cluster in two. Entries committed by a majority that did not include
// this server are lost.

// forcedFile is the record of a force done on this server's WAL
// (Dir/forced, a metafile), written once the forced meta replica leads
// and the forced replicas started (recordForce):
// a later start with Config.ForceNew on the same WAL is refused, so
// that a flag left on the command line does nothing twice. Deleting the
// directory allows a new force.
type forcedFile struct {
	// Incarnation is the store incarnation of the WAL that was forced.
	Incarnation string `json:"incarnation"`
	// At is when the forced meta replica first led (UTC).
	At time.Time `json:"at"`
}

// forcedDir is where the record of a force is kept.
func (c *Cluster) forcedDir() string { return path.Join(c.cfg.Dir, "forced") }

// decideForce, on the run goroutine after the replay, reports whether
// this start forces its replicas alone (Config.ForceNew, not refused);
// quarantined: the replay found the WAL damaged and it was moved aside
// (or could not be); replayErr: the replay failed.
func (c *Cluster) decideForce(quarantined bool, replayErr error) bool {
	if !c.cfg.ForceNew {
		return false
	}
	refuse := func(why string) bool {
		c.cfg.Logf("JetStream cluster: the force of a new cluster (cluster_force_new) is REFUSED: %s; the server starts without it", why)
		return false
	}
	switch {
	case replayErr != nil:
		return refuse("this server's Raft WAL could not be replayed: " + replayErr.Error())
	case quarantined:
		return refuse("this server's own Raft WAL was damaged (it joins as a new replica and has nothing to recover from): give the flag to a server whose WAL is intact")
	}
	if _, ok := c.node.RecoveredReplica(meta.MetaGroup); !ok {
		return refuse("this server's Raft WAL holds no replica of the meta group (a new, wiped or replaced WAL): give the flag to a server whose WAL is intact")
	}
	var rec forcedFile
	switch err := metafile.Read(c.cfg.FS, c.forcedDir(), &rec); {
	case err == nil && rec.Incarnation == c.node.Incarnation().String():
		return refuse("this WAL was forced already at " + rec.At.Format(time.RFC3339) + " (remove the flag; to force it again, delete " + c.forcedDir() + " first)")
	case err != nil && !vfs.IsNotExist(err):
		return refuse("the record of an earlier force (" + c.forcedDir() + ") cannot be read: " + err.Error())
	}
	if up := c.intactPeers(forceWait); len(up) > 0 {
		return refuse(fmt.Sprintf("%v are up with the Raft WALs the meta group knows them by (the cluster may well have its quorum; a force would split it): stop them and move their WALs aside first, or do not force", up))
	}
	c.cfg.Logf("JetStream cluster: FORCING A NEW CLUSTER (cluster_force_new): this server's replicas of the meta group and of every replicated stream and consumer in its Raft WAL become their groups' only voters; entries only the other servers held are LOST; the other servers rejoin as new replicas. Remove the flag from the command line: a later start with it is refused")
	return true
}

// forceWait bounds how long decideForce waits for the meta group's other
// members to say hello (their routes connect within a second or two of
// the start); a member not heard from by then is taken to be down.
const forceWait = 5 * time.Second

// intactPeers returns the meta group's other members that are up with
// the store incarnation the meta group knows them by: their hello
// carries the incarnation the voters record or the meta catalogue (as
// of its checkpoint) names for them, so their WAL was not lost and the
// group may have its quorum without this server. It waits, at most
// wait, until every member said hello (or the cluster closes).
func (c *Cluster) intactPeers(wait time.Duration) []raftnode.ServerID {
	known := map[raftnode.ServerID][]raftnode.Incarnation{}
	var rec votersFile
	if metafile.Read(c.cfg.FS, path.Join(c.cfg.Dir, "voters"), &rec) == nil {
		for _, n := range rec.Voters {
			if inc, err := parseIncarnation(rec.Incarnations[n]); err == nil {
				known[raftnode.ServerID(n)] = append(known[raftnode.ServerID(n)], inc)
			}
		}
	}
	c.meta.View(func(st *meta.State) {
		for _, sv := range st.Servers() {
			if !sv.Removed {
				known[sv.Name] = append(known[sv.Name], sv.Incarnation)
			}
		}
	})
	delete(known, c.name)
	deadline := time.Now().Add(wait)
	for {
		var up []raftnode.ServerID
		heard := 0
		for _, n := range slices.Sorted(maps.Keys(known)) {
			inc, ok := c.tr.PeerIncarnation(n)
			if !ok {
				continue
			}
			heard++
			if slices.Contains(known[n], inc) {
				up = append(up, n)
			}
		}
		if heard == len(known) || time.Now().After(deadline) {
			return up
		}
		select {
		case <-c.quit:
			return up
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// recordForce, on the run goroutine, writes forcedFile once this forced
// server leads the meta group and every replica the meta group assigns
// it has started and applied its log (Recovery.Done): the forced
// entries of each are durable, so a restart needs no second force; it
// reports whether the record is written.
func (c *Cluster) recordForce() bool {
	if !c.metaLeader() || !c.Recovery().Done {
		return false
	}
	dir := c.forcedDir()
	rec := forcedFile{Incarnation: c.node.Incarnation().String(), At: c.cfg.Now().UTC()}
	if err := c.cfg.FS.MkdirAll(dir); err != nil {
		c.cfg.Logf("jscluster: record the force of a new cluster: %v", err)
		return false
	}
	if err := metafile.Write(c.cfg.FS, dir, rec); err != nil {
		c.cfg.Logf("jscluster: record the force of a new cluster: %v", err)
		return false
	}
	c.cfg.Logf("JetStream cluster: forced a new cluster: this server leads the meta group alone; the servers that lost their WALs are added back as they rejoin (recorded in %s)", dir)
	return true
}
