package filestore

import (
	"testing"

	"github.com/cairnmq/cairn/internal/store"
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
