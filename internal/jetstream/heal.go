package jetstream

import (
	"fmt"
	"path"
	"time"

	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/vfs"
)

// A file stream's store fences itself after a failed write or fsync (a
// full disk, an I/O error): it refuses changes until it is opened again,
// since what it wrote last is uncertain (internal/store/filestore's
// package comment, "Writing (group commit)"). nats-server v2.15.2 needs a restart then; cairn heals the
// stream in place: every healEvery, and before a purge or a message
// delete of a fenced stream, it checks that the stream's directory takes
// a write and an fsync again (probeWritable), then stops the stream and
// opens it again from its files, as a start would (verifying them,
// reporting what is lost), with its consumers restored from their files.
// Pull requests waiting on its consumers end as at a shutdown; clients
// pull again.

// healEvery is how often fenced streams are tried again.
const healEvery = 2 * time.Second

// probeSize is the size of the probe write: a disk that takes it has
// room for a segment's next records.
const probeSize = 64 << 10

// healLoop tries the fenced streams again, and raises a file limit sized
// from a disk that has more room now (regrowFileLimit), every healEvery
// until Shutdown.
func (js *JetStream) healLoop() {
	t := time.NewTicker(healEvery)
	defer t.Stop()
	for {
		select {
		case <-js.quit:
			return
		case <-t.C:
			js.regrowFileLimit()
			js.healFenced()
		}
	}
}

// healFenced heals every fenced stream whose directory is writable again
// and returns their names.
func (js *JetStream) healFenced() []string {
	js.mu.Lock()
	entries := js.entriesLocked()
	js.mu.Unlock()
	var healed []string
	for _, r := range entries {
		if fenced(r) != nil && js.heal(r) == nil {
			healed = append(healed, r.Name())
		}
	}
	return healed
}

// fenced returns the error that fenced r's store, or nil.
func fenced(r *streamEntry) error {
	if f, ok := r.Store().(fencer); ok {
		return f.Fenced()
	}
	return nil
}

// heal reopens the fenced stream r once its directory is writable. It
// returns the probe's error (r stays as it is), or the reopen's (the
// stream is then listed as unrestored, as after a failed start, and its
// files stay).
func (js *JetStream) heal(r *streamEntry) error {
	name := r.Name()
	if err := js.probeWritable(r.Dir()); err != nil {
		return err
	}
	js.mu.Lock()
	if js.closed || js.streams[name] != r {
		js.mu.Unlock()
		return fmt.Errorf("stream %s changed meanwhile", name)
	}
	delete(js.streams, name)
	js.refreshCapturesLocked()
	if js.deleting == nil {
		js.deleting = map[string]chan struct{}{}
	}
	ch := make(chan struct{}) // a create of the name waits for the reopen
	js.deleting[name] = ch
	js.mu.Unlock()
	defer func() {
		js.mu.Lock()
		delete(js.deleting, name)
		js.mu.Unlock()
		close(ch)
	}()
	cause := fenced(r)
	_ = r.Stop(nil) // its store's Close returns the fencing error
	nr, err := js.restoreOne(name)
	if err == nil {
		js.mu.Lock()
		closing := js.closed // Shutdown began meanwhile and missed it
		if closing {
			delete(js.streams, name)
		}
		js.mu.Unlock()
		if closing {
			_ = nr.Stop(nil)
			return fmt.Errorf("shutting down")
		}
	}
	if err != nil {
		js.mu.Lock()
		js.unrestored[name] = err.Error()
		js.mu.Unlock()
		js.logf("jetstream: stream %s: reopening after %v failed (left on disk): %v", name, cause, err)
		return err
	}
	js.cfg.Infof("jetstream: stream %s: its directory takes writes again; reopened from its files after: %v", name, cause)
	return nil
}

// probeWritable writes probeSize bytes to a file in dir, fsyncs and
// removes it.
func (js *JetStream) probeWritable(dir string) error {
	if sp, ok := js.cfg.FS.(vfs.Space); ok {
		if free, _, err := sp.Space(dir); err == nil && free < 2*probeSize {
			return fmt.Errorf("%d bytes free", free)
		}
	}
	name := path.Join(dir, ".heal-probe")
	f, err := js.cfg.FS.Create(name)
	if err != nil {
		return err
	}
	_, err = f.Write(make([]byte, probeSize))
	if err == nil {
		err = f.Sync()
	}
	f.Close()
	if rerr := js.cfg.FS.Remove(name); err == nil {
		err = rerr
	}
	return err
}

// healBefore heals the stream name first when it is fenced, so that a
// purge or a message delete can free space without a restart; it
// returns the stream to operate on.
func (js *JetStream) healBefore(name string) (*streamEntry, *jserr.Error) {
	r, jerr := js.lookup(name)
	if jerr != nil || fenced(r) == nil {
		return r, jerr
	}
	if err := js.heal(r); err != nil {
		return r, nil // the operation reports the fenced store
	}
	return js.lookup(name)
}
