package streamckpt

import (
	"errors"
	"fmt"
	"path"
	"time"

	"github.com/cairnmq/cairn/internal/store/filestore"
	"github.com/cairnmq/cairn/internal/stream"
	"github.com/cairnmq/cairn/internal/vfs"
)

// A scale-down to one replica (docs/cluster.md, "Scaling down to one
// replica") turns the last replica of a group into a stream of one
// replica, which has no group: the store stays, the group's WAL entries
// and this package's checkpoint go. Nothing that lets them go may come
// before the store holds, durably, every entry the group ever committed:
//
//  1. the log is sealed (streamlog.Log.Seal) and a barrier entry applied:
//     no stream operation follows the barrier's index B;
//  2. Final: the runtime has applied everything through B, the store is
//     fsynced and the checkpoint of index >= B written (file fsynced,
//     renamed, directory fsynced);
//  3. the caller writes the stream's metadata for one replica, then
//     removes the group from the node (its tombstone fsynced: the WAL
//     may drop the group's entries from then on);
//  4. Release: the store is opened rolled back to the checkpoint's
//     position (what it already holds: nothing was applied after it),
//     closed, and the checkpoint file removed (the directory fsynced).
//     The stream then restarts from its files as a stream of one
//     replica does.
//
// A crash before the tombstone leaves the checkpoint and the group: the
// replica restarts from them, and the scale-down starts again at 1. A
// crash after it leaves the checkpoint and a tombstone: step 4 runs at
// the start (raftnode.Node.Removed tells). After step 4 the stream is a
// stream of one replica.

// ErrBehind: Final's runtime did not apply the log through the index
// asked within the time given.
var ErrBehind = errors.New("streamckpt: the stream has not applied its log through the barrier")

// Final takes the replica's last checkpoint before its group is removed
// (step 2 above): it ends the checkpoint goroutine, as Stop does, waits
// at most timeout for the runtime to have applied every operation handed
// to it and for the log to have applied index last, then takes the
// checkpoint and checks that it reflects last. A memory stream's replica
// has no checkpoint to take: Final returns once its runtime applied the
// log through last, its memory store then holding everything the group
// committed (a scale-down to one replica hands that store to the stream
// of one replica: docs/cluster.md, "Memory streams"). Call it with the
// runtime running, on a sealed log whose barrier resolved at last.
// Errors: ErrBehind, Checkpoint's. It may be called again after an error.
func (r *Replica) Final(last uint64, timeout time.Duration) error {
	r.once.Do(func() {
		close(r.stop)
		r.cancel()
	})
	if r.rt == nil || r.log == nil {
		return ErrStopped
	}
	<-r.done
	deadline := time.Now().Add(timeout)
	for {
		data, latest := r.log.Seen()
		if latest >= last && r.rt.AppliedIndex() >= data {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: log at %d, runtime at %d, barrier %d", ErrBehind, latest, r.rt.AppliedIndex(), last)
		}
		time.Sleep(time.Millisecond)
	}
	if r.store == nil {
		return nil // a memory stream's replica
	}
	if err := r.Checkpoint(); err != nil {
		return err
	}
	r.mu.Lock()
	idx := r.lastIndex
	r.mu.Unlock()
	if idx < last {
		return fmt.Errorf("%w: checkpoint at %d, barrier %d", ErrBehind, idx, last)
	}
	return nil
}

// Exists reports whether dir holds a replica's checkpoint file.
func Exists(fs vfs.FS, dir string) bool {
	if fs == nil {
		fs = vfs.OS()
	}
	_, _, err := fs.Stat(path.Join(dir, FileName))
	return err == nil
}

// Release ends the replica whose checkpoint is in cfg.Dir as a replica
// (step 4 above), once its group's tombstone is durable: its store is
// opened rolled back to the checkpoint's position and closed, then the
// checkpoint file is removed and the directory fsynced. The store is then
// a stream's of one replica. Without a checkpoint file it does nothing.
// Errors: ErrDamaged (a damaged file, or one of another group or
// replica), the store's (filestore.ErrBadPosition), the file system's.
func Release(cfg Config) error {
	fs := cfg.Store.FS
	if fs == nil {
		fs = vfs.OS()
		cfg.Store.FS = fs
	}
	ck, err := readFile(fs, cfg.Dir)
	if err != nil || ck == nil {
		return err
	}
	if ck.group != cfg.Group || ck.replica != cfg.Replica {
		return fmt.Errorf("%w: it is replica %d of group %d", ErrDamaged, ck.replica, ck.group)
	}
	scfg, err := stream.CheckpointConfig(ck.state)
	if err != nil {
		return err
	}
	fcfg := cfg.Store
	fcfg.RollbackMode, fcfg.RollbackTo = true, &ck.pos
	st, err := filestore.Open(fcfg, scfg.StoreConfig())
	if err != nil {
		return err
	}
	if err := st.Close(); err != nil {
		return err
	}
	for _, name := range []string{StageName, FileName + ".new", FileName} {
		if err := fs.Remove(path.Join(cfg.Dir, name)); err != nil && !vfs.IsNotExist(err) {
			return err
		}
	}
	return fs.SyncDir(cfg.Dir)
}
