package test

import (
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The JetStream API of the one server left of three (docs/cluster.md,
// "Who answers"; a new user's trial: `nats stream ls`, `nats stream
// info` and `nats consumer ls` against it timed out). Every read request
// sent to it from the moment the two others stop gets an answer within
// the client's timeout: what the meta leader still knows while it leads,
// 10008 once it stepped down (held, not dropped, while it waits the 2 s
// before it answers for a meta group without a leader), and for a stream
// of one replica on a stopped server 10118 from the meta leader or 10008
// after it, never that stream's config with an empty state, as
// nats-server v2.15.2 answers. Before, the requests sent in the 2 s after
// the meta leader stepped down, and every STREAM.INFO of the stream on a
// stopped server, went unanswered.
func TestJetStreamClusterNoMetaQuorumAnswers(t *testing.T) {
	serialTest(t)
	servers := jsCluster(t, 3)
	si := leaderIndex(servers, metaLeaderOf(t, servers))
	ncs, js := clusterClients(t, servers)
	if _, err := js[si].CreateStream(ctx2(t), jetstream.StreamConfig{Name: "KEEP", Subjects: []string{"keep"}, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	clusterPublish(t, js[si], "keep", 1)
	if _, err := js[si].CreateOrUpdateConsumer(ctx2(t), "KEEP", jetstream.ConsumerConfig{Durable: "D", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	off := ""
	for i := 0; off == "" && i < 12; i++ {
		name := fmt.Sprintf("ONE%d", i)
		s, err := js[si].CreateStream(ctx2(t), jetstream.StreamConfig{Name: name, Subjects: []string{name}, Replicas: 1})
		if err != nil {
			t.Fatal(err)
		}
		if ci := s.CachedInfo().Cluster; ci != nil && ci.Leader != "" && ci.Leader != servers[si].Name() {
			off = name
		}
	}
	if off == "" {
		t.Fatalf("no stream of one replica placed off %s", servers[si].Name())
	}
	for i, s := range servers {
		if i != si {
			s.Shutdown()
		}
	}

	subjects := []string{"$JS.API.STREAM.NAMES", "$JS.API.STREAM.LIST", "$JS.API.INFO", "$JS.API.STREAM.INFO." + off,
		"$JS.API.CONSUMER.NAMES.KEEP", "$JS.API.CONSUMER.INFO.KEEP.D"}
	const timeout = 4 * time.Second // below the nats CLI's 5 s
	var (
		mu       sync.Mutex
		silent   = map[string]int{}
		answered = map[string]map[string]int{}
		wrong    []string
		wg       sync.WaitGroup
	)
	ask := func(subj string) {
		defer wg.Done()
		m, err := ncs[si].Request(subj, nil, timeout)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			silent[subj]++
			return
		}
		what, bad := classify(subj, subj == "$JS.API.STREAM.INFO."+off, m)
		if answered[subj] == nil {
			answered[subj] = map[string]int{}
		}
		answered[subj][what]++
		if bad {
			wrong = append(wrong, fmt.Sprintf("%s: %s", subj, m.Data))
		}
	}
	for end := time.Now().Add(6 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		for _, subj := range subjects {
			wg.Add(1)
			go ask(subj)
		}
	}
	wg.Wait()
	for _, subj := range subjects {
		t.Logf("%s: answers %v, none within %v: %d", subj, answered[subj], timeout, silent[subj])
	}
	if len(silent) > 0 {
		t.Errorf("requests to the one server left went unanswered within %v: %v", timeout, silent)
	}
	if len(wrong) > 0 {
		sort.Strings(wrong)
		t.Errorf("%d answers from a stream's config alone, without an error; first: %s", len(wrong), wrong[0])
	}
	if n := answered["$JS.API.STREAM.NAMES"]["10008"]; n == 0 {
		t.Errorf("STREAM.NAMES never answered 10008 once the meta leader was alone: %v", answered["$JS.API.STREAM.NAMES"])
	}
}

// classify names an API answer by its error code ("ok" without one) and
// says whether it is wrong: an answer to the STREAM.INFO of a stream on a
// stopped server (offline) must be an error.
func classify(subj string, offline bool, m *nats.Msg) (string, bool) {
	var a struct {
		Error *struct {
			ErrCode int `json:"err_code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &a); err != nil {
		return "garbled", true
	}
	if a.Error == nil {
		return "ok", offline
	}
	code := a.Error.ErrCode
	return fmt.Sprint(code), code != 10008 && !(offline && code == 10118)
}
