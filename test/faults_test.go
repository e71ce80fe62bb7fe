package test

import (
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/faults"
)

// TestFaultKillStreamLeader is the short run of the process-level fault
// suite (docs/cluster.md, "The process-level fault suite"): three
// server processes, an R3 file stream, two synchronous producers and an
// asynchronous one (every message with its own Nats-Msg-Id, retried
// until acknowledged) and a durable consumer; the stream leader's process
// gets SIGKILL and is started again. Then the history is checked: every
// acknowledged message is in the stream at the sequence of its PubAck,
// none twice, each producer's in order, every replica current, and the
// durable consumer delivered everything stored. The recovery times are
// logged, not asserted (bench/faults reports them); every wait is on a
// condition with a generous deadline.
//
// With CAIRN_TEST_TARGET=nats-server the same run starts nats-server.
func TestFaultKillStreamLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level test")
	}
	bin := clusterBinary(t)
	res, err := faults.Run(faults.Config{Bin: bin, Dir: t.TempDir(), Fault: "kill-leader", Seed: 1,
		MaxHold: 60 * time.Second, Wait: 90 * time.Second, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("acked %d, stored %d; first PubAck %v after the SIGKILL, %v after the restart; every replica current %v after the restart; %d failed attempts",
		res.Report.Acked, res.Report.Stored, res.ToAck, res.Healed, res.Current, res.Errors)
	if !res.Report.OK() {
		t.Fatalf("history check: %s", res.Report)
	}
	if res.Report.Acked == 0 || res.Report.Stored < res.Report.Acked {
		t.Fatalf("acked %d, stored %d", res.Report.Acked, res.Report.Stored)
	}
}
