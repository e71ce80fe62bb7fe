package test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cairnmq/cairn/internal/server"
)

// A move during a scale, as nats-server v2.15.2 answers it
// (docs/cluster.md, "A scale in flight"): 10226 "stream
// reconfiguration already in progress", byte for byte, while a second
// scale stacks on the first and stream info shows the desired block with
// the origin's replica count; once the scale is over (the stacked one
// too), a move is taken again (a placement no server matches: 10005).
func TestJetStreamClusterStreamScaleRefusesMove(t *testing.T) {
	_, nc, _ := scaleCluster(t)
	var during apiAnswer
	for attempt := 1; ; attempt++ {
		wantAnswer(t, nc, "$JS.API.STREAM.UPDATE.SC", scBody(3, ""), 0, "")
		// Each answer may be late on a loaded machine under the race
		// detector (a CI run saw the move's time out after 10 s): a
		// missing one makes the attempt not count.
		moved, err1 := tryAnswer(nc, "$JS.API.STREAM.UPDATE.SC", scBody(3, unmatched))
		stacked, err2 := tryAnswer(nc, "$JS.API.STREAM.UPDATE.SC", scBody(4, ""))
		info, err3 := tryAnswer(nc, "$JS.API.STREAM.INFO.SC", "")
		if err := errors.Join(err1, err2, err3); err != nil {
			t.Logf("attempt %d: %v", attempt, err)
		}
		if moved == reconfiguring && stacked != "" && !strings.Contains(stacked, `"error"`) && info != "" {
			during = decodeAnswer(t, info)
			t.Logf("a scale in flight at attempt %d", attempt)
			break
		}
		if attempt == 5 {
			t.Fatalf("no scale in flight seen in %d attempts: move %s, second scale %s", attempt, moved, stacked)
		}
		// The scale was over before the move: back to two, and again.
		wantAnswer(t, nc, "$JS.API.STREAM.UPDATE.SC", scBody(2, ""), 0, "")
		waitScaledTo(t, nc, "SC", 2, scMsgs)
	}
	if during.Cluster == nil || during.Cluster.Desired == nil || during.Cluster.Desired.Origin == nil || during.Cluster.Desired.Origin.Replicas != 2 {
		t.Errorf("stream info during the scale: %+v", during.Cluster)
	}
	waitScaledTo(t, nc, "SC", 4, scMsgs)
	if a := decodeAnswer(t, rawAnswer(t, nc, "$JS.API.STREAM.UPDATE.SC", scBody(4, unmatched))); a.Error == nil || a.Error.ErrCode != 10005 {
		t.Errorf("a move after the scale: %+v", a.Error)
	}
}

// $JS.API.STREAM.CANCEL_MOVE during a scale, as nats-server v2.15.2
// answers it (docs/cluster.md, "A scale in flight"): a
// stream_cancel_move_response with the stream's info, the origin's
// num_replicas in its config and a desired block naming the origin's
// servers; the stream goes back to them with every message on each, the
// other servers' replicas gone. With no scale in flight the cancel is
// 10129, byte for byte.
func TestJetStreamClusterStreamScaleCancel(t *testing.T) {
	servers, nc, origin := scaleCluster(t)
	var cancelled apiAnswer
	for attempt := 1; ; attempt++ {
		wantAnswer(t, nc, "$JS.API.STREAM.UPDATE.SC", scBody(3, ""), 0, "")
		cancel := rawAnswer(t, nc, "$JS.API.STREAM.CANCEL_MOVE.SC", "")
		if !strings.Contains(cancel, `"error"`) {
			cancelled = decodeAnswer(t, cancel)
			t.Logf("a scale in flight at attempt %d", attempt)
			break
		}
		if attempt == 5 {
			t.Fatalf("no scale in flight seen in %d attempts: cancel %s", attempt, cancel)
		}
		// The scale was over before the cancel: back to two, and again.
		wantAnswer(t, nc, "$JS.API.STREAM.UPDATE.SC", scBody(2, ""), 0, "")
		waitScaledTo(t, nc, "SC", 2, scMsgs)
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
	waitMoved(t, nc, "SC", origin, scMsgs)
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
			case si.State.Msgs != scMsgs || si.State.FirstSeq != 1 || si.State.LastSeq != scMsgs:
				return fmt.Errorf("%d messages, %d to %d", si.State.Msgs, si.State.FirstSeq, si.State.LastSeq)
			}
			return nil
		})
	}
	if a := wantAnswer(t, nc, "$JS.API.STREAM.INFO.SC", "", 0, ""); a.Config == nil || a.Config.Replicas != 2 {
		t.Errorf("SC's config after the cancel: %+v", a.Config)
	}
	wantRaw(t, nc, "$JS.API.STREAM.CANCEL_MOVE.SC", `{"type":"io.nats.jetstream.api.v1.stream_cancel_move_response","error":{"code":400,"err_code":10129,"description":"stream reconfiguration not in progress"}}`)
}

const (
	// scMsgs is how many messages SC holds: enough that a new replica
	// takes a while to catch up.
	scMsgs = 20000
	// reconfiguring is nats-server v2.15.2's answer to a move during a
	// scale.
	reconfiguring = `{"type":"io.nats.jetstream.api.v1.stream_update_response","error":{"code":400,"err_code":10226,"description":"stream reconfiguration already in progress"}}`
	// unmatched is a placement no server matches: a move to it, taken,
	// is refused (10005) and changes nothing.
	unmatched = `,"placement":{"tags":["hdd","ssd"]}`
)

// scBody is the config of stream SC with replicas and the extra keys.
func scBody(replicas int, extra string) string {
	return fmt.Sprintf(`{"name":"SC","subjects":["sc.>"],"num_replicas":%d%s}`, replicas, extra)
}

// scaleCluster starts the four servers of the placement tests with
// stream SC of two replicas holding scMsgs messages, and returns the
// servers, a connection of the APP account and SC's servers (sorted).
func scaleCluster(t *testing.T) ([]*server.Server, *nats.Conn, []string) {
	t.Helper()
	servers, _, _, nc := placementCluster(t, nil)
	// A publish whose answer is lost (a leader change) fails after 5 s
	// and is sent again below, deduplicated by its ID.
	js, err := nc.JetStream(nats.PublishAsyncMaxPending(256), nats.PublishAsyncTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	wantAnswer(t, nc, "$JS.API.STREAM.CREATE.SC", scBody(2, ""), 0, "")
	origin := placedOn(t, nc, "SC", 2)
	payload := []byte(strings.Repeat("x", 512))
	acks := make([]nats.PubAckFuture, scMsgs)
	for i := range acks {
		if acks[i], err = js.PublishAsync("sc.x", payload, nats.MsgId(fmt.Sprint(i+1)), nats.StallWait(clusterTimeout)); err != nil {
			t.Fatal(err)
		}
	}
	waitAsyncComplete(t, js)
	for i, f := range acks {
		select {
		case <-f.Ok():
		case <-f.Err():
			// Again, with the same ID: the stream keeps one.
			eventually(t, "publish", func() error {
				_, err := js.Publish("sc.x", payload, nats.MsgId(fmt.Sprint(i+1)))
				return err
			})
		}
	}
	waitMoved(t, nc, "SC", origin, scMsgs)
	return servers, nc, origin
}

// tryAnswer sends a request and returns its answer's payload, or the
// error (a timeout after 10 s).
func tryAnswer(nc *nats.Conn, subj, body string) (string, error) {
	m, err := nc.Request(subj, []byte(body), 10*time.Second)
	if err != nil {
		return "", fmt.Errorf("%s: %w", subj, err)
	}
	return string(m.Data), nil
}

// waitAsyncComplete waits until js has no asynchronous publish pending,
// for as long as their number keeps falling (a loaded machine under the
// race detector acknowledges 20,000 publishes in well over the
// clusterTimeout a stall would take).
func waitAsyncComplete(t *testing.T, js nats.JetStreamContext) {
	t.Helper()
	last := js.PublishAsyncPending() + 1
	for {
		select {
		case <-js.PublishAsyncComplete():
			return
		case <-time.After(clusterTimeout):
		}
		n := js.PublishAsyncPending()
		if n >= last {
			t.Fatalf("publishes not acknowledged: %d pending, none answered in %v", n, clusterTimeout)
		}
		last = n
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
