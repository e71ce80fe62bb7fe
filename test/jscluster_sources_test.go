package test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairnmq/cairn/internal/server"
)

// In a cluster of three, an R3 aggregate sourcing two R1 origins placed
// on two different servers, and an R3 mirror of one of them, copy every
// message exactly once wherever their leaders run (docs/cluster.md,
// "Sourcing in a cluster"): an origin with no replica on the leader's
// server is read through its consumer API, as nats-server v2.15.2 reads
// every origin. Messages are published before and after step-downs that
// move the aggregate and the mirror to the server holding neither
// origin, then to the servers holding one of them (the local path for
// that origin), then while the second origin's server is down and after
// it came back, and the same for the first origin's server while it led
// the aggregate. The messages carry no Nats-Msg-Id, so a copy made twice
// is stored twice.
func TestJetStreamClusterSourcesAcrossServers(t *testing.T) {
	servers, opts := jsClusterMod(t, 3, func(i int, o *server.Options) {
		o.Tags = []string{fmt.Sprintf("s:%d", i+1)}
	})
	nc := connect(t, servers[2].ClientURL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []jetstream.StreamConfig{
		{Name: "SA", Subjects: []string{"a.>"}, Replicas: 1, Placement: &jetstream.Placement{Tags: []string{"s:1"}}},
		{Name: "SB", Subjects: []string{"b.>"}, Replicas: 1, Placement: &jetstream.Placement{Tags: []string{"s:2"}}},
		{Name: "AGG", Replicas: 3, Sources: []*jetstream.StreamSource{{Name: "SA"}, {Name: "SB"}}},
		{Name: "MIR", Replicas: 3, Mirror: &jetstream.StreamSource{Name: "SA"}},
	} {
		eventually(t, "create "+c.Name, func() error {
			_, err := js.CreateStream(ctx2(t), c)
			return err
		})
	}
	var sentA, sentB []string
	publish := func(round int) {
		t.Helper()
		for i := range 20 {
			for _, o := range []struct {
				subj string
				sent *[]string
			}{{"a.x", &sentA}, {"b.x", &sentB}} {
				body := fmt.Sprintf("%s-%d-%d", o.subj, round, i)
				eventually(t, "publish "+body, func() error {
					_, err := js.Publish(ctx2(t), o.subj, []byte(body))
					return err
				})
				*o.sent = append(*o.sent, body)
			}
		}
	}
	moveTo := func(name string, target int) {
		t.Helper()
		eventually(t, fmt.Sprintf("%s led by %s", name, servers[target].Name()), func() error {
			if streamLeader(t, servers, js, name) == target {
				return nil
			}
			r, err := tryStepDown(nc, "$JS.API.STREAM.LEADER.STEPDOWN."+name, fmt.Sprintf(`{"placement":{"preferred":%q}}`, servers[target].Name()))
			if err != nil {
				return err
			}
			if r.Error != nil {
				return fmt.Errorf("step-down: %+v", r.Error)
			}
			return fmt.Errorf("stepped down")
		})
	}
	check := func(what string) {
		t.Helper()
		copiedOnce(t, js, "AGG", slices.Concat(sentA, sentB), what)
		copiedOnce(t, js, "MIR", sentA, what)
	}

	publish(1)
	check("before any step-down")
	moveTo("AGG", 2) // n3 holds neither origin
	moveTo("MIR", 2)
	publish(2)
	check("led by n3")
	moveTo("AGG", 0) // n1 holds SA, not SB
	moveTo("MIR", 1) // n2 holds SB, not SA
	publish(3)
	check("AGG led by n1, MIR by n2")
	moveTo("AGG", 2)
	moveTo("MIR", 2)
	publish(4)
	check("led by n3 again")

	// SB's server goes down: SB's consumer goes with it; once it is back
	// a new one resumes where AGG's copies end.
	servers[1].Shutdown()
	for i := range 10 {
		body := fmt.Sprintf("a.x-5-%d", i)
		eventually(t, "publish "+body, func() error {
			_, err := js.Publish(ctx2(t), "a.x", []byte(body))
			return err
		})
		sentA = append(sentA, body)
	}
	copiedOnce(t, js, "MIR", sentA, "SB's server down")
	servers[1] = restartServer(t, opts[1])
	publish(6)
	check("SB's server back")

	// SA's server, leading AGG, goes down (the trial's kill): AGG's
	// leadership moves to a server without SA, MIR's SA consumer goes.
	moveTo("AGG", 0)
	servers[0].Shutdown()
	for i := range 10 {
		body := fmt.Sprintf("b.x-7-%d", i)
		eventually(t, "publish "+body, func() error {
			_, err := js.Publish(ctx2(t), "b.x", []byte(body))
			return err
		})
		sentB = append(sentB, body)
	}
	copiedOnce(t, js, "AGG", slices.Concat(sentA, sentB), "SA's server down")
	servers[0] = restartServer(t, opts[0])
	publish(8)
	check("SA's server back")

	// The leaders before deleted their consumers: an origin keeps one per
	// sourcer whose leader does not hold the origin (SA on n1, SB on n2).
	want := map[string]int{"SA": 0, "SB": 0}
	if streamLeader(t, servers, js, "MIR") != 0 {
		want["SA"]++
	}
	aggLeader := streamLeader(t, servers, js, "AGG")
	if aggLeader != 0 {
		want["SA"]++
	}
	if aggLeader != 1 {
		want["SB"]++
	}
	for name, want := range want {
		eventuallyWithin(t, 2*clusterTimeout, name+"'s consumers", func() error {
			s, err := js.Stream(ctx2(t), name)
			if err != nil {
				return err
			}
			if n := s.CachedInfo().State.Consumers; n != want {
				return fmt.Errorf("%d consumers, want %d", n, want)
			}
			return nil
		})
	}
}

// copiedOnce waits until stream name holds as many messages as want and
// checks it holds each body of want exactly once.
func copiedOnce(t *testing.T, js jetstream.JetStream, name string, want []string, what string) {
	t.Helper()
	var s jetstream.Stream
	eventually(t, fmt.Sprintf("%s: %s holds %d messages", what, name, len(want)), func() error {
		var err error
		if s, err = js.Stream(ctx2(t), name); err != nil {
			return err
		}
		info := s.CachedInfo()
		if n := info.State.Msgs; n < uint64(len(want)) {
			return fmt.Errorf("%d messages (mirror %+v, sources %+v)", n, info.Mirror, sourceErrors(info.Sources))
		}
		return nil
	})
	got := map[string]int{}
	st := s.CachedInfo().State
	for seq := st.FirstSeq; seq <= st.LastSeq; seq++ {
		m, err := s.GetMsg(ctx2(t), seq)
		if err != nil {
			t.Fatalf("%s: %s message %d: %v", what, name, seq, err)
		}
		got[string(m.Data)]++
	}
	for _, b := range want {
		if got[b] != 1 {
			t.Errorf("%s: %s holds %q %d times", what, name, b, got[b])
		}
	}
	if len(got) != len(want) || st.Msgs != uint64(len(want)) {
		t.Fatalf("%s: %s holds %d messages, %d distinct; want %d", what, name, st.Msgs, len(got), len(want))
	}
}

// sourceErrors lists the sources' names, lags and errors.
func sourceErrors(srcs []*jetstream.StreamSourceInfo) []string {
	var out []string
	for _, s := range srcs {
		out = append(out, fmt.Sprintf("%s lag %d err %v", s.Name, s.Lag, s.Error))
	}
	return out
}
