package test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// A move in flight, as nats-server v2.15.2 answers around it
// (docs/cluster.md, "Moving a stream"): a second move, or a scale,
// gets 10124; $JS.API.STREAM.CANCEL_MOVE answers the stream's info with
// the origin's placement and a desired block naming the origin's
// servers, and the stream goes back to them with every message; with no
// move in flight the cancel is 10129, on a missing stream 10059. Its
// replicated durable goes and comes back with it, with its state.
func TestJetStreamClusterStreamMoveCancel(t *testing.T) {
	servers, _, _, nc := placementCluster(t, nil)
	js, err := nc.JetStream(nats.PublishAsyncMaxPending(256))
	if err != nil {
		t.Fatal(err)
	}
	body := func(tags string, replicas int) string {
		return fmt.Sprintf(`{"name":"PAIR","subjects":["pair.>"],"num_replicas":%d,"placement":{"tags":%s}}`, replicas, tags)
	}
	const origin = `["!hdd","!az:1"]`
	wantAnswer(t, nc, "$JS.API.STREAM.CREATE.PAIR", body(origin, 2), 0, "")
	if got := placedOn(t, nc, "PAIR", 2); !slices.Equal(got, []string{"n2", "n3"}) {
		t.Fatalf("PAIR on %v, want n2 n3", got)
	}
	wantRaw(t, nc, "$JS.API.STREAM.CANCEL_MOVE.PAIR", `{"type":"io.nats.jetstream.api.v1.stream_cancel_move_response","error":{"code":400,"err_code":10129,"description":"stream reconfiguration not in progress"}}`)
	wantRaw(t, nc, "$JS.API.STREAM.CANCEL_MOVE.NOPE", `{"type":"io.nats.jetstream.api.v1.stream_cancel_move_response","error":{"code":404,"err_code":10059,"description":"stream not found"}}`)

	// Enough messages that the move takes a while to catch its new
	// replicas up.
	const msgs = 2000
	payload := []byte(strings.Repeat("x", 512))
	acks := make([]nats.PubAckFuture, msgs)
	for i := range acks {
		if acks[i], err = js.PublishAsync("pair.x", payload, nats.MsgId(fmt.Sprint(i+1)), nats.StallWait(clusterTimeout)); err != nil {
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
			// Again, with the same ID: the stream keeps one.
			eventually(t, "publish", func() error {
				_, err := js.Publish("pair.x", payload, nats.MsgId(fmt.Sprint(i+1)))
				return err
			})
		}
	}
	waitMoved(t, nc, "PAIR", []string{"n2", "n3"}, msgs)
	// A replicated durable with 10 delivered, 7 acknowledged.
	sub, err := js.PullSubscribe("pair.x", "C", nats.AckExplicit(), nats.BindStream("PAIR"))
	if err != nil {
		t.Fatal(err)
	}
	var got []*nats.Msg
	for len(got) < 10 {
		ms, err := sub.Fetch(10-len(got), nats.MaxWait(2*time.Second))
		if err != nil && !errors.Is(err, nats.ErrTimeout) {
			t.Fatal(err)
		}
		got = append(got, ms...)
	}
	for _, m := range got[:7] {
		if err := m.AckSync(); err != nil {
			t.Fatal(err)
		}
	}
	waitDurable(t, nc, []string{"n2", "n3"})

	const moveInProgress = `{"type":"io.nats.jetstream.api.v1.stream_update_response","error":{"code":400,"err_code":10124,"description":"stream move already in progress"}}`
	var cancelled apiAnswer
	for attempt := 1; ; attempt++ {
		wantAnswer(t, nc, "$JS.API.STREAM.UPDATE.PAIR", body(`["az:1"]`, 2), 0, "")
		// Answered 10124 while the move is in flight; once it is over,
		// they are refused as nats-server refuses them then (10005: no
		// server matches), and change nothing.
		again := rawAnswer(t, nc, "$JS.API.STREAM.UPDATE.PAIR", body(`["hdd","ssd"]`, 2))
		scale := rawAnswer(t, nc, "$JS.API.STREAM.UPDATE.PAIR", body(`["az:1"]`, 3))
		cancel := rawAnswer(t, nc, "$JS.API.STREAM.CANCEL_MOVE.PAIR", "")
		if again == moveInProgress && scale == moveInProgress && !strings.Contains(cancel, `"error"`) {
			cancelled = decodeAnswer(t, cancel)
			t.Logf("a move in flight at attempt %d", attempt)
			break
		}
		if attempt == 3 {
			t.Fatalf("no move in flight seen in %d attempts: second move %s, scale %s, cancel %s", attempt, again, scale, cancel)
		}
		// The move was over before the requests: back to the origin, and again.
		if !strings.Contains(cancel, `"error"`) {
			waitMoved(t, nc, "PAIR", []string{"n2", "n3"}, msgs)
			continue
		}
		waitMoved(t, nc, "PAIR", []string{"n1", "n4"}, msgs)
		wantAnswer(t, nc, "$JS.API.STREAM.UPDATE.PAIR", body(origin, 2), 0, "")
		waitMoved(t, nc, "PAIR", []string{"n2", "n3"}, msgs)
	}
	if cancelled.Config == nil || cancelled.Config.Placement == nil || !slices.Equal(cancelled.Config.Placement.Tags, []string{"!hdd", "!az:1"}) {
		t.Errorf("the cancel's config: %+v", cancelled.Config)
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
	if !slices.Equal(names, []string{"n2", "n3"}) || d.Origin == nil || d.Origin.Replicas != 2 || d.Origin.Placement == nil ||
		!slices.Equal(d.Origin.Placement.Tags, []string{"!hdd", "!az:1"}) {
		t.Errorf("the cancel's desired block: %+v (origin %+v)", d.Replicas, d.Origin)
	}

	// Back on its origin servers, every message on each, the others'
	// replicas gone; then no move is in flight.
	waitMoved(t, nc, "PAIR", []string{"n2", "n3"}, msgs)
	for i, s := range servers {
		eventually(t, s.Name()+"'s replica of PAIR", func() error {
			si, err := accountStream(s, "APP", "PAIR")
			switch {
			case i == 0 || i == 3:
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
	// Its durable back with it, with its state.
	waitDurable(t, nc, []string{"n2", "n3"})
	a := wantAnswer(t, nc, "$JS.API.STREAM.INFO.PAIR", "", 0, "")
	if a.Config == nil || a.Config.Placement == nil || !slices.Equal(a.Config.Placement.Tags, []string{"!hdd", "!az:1"}) {
		t.Errorf("PAIR's placement after the cancel: %+v", a.Config)
	}
	wantRaw(t, nc, "$JS.API.STREAM.CANCEL_MOVE.PAIR", `{"type":"io.nats.jetstream.api.v1.stream_cancel_move_response","error":{"code":400,"err_code":10129,"description":"stream reconfiguration not in progress"}}`)
}

// waitDurable waits until PAIR's durable C runs on servers (sorted),
// every replica current, with 10 delivered and 7 acknowledged.
func waitDurable(t *testing.T, nc *nats.Conn, servers []string) {
	t.Helper()
	eventually(t, "C on "+strings.Join(servers, " "), func() error {
		m, err := nc.Request("$JS.API.CONSUMER.INFO.PAIR.C", nil, 2*time.Second)
		if err != nil {
			return err
		}
		var ci struct {
			Delivered struct {
				Stream uint64 `json:"stream_seq"`
			} `json:"delivered"`
			AckFloor struct {
				Stream uint64 `json:"stream_seq"`
			} `json:"ack_floor"`
			Pending int          `json:"num_ack_pending"`
			Cluster *clusterPart `json:"cluster"`
		}
		if err := json.Unmarshal(m.Data, &ci); err != nil || ci.Cluster == nil {
			return fmt.Errorf("%s: %v", m.Data, err)
		}
		on := []string{ci.Cluster.Leader}
		for _, r := range ci.Cluster.Replicas {
			if !r.Current {
				return fmt.Errorf("%s not current", r.Name)
			}
			on = append(on, r.Name)
		}
		slices.Sort(on)
		if !slices.Equal(on, servers) || ci.Delivered.Stream != 10 || ci.AckFloor.Stream != 7 || ci.Pending != 3 {
			return fmt.Errorf("on %v, delivered %d, ack floor %d, pending %d", on, ci.Delivered.Stream, ci.AckFloor.Stream, ci.Pending)
		}
		return nil
	})
}

// rawAnswer returns the bytes of the answer to a request.
func rawAnswer(t *testing.T, nc *nats.Conn, subj, body string) string {
	t.Helper()
	m, err := nc.Request(subj, []byte(body), 10*time.Second)
	if err != nil {
		t.Fatalf("%s: %v", subj, err)
	}
	return string(m.Data)
}

// wantRaw waits until the answer to a request is want, byte for byte.
func wantRaw(t *testing.T, nc *nats.Conn, subj, want string) {
	t.Helper()
	eventually(t, subj, func() error {
		m, err := nc.Request(subj, nil, 2*time.Second)
		if err != nil {
			return err
		}
		if string(m.Data) != want {
			return fmt.Errorf("%s, want %s", m.Data, want)
		}
		return nil
	})
}

// decodeAnswer decodes an answer's bytes.
func decodeAnswer(t *testing.T, b string) apiAnswer {
	t.Helper()
	var a apiAnswer
	if err := json.Unmarshal([]byte(b), &a); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return a
}
