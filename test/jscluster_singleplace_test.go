package test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cairnmq/cairn/internal/server"
)

// soloBody is SOLO's config (soloSetup's) with placement.
func soloBody(placement string) string {
	return fmt.Sprintf(`{"name":"SOLO","subjects":["solo.>"],"num_replicas":1,"placement":%s}`, placement)
}

// A stream update naming a placement the server of a file stream of one
// replica does not match moves the stream to a server matching it, as
// nats-server v2.15.2 does (measured by hand: three processes with
// az tags, an R1 file stream with 20 messages and a durable with 8
// delivered and 5 acknowledged, `--tag az:2`: the answer at once with
// the new placement, the stream on n2 2.4 s later with every message,
// the durable there with its state). Here: the update is answered with
// the new placement; SOLO ends on the tagged server, one replica (no
// group), with every message (those published during the move too),
// its durable D there with 10 delivered, ack floor 6 and 4 pending
// acks; the old server holds nothing; a publish is acknowledged with the
// next sequence and D delivers the first message it never delivered. A
// placement no server matches is nats-server's 10005, one SOLO's new
// server matches moves nothing (a memory stream of one replica:
// TestJetStreamClusterMemorySingleStreamPlacementMove). Before, the move
// was 10069 "stream placement can not be changed".
func TestJetStreamClusterSingleStreamPlacementMove(t *testing.T) {
	singleStreamPlacementMove(t, false)
}

// The same with D kept in memory (mem_storage): its state is handed over
// in memory at each of the move's conversions, as nats-server v2.15.2
// moves it. Before, the update was 10069 "stream placement can not be
// changed" (logged: "consumer 'D' keeps its state in memory").
func TestJetStreamClusterSingleStreamPlacementMoveMemStorage(t *testing.T) {
	singleStreamPlacementMove(t, true)
}

// singleStreamPlacementMove runs the placement move test above, with D
// mem_storage when memD.
func singleStreamPlacementMove(t *testing.T, memD bool) {
	servers, _, js, home := soloSetupMem(t, 3, func(i int, o *server.Options) { o.Tags = []string{fmt.Sprintf("az:%d", i+1)} }, memD)
	hi := leaderIndex(servers, home)
	ti := (hi + 1) % 3 // the destination
	via := (hi + 2) % 3
	dest := servers[ti].Name()
	tag := fmt.Sprintf("az:%d", ti+1)
	app := connect(t, servers[via].ClientURL(), nats.UserInfo("app", "app"))

	wantAnswer(t, app, "$JS.API.STREAM.UPDATE.SOLO", soloBody(`{"tags":["az:9"]}`), 10005, "no suitable peers for placement, tags not matched ['az:9']")
	wantAnswer(t, app, "$JS.API.STREAM.UPDATE.SOLO", soloBody(`{"cluster":"ELSEWHERE"}`), 10005, "no suitable peers for placement")

	start := time.Now()
	msg, err := app.Request("$JS.API.STREAM.UPDATE.SOLO", []byte(soloBody(fmt.Sprintf(`{"tags":[%q]}`, tag))), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var a apiAnswer
	if err := json.Unmarshal(msg.Data, &a); err != nil {
		t.Fatalf("%q: %v", msg.Data, err)
	}
	if a.Error != nil || a.Config == nil || a.Config.Replicas != 1 || a.Config.Placement == nil || !slices.Equal(a.Config.Placement.Tags, []string{tag}) {
		t.Fatalf("the update's answer: %s", msg.Data)
	}
	answered := time.Since(start)
	// Published during the move, kept by it.
	clusterPublish(t, js[via], fmt.Sprintf("solo.%d", soloMsgs+1), soloMsgs+1)
	eventuallyWithin(t, 45*time.Second, "SOLO and D on "+dest, func() error {
		on, err := soloOn(t, js[via], home)
		if err != nil {
			return err
		}
		if on != dest {
			return fmt.Errorf("SOLO on %s, want %s", on, dest)
		}
		return holdsNothing(servers[hi])
	})
	t.Logf("SOLO moved from %s to %s (%s): answered in %v, moved in %v", home, dest, tag, answered.Round(time.Millisecond), time.Since(start).Round(10*time.Millisecond))

	// A placement its server already matches: a config change, nothing
	// moves (nats-server keeps it there too).
	a = wantAnswer(t, app, "$JS.API.STREAM.UPDATE.SOLO", soloBody(fmt.Sprintf(`{"cluster":%q,"tags":[%q]}`, clusterName, tag)), 0, "")
	if a.Cluster == nil || a.Cluster.Leader != dest || len(a.Cluster.Replicas) != 0 {
		t.Fatalf("SOLO after a placement %s matches: %+v", dest, a.Cluster)
	}
	if on, err := soloOn(t, js[via], ""); err != nil || on != dest {
		t.Fatalf("SOLO on %s (%v) after a placement %s matches", on, err, dest)
	}
	soloServes(t, js[via], soloMsgs+1)
}
