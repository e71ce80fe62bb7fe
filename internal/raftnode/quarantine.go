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

// ErrNotReplayed is returned by RetireWAL before Replay, or when Replay
// failed to read the WAL (a file-system error): nothing is moved.
var ErrNotReplayed = errors.New("raftnode: the WAL was not replayed")

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
	return n.replaceWAL(to, true)
}

// RetireWAL moves a replayed WAL, sound or damaged, to the directory to,
// removes it there, and starts a new, empty WAL in its place under a new
// store incarnation, which it returns: for a store whose replicas were
// all taken away from it (docs/cluster.md, "Removing a server": a
// server removed with SERVER.REMOVE and started again on its store), so
// that none of its replicas ever votes again with a state from before
// the removal, and the server enters the meta group as a new replica.
// Like QuarantineWAL it must run before any group is added. A removal
// of the moved files that fails is logged and left (nothing reads them;
// the next RetireWAL to the same place removes them).
//
// Errors: ErrNotReplayed (the WAL stays), ErrGroupsAdded, ErrStopped, and the file
// system's, as QuarantineWAL.
func (n *Node) RetireWAL(to string) (Incarnation, error) {
	inc, err := n.replaceWAL(to, false)
	if err != nil {
		return inc, err
	}
	if err := removeTree(n.wal.fs, to); err != nil {
		n.cfg.Logf("raftnode: the retired WAL in %s: %v", to, err)
	}
	return inc, nil
}

// replaceWAL moves the replayed WAL to to and starts a new one in its
// place (QuarantineWAL, and RetireWAL with damaged false: a sound WAL
// too).
func (n *Node) replaceWAL(to string, damaged bool) (Incarnation, error) {
	n.walMu.Lock()
	defer n.walMu.Unlock()
	switch {
	case damaged && (!n.replayed.Load() || n.replayErr != nil || n.wal.damage == nil):
		return Incarnation{}, ErrNotDamaged
	case !n.replayed.Load() || n.replayErr != nil:
		return Incarnation{}, ErrNotReplayed
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
	if err := removeTree(old.fs, to); err != nil {
		return Incarnation{}, err
	}
	if err := moveDir(old.fs, old.dir, to); err != nil {
		return Incarnation{}, err
	}
	_ = old.close() // its file is in to now; nothing more is written to it
	w, err := prepareWAL(old.fs, old.dir, old.segBytes, old.logf, old.debugf)
	if err != nil {
		return Incarnation{}, fmt.Errorf("raftnode: a new WAL after moving the old one to %s: %w", to, err)
	}
	n.wal = w
	n.newWAL.Store(true)
	inc := w.inc
	n.inc.Store(&inc)
	return inc, nil
}

// removeTree removes dir and everything under it; a dir that does not
// exist is no error.
func removeTree(fs vfs.FS, dir string) error {
	_, isDir, err := fs.Stat(dir)
	switch {
	case vfs.IsNotExist(err):
		return nil
	case err != nil:
		return err
	case isDir:
		names, err := fs.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, name := range names {
			if err := removeTree(fs, path.Join(dir, name)); err != nil {
				return err
			}
		}
	}
	if err := fs.Remove(dir); err != nil {
		return err
	}
	return fs.SyncDir(path.Dir(dir))
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
