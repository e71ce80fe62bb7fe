package raftnode

import (
	"errors"
	"fmt"
	"path"

	"github.com/cairnmq/cairn/internal/vfs"
)

// ErrNotDamaged is returned by QuarantineWAL for a WAL Replay found
// sound: nothing is moved.
var ErrNotDamaged = errors.New("raftnode: the WAL is not damaged")

// ErrGroupsAdded is returned by QuarantineWAL once a group was added:
// its replica runs on the WAL, which stays.
var ErrGroupsAdded = errors.New("raftnode: groups were added over the WAL")

// QuarantineWAL moves a WAL that Replay found damaged (Damage set, Replay
// without error) to the directory to, whole and as it is (kept for an
// operator; nothing reads it again), and starts a new, empty WAL in its
// place under a new store incarnation, which it returns. It must run
// before any group is added: no replica on this node ever saw the damaged
// log, and the new incarnation guarantees none of the old replicas starts
// again as itself (every binding to the old store is refused, decision 3
// in docs/cluster.md); the cluster layer then joins the meta group as
// a new replica and has the old replicas replaced ("Fencing").
//
// Errors: ErrNotDamaged (a sound WAL, or one Replay failed to read: a
// file-system error is not evidence of damage), ErrGroupsAdded, ErrStopped,
// and the file system's: if the move fails the damaged WAL stays where it
// was, every group fenced; if creating the new one fails after the move,
// the node keeps the damaged WAL's record (Damage still set) and the
// directory is empty: the next start creates a new WAL.
func (n *Node) QuarantineWAL(to string) (Incarnation, error) {
	n.walMu.Lock()
	defer n.walMu.Unlock()
	if !n.replayed.Load() || n.replayErr != nil || n.wal.damage == nil {
		return Incarnation{}, ErrNotDamaged
	}
	n.mu.RLock()
	added, closed := len(n.mu.groups) > 0, n.mu.closed
	n.mu.RUnlock()
	switch {
	case closed:
		return Incarnation{}, ErrStopped
	case added:
		return Incarnation{}, ErrGroupsAdded
	}
	old := n.wal
	if err := moveDir(old.fs, old.dir, to); err != nil {
		return Incarnation{}, err
	}
	_ = old.close() // its file is in to now; nothing more is written to it
	w, err := prepareWAL(old.fs, old.dir, old.segBytes, old.logf, old.debugf)
	if err != nil {
		return Incarnation{}, fmt.Errorf("raftnode: a new WAL after moving the damaged one to %s: %w", to, err)
	}
	n.wal = w
	n.newWAL.Store(true)
	inc := w.inc
	n.inc.Store(&inc)
	return inc, nil
}

// moveDir renames directory from to to (creating to's parent) and makes
// both parents' entries durable, so a power loss cannot bring the damaged
// WAL back under its old name.
func moveDir(fs vfs.FS, from, to string) error {
	if err := fs.MkdirAll(path.Dir(to)); err != nil {
		return err
	}
	if err := fs.Rename(from, to); err != nil {
		return err
	}
	if err := fs.SyncDir(path.Dir(to)); err != nil {
		return err
	}
	return fs.SyncDir(path.Dir(from))
}
