package test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// A scale in flight, as nats-server v2.15.2 answers around it
// (docs/clustering.md, "Scaling"): a move (a placement change) gets
// 10226 "stream reconfiguration already in progress", byte for byte; a
// second scale stacks on it; stream info shows the desired block with
// the origin's replica count; $JS.API.STREAM.CANCEL_MOVE answers the
// stream's info with the origin's num_replicas and a desired block
// naming the origin's servers, and the stream goes back to them with
// every message. With no scale in flight the cancel is 10129.
func TestJetStreamClusterStreamScaleCancel(t *testing.T) {
	servers, _, _, nc := placementCluster(t, nil)
	js, err := nc.JetStream(nats.PublishAsyncMaxPending(256))
	if err != nil {
		t.Fatal(err)
	}
	body := func(replicas int, placement string) string {
		return fmt.Sprintf(`{"name":"SC","subjects":["sc.>"],"num_replicas":%d%s}`, replicas, placement)
	}
	wantAnswer(t, nc, "$JS.API.STREAM.CREATE.SC", body(2, ""), 0, "")
	origin := placedOn(t, nc, "SC", 2)

	// Enough messages that a new replica takes a while to catch up.
	const msgs = 20000
	payload := []byte(strings.Repeat("x", 512))
	acks := make([]nats.PubAckFuture, msgs)
	for i := range acks {
		if acks[i], err = js.PublishAsync("sc.x", payload, nats.MsgId(fmt.Sprint(i+1)), nats.StallWait(clusterTimeout)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(clusterTimeout):
		t.Fatal("publishes not acknowledged")
	}
	for i, f := range acks {
		select {
		case <-f.Ok():
		case <-f.Err():
			eventually(t, "publish", func() error {
				_, err := js.Publish("sc.x", payload, nats.MsgId(fmt.Sprint(i+1)))
				return err
			})
		}
	}
	waitMoved(t, nc, "SC", origin, msgs)

	const reconfiguring = `{"type":"io.nats.jetstream.api.v1.stream_update_response","error":{"code":400,"err_code":10226,"description":"stream reconfiguration already in progress"}}`
	// A placement no server matches: taken once the scale is over, it is
	// refused (10005) and changes nothing.
	const move = `,"placement":{"tags":["hdd","ssd"]}`
	var cancelled apiAnswer
	var during apiAnswer
	for attempt := 1; ; attempt++ {
		wantAnswer(t, nc, "$JS.API.STREAM.UPDATE.SC", body(3, ""), 0, "")
		moved := rawAnswer(t, nc, "$JS.API.STREAM.UPDATE.SC", body(3, move))
		stacked := rawAnswer(t, nc, "$JS.API.STREAM.UPDATE.SC", body(4, ""))
		info := rawAnswer(t, nc, "$JS.API.STREAM.INFO.SC", "")
		cancel := rawAnswer(t, nc, "$JS.API.STREAM.CANCEL_MOVE.SC", "")
		if moved == reconfiguring && !strings.Contains(stacked, `"error"`) && !strings.Contains(cancel, `"error"`) {
			cancelled, during = decodeAnswer(t, cancel), decodeAnswer(t, info)
			t.Logf("a scale in flight at attempt %d", attempt)
			break
		}
		if attempt == 5 {
			t.Fatalf("no scale in flight seen in %d attempts: move %s, second scale %s, cancel %s", attempt, moved, stacked, cancel)
		}
		// The scale was over before the requests: back to the origin's
		// count, and again.
		if strings.Contains(cancel, `"error"`) {
			wantAnswer(t, nc, "$JS.API.STREAM.UPDATE.SC", body(2, ""), 0, "")
		}
		waitScaledTo(t, nc, "SC", 2, msgs)
	}
	if during.Cluster == nil || during.Cluster.Desired == nil || during.Cluster.Desired.Origin == nil || during.Cluster.Desired.Origin.Replicas != 2 {
		t.Errorf("stream info during the scale: %+v", during.Cluster)
	}
	if cancelled.Type != "io.nats.jetstream.api.v1.stream_cancel_move_response" || cancelled.Config == nil || cancelled.Config.Replicas != 2 {
		t.Errorf("the cancel's answer: %s %+v", cancelled.Type, cancelled.Config)
	}
	if cancelled.Cluster == nil || cancelled.Cluster.Desired == nil {
		t.Fatalf("the cancel's answer has no desired block: %+v", cancelled.Cluster)
	}
	d := cancelled.Cluster.Desired
	var names []string
	for _, r := range d.Replicas {
		names = append(names, r.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, origin) || d.Origin == nil || d.Origin.Replicas != 2 || d.Origin.Placement != nil {
		t.Errorf("the cancel's desired block: %+v (origin %+v)", d.Replicas, d.Origin)
	}

	// Back on its origin servers with every message on each, the other
	// servers' replicas gone; then nothing is in flight.
	waitMoved(t, nc, "SC", origin, msgs)
	for _, s := range servers {
		eventually(t, s.Name()+"'s replica of SC", func() error {
			si, err := accountStream(s, "APP", "SC")
			switch {
			case !slices.Contains(origin, s.Name()):
				if err == nil {
					return errors.New("still there")
				}
			case err != nil:
				return err
			case si.State.Msgs != msgs || si.State.FirstSeq != 1 || si.State.LastSeq != msgs:
				return fmt.Errorf("%d messages, %d to %d", si.State.Msgs, si.State.FirstSeq, si.State.LastSeq)
			}
			return nil
		})
	}
	if a := wantAnswer(t, nc, "$JS.API.STREAM.INFO.SC", "", 0, ""); a.Config == nil || a.Config.Replicas != 2 {
		t.Errorf("SC's config after the cancel: %+v", a.Config)
	}
	wantRaw(t, nc, "$JS.API.STREAM.CANCEL_MOVE.SC", `{"type":"io.nats.jetstream.api.v1.stream_cancel_move_response","error":{"code":400,"err_code":10129,"description":"stream reconfiguration not in progress"}}`)
	// A move is taken again: a placement no server matches is 10005.
	if a := decodeAnswer(t, rawAnswer(t, nc, "$JS.API.STREAM.UPDATE.SC", body(2, move))); a.Error == nil || a.Error.ErrCode != 10005 {
		t.Errorf("a move after the cancel: %+v", a.Error)
	}
}

// waitScaledTo waits until stream name runs n replicas, all current,
// with msgs messages, and nothing in flight (no desired block).
func waitScaledTo(t *testing.T, nc *nats.Conn, name string, n int, msgs uint64) {
	t.Helper()
	eventually(t, fmt.Sprintf("%s at %d replicas", name, n), func() error {
		a, err := jsAnswer(nc, "$JS.API.STREAM.INFO."+name, "")
		if err != nil {
			return err
		}
		if a.Error != nil || a.Cluster == nil || a.Cluster.Leader == "" || len(a.servers()) != n {
			return fmt.Errorf("servers %v (%+v)", a.servers(), a.Error)
		}
		if a.Cluster.Desired != nil {
			return errors.New("still scaling (a desired block)")
		}
		for _, r := range a.Cluster.Replicas {
			if !r.Current {
				return fmt.Errorf("%s not current", r.Name)
			}
		}
		if a.State == nil || a.State.Msgs != msgs {
			return fmt.Errorf("state %+v", a.State)
		}
		return nil
	})
}
