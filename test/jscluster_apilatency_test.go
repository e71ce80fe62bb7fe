package test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairnmq/cairn/internal/server"
)

// The API's answers while a stream has no leader, and around a scale
// (docs/cluster.md, "Who answers").

// listGatherWait is how long the meta leader waits for the stream
// leaders' infos of a STREAM.LIST or an account info before it gives up
// on them (nats-server v2.15.2 jsClusteredStreamListRequest: 4 s).
const listGatherWait = 4 * time.Second

// pairTags are server_tags that name each server ("s1"...) and each pair
// of the three servers ("p12", "p13", "p23"): placement by tag puts a
// stream on the servers a test chooses.
func pairTags(i int, o *server.Options) {
	o.Tags = []string{fmt.Sprintf("s%d", i+1)}
	for j := 0; j < 3; j++ {
		if j != i {
			o.Tags = append(o.Tags, fmt.Sprintf("p%d%d", min(i, j)+1, max(i, j)+1))
		}
	}
}

// otherThan returns the indices of the three servers but the meta
// leader's, and the tag naming their pair.
func otherThan(t *testing.T, servers []*server.Server) (a, b int, tag string) {
	t.Helper()
	m := leaderIndex(servers, metaLeaderOf(t, servers))
	var rest []int
	for i := range servers {
		if i != m {
			rest = append(rest, i)
		}
	}
	return rest[0], rest[1], fmt.Sprintf("p%d%d", rest[0]+1, rest[1]+1)
}

// timedAPI sends a $JS.API request without a body, waiting at most
// twice the gather wait, decodes the answer into v and returns how long
// it took.
func timedAPI(nc *nats.Conn, subj string, v any) (time.Duration, error) {
	start := time.Now()
	m, err := nc.Request(subj, nil, 2*listGatherWait)
	took := time.Since(start)
	if err != nil {
		return took, fmt.Errorf("%s: %w", subj, err)
	}
	return took, json.Unmarshal(m.Data, v)
}

// A stream of two replicas on the two servers that do not lead the meta
// group loses its leader when one of them stops. The account info,
// answered by the meta leader, counts the stream's storage from its
// remaining replica at once instead of waiting for the leader it no
// longer has (nats-server v2.15.2 counts every server's usage); the
// stream list lists it with the remaining replica's state (answered by
// that replica, as nats-server's members of a leaderless group answer)
// and names in "missing" the stream of one replica whose server stopped;
// both within the 4 s the meta leader waits for a leader's answer.
func TestJetStreamClusterLeaderlessAccountInfo(t *testing.T) {
	serialTest(t) // within listGatherWait
	servers, _ := jsClusterMod(t, 3, pairTags)
	a, b, pair := otherThan(t, servers)
	nc := connect(t, servers[b].ClientURL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []jetstream.StreamConfig{
		{Name: "PAIR", Subjects: []string{"pair.>"}, Replicas: 2, Placement: &jetstream.Placement{Tags: []string{pair}}},
		{Name: "GONE", Subjects: []string{"gone.>"}, Replicas: 1, Placement: &jetstream.Placement{Tags: []string{fmt.Sprintf("s%d", a+1)}}},
	} {
		eventually(t, "create "+cfg.Name, func() error {
			_, err := js.CreateStream(ctx2(t), cfg)
			return err
		})
	}
	for i := uint64(1); i <= 3; i++ {
		clusterPublish(t, js, fmt.Sprintf("pair.%d", i), i)
	}
	servers[a].Shutdown()
	// The remaining replica answers STREAM.INFO itself once its group
	// has been leaderless for a while (leaderless.go): from then on the
	// stream has no leader that any request could wait for.
	var pairInfo jetstream.StreamInfo
	eventually(t, "PAIR answered by its leaderless replica", func() error {
		var si struct {
			jetstream.StreamInfo
			Error *jetstream.APIError `json:"error"`
		}
		if err := apiGet(nc, "$JS.API.STREAM.INFO.PAIR", &si); err != nil {
			return err
		}
		if si.Error != nil || si.Cluster == nil || si.Cluster.Leader != "" || si.State.Msgs != 3 {
			return fmt.Errorf("info %+v cluster %+v error %v", si.State, si.Cluster, si.Error)
		}
		pairInfo = si.StreamInfo
		return nil
	})

	var ai struct {
		Storage uint64              `json:"storage"`
		Streams int                 `json:"streams"`
		Error   *jetstream.APIError `json:"error"`
	}
	took, err := timedAPI(nc, "$JS.API.INFO", &ai)
	if err != nil || ai.Error != nil {
		t.Fatalf("account info: %v %v", err, ai.Error)
	}
	if took >= listGatherWait {
		t.Errorf("account info took %v, as long as the wait for a leader's answer (%v)", took, listGatherWait)
	}
	if want := 2 * pairInfo.State.Bytes; ai.Storage != want || ai.Streams != 2 {
		t.Errorf("account info: storage %d streams %d, want %d (PAIR's %d bytes on each of its 2 replicas) and 2", ai.Storage, ai.Streams, want, pairInfo.State.Bytes)
	}

	var list struct {
		Streams []jetstream.StreamInfo `json:"streams"`
		Missing []string               `json:"missing"`
		Error   *jetstream.APIError    `json:"error"`
	}
	took, err = timedAPI(nc, "$JS.API.STREAM.LIST", &list)
	if err != nil || list.Error != nil {
		t.Fatalf("stream list: %v %v", err, list.Error)
	}
	if took >= listGatherWait {
		t.Errorf("stream list took %v, as long as the wait for a leader's answer (%v)", took, listGatherWait)
	}
	got := map[string]jetstream.StreamInfo{}
	for _, si := range list.Streams {
		got[si.Config.Name] = si
	}
	if si, ok := got["PAIR"]; !ok || si.State.Msgs != 3 || si.State.Bytes != pairInfo.State.Bytes {
		t.Errorf("stream list: PAIR %+v (listed %v), want its replica's 3 messages", si.State, ok)
	}
	if _, ok := got["GONE"]; !ok || !slices.Equal(list.Missing, []string{"GONE"}) {
		t.Errorf("stream list: GONE listed %v, missing %v, want it listed and missing alone", ok, list.Missing)
	}
	var names struct {
		Streams []string            `json:"streams"`
		Error   *jetstream.APIError `json:"error"`
	}
	took, err = timedAPI(nc, "$JS.API.STREAM.NAMES", &names)
	if err != nil || names.Error != nil || !slices.Equal(names.Streams, []string{"GONE", "PAIR"}) || took >= listGatherWait {
		t.Errorf("stream names: %v %v %v in %v", names.Streams, err, names.Error, took)
	}
}

// A stream of one replica on a server that does not lead the meta group,
// scaled to three replicas: its stream stops on that server and starts
// again as the first replica of its new group, and until that replica
// leads nobody answers about the stream. The update's answer comes once
// it does, so the STREAM.INFO a client sends right after it (the nats
// CLI's stream edit does) is answered, by the group's leader; scaled
// back to one replica and again to three, likewise (the last update
// retried while the scale-down is not settled, with a STREAM.INFO
// before each try, which must be answered too); five replicas on three
// servers are refused (10005). Each stream's durable consumer keeps its
// acknowledged message through the scales.
func TestJetStreamClusterScaleUpInfoAnswered(t *testing.T) {
	serialTest(t) // answers within 5 s
	servers, _ := jsClusterMod(t, 3, pairTags)
	a, b, _ := otherThan(t, servers)
	nc := connect(t, servers[0].ClientURL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var cfgs []jetstream.StreamConfig
	for _, i := range []int{a, b} {
		cfg := jetstream.StreamConfig{Name: fmt.Sprintf("ONE%d", i+1), Subjects: []string{fmt.Sprintf("one%d.>", i+1)}, Replicas: 1,
			Placement: &jetstream.Placement{Tags: []string{fmt.Sprintf("s%d", i+1)}}}
		eventually(t, "create "+cfg.Name, func() error {
			_, err := js.CreateStream(ctx2(t), cfg)
			return err
		})
		for seq := uint64(1); seq <= 3; seq++ {
			clusterPublish(t, js, fmt.Sprintf("one%d.%d", i+1, seq), seq)
		}
		// A durable consumer that took and acknowledged the first
		// message: it scales with the stream and keeps its state.
		cons, err := js.CreateOrUpdateConsumer(ctx2(t), cfg.Name, jetstream.ConsumerConfig{Durable: "WORK", AckPolicy: jetstream.AckExplicitPolicy})
		if err != nil {
			t.Fatal(err)
		}
		msgs, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range msgs.Messages() {
			if err := m.DoubleAck(ctx2(t)); err != nil {
				t.Fatal(err)
			}
		}
		cfg.Placement = nil // scaled where the cluster places it
		cfgs = append(cfgs, cfg)
	}
	for round, replicas := range []int{3, 1, 3} {
		for _, cfg := range cfgs {
			cfg.Replicas = replicas
			updateThenInfo(t, nc, cfg, fmt.Sprintf("round %d", round+1))
		}
	}
	for _, cfg := range cfgs {
		eventually(t, cfg.Name+"'s consumer after the scales", func() error {
			ci, err := js.Consumer(ctx2(t), cfg.Name, "WORK")
			if err != nil {
				return err
			}
			info := ci.CachedInfo()
			if info.AckFloor.Stream != 1 || info.Delivered.Stream != 1 || info.NumPending != 2 || info.Config.Replicas != 0 && info.Config.Replicas != 3 {
				return fmt.Errorf("ack floor %+v, delivered %+v, pending %d, replicas %d", info.AckFloor, info.Delivered, info.NumPending, info.Config.Replicas)
			}
			return nil
		})
	}
	cfg := cfgs[0]
	cfg.Replicas = 5
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var apiErr *jetstream.APIError
	if _, err := js.UpdateStream(ctx, cfg); !errors.As(err, &apiErr) || apiErr.ErrorCode != 10005 {
		t.Fatalf("scale to 5 replicas on 3 servers: %v, want 10005", err)
	}
	updateThenInfo(t, nc, cfgs[0], "after the refused scale")
}

// updateThenInfo updates stream cfg.Name to cfg through nc and sends
// STREAM.INFO the moment the update is answered, as the nats CLI's
// stream edit does, each within a client's default 5 s: the info must
// be answered by a leader that runs with the new replica count (the
// update's answer waits for it), with every message. An update
// refused with 10008 (a scale-down to one replica not settled yet) is
// sent again, a STREAM.INFO before each try: every one must be answered
// (by the stream's leader, or by its server as it turns into a stream of
// one replica).
func updateThenInfo(t *testing.T, nc *nats.Conn, cfg jetstream.StreamConfig, when string) {
	t.Helper()
	body, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(clusterTimeout)
	for {
		// While a scale-down to one replica ends, its server answers
		// once that is done, or with 10008 if it takes over a second or
		// two (a loaded machine): an answer either way.
		infoAnswered(t, nc, cfg.Name, fmt.Sprintf("%s, before %s's scale to %d", when, cfg.Name, cfg.Replicas), 10008)
		var up struct {
			Error *jetstream.APIError `json:"error"`
		}
		m, err := nc.Request("$JS.API.STREAM.UPDATE."+cfg.Name, body, 5*time.Second)
		if err != nil {
			t.Fatalf("%s: update %s to %d replicas: %v", when, cfg.Name, cfg.Replicas, err)
		}
		if err := json.Unmarshal(m.Data, &up); err != nil {
			t.Fatal(err)
		}
		if up.Error == nil {
			break
		}
		if up.Error.ErrorCode != 10008 || time.Now().After(deadline) {
			t.Fatalf("%s: update %s to %d replicas: %v", when, cfg.Name, cfg.Replicas, up.Error)
		}
	}
	si := infoAnswered(t, nc, cfg.Name, fmt.Sprintf("%s, right after %s's scale to %d", when, cfg.Name, cfg.Replicas), 0)
	if si.Config.Replicas != cfg.Replicas || si.State.Msgs != 3 || si.Cluster == nil || si.Cluster.Leader == "" {
		t.Fatalf("%s: STREAM.INFO of %s right after its scale to %d: replicas %d, state %+v, cluster %+v", when, cfg.Name, cfg.Replicas, si.Config.Replicas, si.State, si.Cluster)
	}
}

// infoAnswered sends STREAM.INFO of stream name and fails the test
// unless it is answered within 5 s, without an error or with the error
// code allowed (0: none).
func infoAnswered(t *testing.T, nc *nats.Conn, name, when string, allowed int) jetstream.StreamInfo {
	t.Helper()
	var si struct {
		jetstream.StreamInfo
		Error *jetstream.APIError `json:"error"`
	}
	m, err := nc.Request("$JS.API.STREAM.INFO."+name, nil, 5*time.Second)
	if err != nil {
		t.Fatalf("%s: STREAM.INFO sent %s: %v", when, time.Now().Add(-5*time.Second).Format("15:04:05.000"), err)
	}
	if err := json.Unmarshal(m.Data, &si); err != nil {
		t.Fatalf("%s: STREAM.INFO: %v", when, err)
	}
	if si.Error != nil && (allowed == 0 || si.Error.ErrorCode != jetstream.ErrorCode(allowed)) {
		t.Fatalf("%s: STREAM.INFO: %v", when, si.Error)
	}
	return si.StreamInfo
}
