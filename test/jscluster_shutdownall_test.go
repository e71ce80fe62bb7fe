package test

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairnmq/cairn/internal/logger"
	"github.com/cairnmq/cairn/internal/server"
)

var (
	handOverLine = regexp.MustCompile(`leadership handed over for (\d+) of (\d+) Raft groups? in \S+ \((\d+) without an active follower, (\d+) lost without a successor\)`)
	handingLine  = regexp.MustCompile(`handing over the leadership of (\d+) Raft groups?`)
	noneLeftLine = regexp.MustCompile(`no other server is left to take the leadership of (\d+) Raft groups?`)
)

// Every server of a cluster stopped at once (trial 36, finding 9): each
// tells its peers it leaves (the lame duck route INFO), so none hands a
// group to another that is leaving, each handover ends at once when no
// peer is left rather than at its 5 s cap, nothing is logged at [WRN]
// (before: etcd raft's "stepped down to follower since quorum is not
// active" for each group CheckQuorum took, and "did not move" for the
// others), and the summary counts a group moved only if another replica
// was seen to take it (before, one lost to CheckQuorum counted as handed
// over: "28 of 28 ... in 5.004s"). A group whose other replicas' servers
// all announced leaving counts as having no other server left (trial
// 37: "0 of 2 (2 without an active follower ...)" for followers that
// were leaving), and a server that had no group to hand to a server
// staying logs only that line.
func TestJetStreamClusterShutdownAllAtOnce(t *testing.T) {
	logs := make([]*syncBuffer, 3)
	servers, _ := jsClusterMod(t, 3, func(i int, o *server.Options) {
		logs[i] = &syncBuffer{}
		o.Logger = logger.New(logs[i], false, false)
		o.RaftTick = 0 // production: an election timeout of 1 s
	})
	js, err := jetstream.New(connect(t, servers[0].ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 6; i++ {
		name := fmt.Sprintf("S%d", i)
		eventually(t, "create "+name, func() error {
			_, err := js.CreateStream(pollCtx(t), jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}, Replicas: 3})
			return err
		})
		currentReplicas(t, js, name)
	}
	marks := make([]int, 3)
	for i, l := range logs {
		marks[i] = len(l.String())
	}
	var wg sync.WaitGroup
	took := make([]time.Duration, 3)
	for i, s := range servers {
		wg.Go(func() {
			start := time.Now()
			s.Shutdown()
			took[i] = time.Since(start)
		})
	}
	wg.Wait()
	for i, l := range logs {
		out := l.String()[marks[i]:]
		// Well under the 5 s cap, which needs no election timeout here.
		if took[i] > 2500*time.Millisecond {
			t.Errorf("n%d took %v to shut down", i+1, took[i])
		}
		for line := range strings.SplitSeq(out, "\n") {
			if strings.Contains(line, "[WRN]") || strings.Contains(line, "[ERR]") {
				t.Errorf("n%d logged during the shutdown: %s", i+1, line)
			}
		}
		h := handingLine.FindStringSubmatch(out)
		if h == nil {
			continue // it led nothing
		}
		led, _ := strconv.Atoi(h[1])
		noneLeft := 0
		if m := noneLeftLine.FindStringSubmatch(out); m != nil {
			noneLeft, _ = strconv.Atoi(m[1])
		}
		m := handOverLine.FindStringSubmatch(out)
		if m == nil {
			if noneLeft != led {
				t.Errorf("n%d led %d groups, logged no accounting and no other server left for %d", i+1, led, noneLeft)
			}
			continue
		}
		n := make([]int, 4)
		for k := range n {
			n[k], _ = strconv.Atoi(m[k+1])
		}
		if n[1] != led || n[0]+n[2]+n[3]+noneLeft > n[1] {
			t.Errorf("n%d: %q and %d with no other server left count more groups than it led (%d)", i+1, m[0], noneLeft, led)
		}
	}
}
