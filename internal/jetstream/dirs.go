package jetstream

import (
	"errors"
	"fmt"
	"github.com/cairnmq/cairn/internal/jetstream/metafile"
	"path"
	"strings"

	"github.com/cairnmq/cairn/internal/vfs"
)

// Stream directories (package comment, Files). A stream name never holds
// a '.' (stream.ValidName), so the names below cannot be a stream's:
//
//	.<name>                   a stream being deleted: renamed there first,
//	                          so that a crash in the middle of the removal
//	                          leaves nothing a restart or a create could
//	                          take for the stream (nats-server v2.15.2
//	                          renames to the same name); a start removes it
//	<name>.unrestored-<ns>    a directory a start could not restore, moved
//	                          aside by a create of the same name so that the
//	                          new stream never serves its messages; kept for
//	                          the operator, never read

// writeProbe is created and removed in <StoreDir>/jetstream at the start,
// as nats-server probes its store directory.
const writeProbe = ".cairn-write-probe"

// errNotWritable is New's error when the store directory cannot be
// written (nats-server v2.15.2: "storage directory is not writable").
var errNotWritable = errors.New("storage directory is not writable")

// checkWritable fails with errNotWritable when a file cannot be created
// in <StoreDir>/jetstream.
func checkWritable(fs vfs.FS, dir string) error {
	p := path.Join(dir, writeProbe)
	f, err := fs.Create(p)
	if err != nil {
		return fmt.Errorf("%w: %v", errNotWritable, err)
	}
	_ = f.Close()
	if err := fs.Remove(p); err != nil {
		return fmt.Errorf("%w: %v", errNotWritable, err)
	}
	return nil
}

// syncChain makes dir and every directory above it durable, once at each
// start: MkdirAll may have created any of them, and a stream's files are
// only as durable as the entries leading to them (the file store syncs
// only the directories of its own store).
func syncChain(fs vfs.FS, dir string) error {
	for dir = path.Clean(dir); ; dir = path.Dir(dir) {
		if err := fs.SyncDir(dir); err != nil {
			return err
		}
		if dir == "/" || dir == "." {
			return nil
		}
	}
}

// deletingDir returns where a stream's directory goes while it is removed.
func (js *JetStream) deletingDir(name string) string {
	return path.Join(js.streamsDir(), "."+name)
}

// removeStreamDir deletes a stream's directory: it renames it to
// deletingDir durably, which deletes the stream, then removes the files.
// Only a failed rename is an error: what a failed removal leaves is
// removed at the next start.
func (js *JetStream) removeStreamDir(name, dir string) error {
	fs := js.cfg.FS
	gone := js.deletingDir(name)
	if _, _, err := fs.Stat(gone); err == nil {
		if err := metafile.RemoveAll(fs, gone); err != nil {
			return fmt.Errorf("remove %s, left by an earlier delete: %w", gone, err)
		}
	}
	if err := fs.Rename(dir, gone); err != nil {
		return err
	}
	if err := fs.SyncDir(js.streamsDir()); err != nil {
		return err
	}
	if err := metafile.RemoveAll(fs, gone); err != nil {
		js.logf("jetstream: stream %s deleted; removing its files: %v (the next start removes them)", name, err)
	}
	return nil
}

// restorable reports whether a directory entry of the streams directory
// is a stream to restore. It removes what an interrupted delete or create
// left (a directory without meta.json) and skips the directories moved
// aside by setAside.
func (js *JetStream) restorable(entry string) bool {
	switch {
	case strings.HasPrefix(entry, "."):
		if err := metafile.RemoveAll(js.cfg.FS, path.Join(js.streamsDir(), entry)); err != nil {
			js.logf("jetstream: remove %q, left by a stream delete: %v", entry, err)
		} else {
			js.cfg.Infof("jetstream: removed %q, left by a stream delete that did not finish", entry)
		}
		return false
	case strings.Contains(entry, "."):
		js.logf("jetstream: %q is not a stream (left on disk)", entry)
		return false
	}
	dir := path.Join(js.streamsDir(), entry)
	if _, _, err := js.cfg.FS.Stat(path.Join(dir, metafile.Name)); vfs.IsNotExist(err) {
		// meta.json is written before anything else a stream stores and
		// removed only by a delete: this is a create that did not finish,
		// or what an older build's interrupted delete left.
		if err := metafile.RemoveAll(js.cfg.FS, dir); err != nil {
			js.logf("jetstream: remove %q, a stream directory without %s: %v", entry, metafile.Name, err)
		} else {
			js.cfg.Infof("jetstream: removed %q: no %s (a create that did not finish, or a delete)", entry, metafile.Name)
		}
		return false
	}
	return true
}

// setAside moves dir out of a new stream's way when a start left it
// there unrestored (a damaged meta.json, a memory stream's metadata): the
// new stream starts empty and the old files stay for the operator. It
// does nothing when dir does not exist.
func (js *JetStream) setAside(name, dir string) error {
	if _, _, err := js.cfg.FS.Stat(dir); err != nil {
		return nil
	}
	aside := fmt.Sprintf("%s.unrestored-%d", dir, js.now().UnixNano())
	if err := js.cfg.FS.Rename(dir, aside); err != nil {
		return fmt.Errorf("move %s, not restored at the start, aside: %w", dir, err)
	}
	js.logf("jetstream: stream %s: the directory a start did not restore is kept as %s; the new stream starts empty", name, path.Base(aside))
	return js.cfg.FS.SyncDir(js.streamsDir())
}

// discardStreamDir removes what a create that failed left of a stream's
// directory ("" for a memory stream: nothing), so that no start finds it
// half made. A failure is only logged: the next create sets it aside.
func (js *JetStream) discardStreamDir(dir string) {
	if dir == "" {
		return
	}
	if _, _, err := js.cfg.FS.Stat(dir); err != nil {
		return
	}
	if err := metafile.RemoveAll(js.cfg.FS, dir); err != nil {
		js.logf("jetstream: remove %s after a failed create: %v", dir, err)
		return
	}
	_ = js.cfg.FS.SyncDir(js.streamsDir())
}
