package filestore

import (
	"testing"

	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/vfs"
)

// A healthy open reports its recovery summary to Infof only; damage goes
// to Logf (which the server logs as [WRN]), summary included.
func TestRecoverySummaryLevel(t *testing.T) {
	im := buildImage(t, 24, 700)
	open := func(flip bool) (warn, info *testLog) {
		fs := im.fs(t)
		if flip {
			p := im.segs[0]
			rec := im.records(p)[1]
			if err := fs.FlipBit(p, int64(rec.off+rec.size-1)*8); err != nil {
				t.Fatal(err)
			}
		}
		warn, info = &testLog{}, &testLog{}
		cfg := memConfig(fs, 700)
		cfg.Logf, cfg.Infof = warn.logf, info.logf
		s := mustOpen(t, cfg, store.Config{})
		s.Close()
		return warn, info
	}
	warn, info := open(false)
	if !info.has("recovered") || warn.has("recovered") {
		t.Errorf("healthy open: info %v, warn %v; want the summary in info only", info.lines, warn.lines)
	}
	warn, info = open(true)
	if !warn.has("recovered") || !warn.has("corrupt") || info.has("recovered") {
		t.Errorf("damaged open: info %v, warn %v; want the summary and the damage in warn", info.lines, warn.lines)
	}
}

// The summary names the sequences held as a range only when there is
// one: a store never written says so, an emptied one its last sequence
// (it once logged "sequences 0-0" and "sequences 8-7").
func TestRecoverySummaryRange(t *testing.T) {
	fs := vfs.NewCrashFS()
	cfg := memConfig(fs, 1<<20)
	reopen := func() *testLog {
		lg := &testLog{}
		c := cfg
		c.Logf = lg.logf
		s := mustOpen(t, c, store.Config{})
		s.Close()
		return lg
	}
	s := mustOpen(t, cfg, store.Config{})
	s.Close()
	if lg := reopen(); !lg.has("recovered 0 messages, no sequence assigned yet,") {
		t.Errorf("never written: %q", lg.lines)
	}
	s = mustOpen(t, cfg, store.Config{})
	appendSync(t, s, msgN("s", 0))
	s.Close()
	// One of each: the singular (trial 38 read "in 1 segments").
	if lg := reopen(); !lg.has("recovered 1 message, sequence 1, in 1 segment (") || !lg.has("(0 corrupt regions, 0 lost sequences, 0 torn bytes dropped)") {
		t.Errorf("1 message: %q", lg.lines)
	}
	s = mustOpen(t, cfg, store.Config{})
	for i := 1; i < 7; i++ {
		appendSync(t, s, msgN("s", i))
	}
	s.Close()
	if lg := reopen(); !lg.has("recovered 7 messages, sequences 1-7,") {
		t.Errorf("7 messages: %q", lg.lines)
	}
	s = mustOpen(t, cfg, store.Config{})
	if _, err := s.Purge(store.PurgeRequest{}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if lg := reopen(); !lg.has("recovered 0 messages, none left, last sequence 7,") {
		t.Errorf("purged: %q", lg.lines)
	}
}
