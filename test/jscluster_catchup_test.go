package test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairnmq/cairn/internal/server"
)

// sentMsg is a message the test published and was acknowledged.
type sentMsg struct {
	subject string
	hdr     nats.Header
	data    []byte
}

// publishAcked publishes message n through js until it is acknowledged
// (retrying: an election may be under way) and records it in sent by
// its sequence.
func publishAcked(t *testing.T, js jetstream.JetStream, sent map[uint64]sentMsg, n int) {
	t.Helper()
	m := orderMsg(n)
	eventually(t, fmt.Sprintf("publish %d", n), func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		ack, err := js.PublishMsg(ctx, m)
		if err != nil {
			return err
		}
		sent[ack.Sequence] = sentMsg{subject: m.Subject, hdr: m.Header, data: m.Data}
		return nil
	})
}

// publishRange publishes messages from to to through js (publishAcked).
func publishRange(t *testing.T, js jetstream.JetStream, sent map[uint64]sentMsg, from, to int) {
	t.Helper()
	for n := from; n <= to; n++ {
		publishAcked(t, js, sent, n)
	}
}

// deleteAcked deletes the messages at seqs from ORDERS through js and
// forgets them in sent; it returns the stream as js read it first.
func deleteAcked(t *testing.T, js jetstream.JetStream, sent map[uint64]sentMsg, seqs ...uint64) jetstream.Stream {
	t.Helper()
	s, err := js.Stream(tctx(t), "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range seqs {
		// 10008 (no leader known yet, right after a create or a
		// scale): nothing was deleted, and a client tries again.
		eventually(t, fmt.Sprintf("delete message %d", seq), func() error {
			err := s.DeleteMsg(tctx(t), seq)
			if apiErr := (*jetstream.APIError)(nil); errors.As(err, &apiErr) && apiErr.ErrorCode == 10008 {
				return err
			} else if err != nil {
				t.Fatal(err)
			}
			return nil
		})
		delete(sent, seq)
	}
	return s
}

// setReplicas updates the stream of cfg to r replicas through js,
// retrying until the update is accepted.
func setReplicas(t *testing.T, js jetstream.JetStream, cfg jetstream.StreamConfig, r int) {
	t.Helper()
	cfg.Replicas = r
	eventually(t, fmt.Sprintf("scale %s to %d", cfg.Name, r), func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := js.UpdateStream(ctx, cfg)
		return err
	})
}

// jsAt is a JetStream client of srv.
func jsAt(t *testing.T, srv *server.Server) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(connect(t, srv.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// servesWithoutOther stops servers[other] and publishes messages from to
// to through the leader's server, then stops the leader, starts other
// again and checks through servers[replica] that every acknowledged
// message is served: replica and the leader carried the writes alone, and
// replica, with other, serves them. It returns the client of replica.
func servesWithoutOther(t *testing.T, servers []*server.Server, opts []server.Options, sent map[uint64]sentMsg, leader, replica, other, from, to int) jetstream.JetStream {
	t.Helper()
	jsL := jsAt(t, servers[leader])
	servers[other].Shutdown()
	publishRange(t, jsL, sent, from, to)
	servers[leader].Shutdown()
	servers[other] = restartServer(t, opts[other])
	js := jsAt(t, servers[replica])
	checkAll(t, js, sent)
	return js
}

// orderMsg is message n of publishAcked: its subject, headers (a
// Nats-Msg-Id of its own) and data derive from n.
func orderMsg(n int) *nats.Msg {
	m := &nats.Msg{Subject: fmt.Sprintf("orders.%d", n%7), Header: nats.Header{}, Data: bytes.Repeat([]byte{byte(n)}, 10+n%300)}
	m.Header.Set("Nats-Msg-Id", fmt.Sprintf("id-%d", n))
	if n%3 == 0 {
		m.Header.Set("X-Order", fmt.Sprint(n))
	}
	return m
}

// checkAll requires the stream, read through js, to hold exactly the
// messages of sent, byte for byte, at their sequences.
func checkAll(t *testing.T, js jetstream.JetStream, sent map[uint64]sentMsg) {
	t.Helper()
	var s jetstream.Stream
	eventually(t, "stream info", func() error {
		var err error
		s, err = js.Stream(ctx2(t), "ORDERS") // unanswered while the stream has no leader: ask again
		if err == nil && s.CachedInfo().State.Msgs != uint64(len(sent)) {
			err = fmt.Errorf("%d messages, want %d", s.CachedInfo().State.Msgs, len(sent))
		}
		return err
	})
	for seq, want := range sent {
		var got *jetstream.RawStreamMsg
		eventually(t, fmt.Sprintf("get %d", seq), func() error {
			var err error
			got, err = s.GetMsg(tctx(t), seq)
			return err
		})
		if got.Subject != want.subject || !bytes.Equal(got.Data, want.data) || got.Header.Get("Nats-Msg-Id") != want.hdr.Get("Nats-Msg-Id") ||
			got.Header.Get("X-Order") != want.hdr.Get("X-Order") {
			t.Fatalf("message %d: %s %q differs from what was published (%s)", seq, got.Subject, got.Header, want.subject)
		}
	}
}

// A follower whose store directory is wiped comes back under a new store
// identity: its old replica is not allowed back (raftnode fences it),
// the meta leader replaces it by a new replica on the same server, which
// the stream's leader adds as a learner, catches up by a stream snapshot
// (every message byte-identical, deleted ones left out) and promotes in
// place of the old one. It then carries acknowledged writes: with the
// other follower down, the leader and it acknowledge more; with the
// leader killed and the other follower back, no acknowledged message is
// lost.
func TestJetStreamClusterWipedFollowerCatchesUp(t *testing.T) {
	servers, opts := jsClusterMod(t, 3, func(_ int, o *server.Options) { o.RaftRetain = 8 })
	js0 := jsAt(t, servers[0])
	eventually(t, "create ORDERS", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := js0.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3})
		return err
	})
	sent := map[uint64]sentMsg{}
	publishRange(t, js0, sent, 1, 150)
	s := deleteAcked(t, js0, sent, 7, 8, 50, 149)
	leader := leaderIndex(servers, s.CachedInfo().Cluster.Leader)
	wiped, other := (leader+1)%3, (leader+2)%3
	if leader < 0 {
		t.Fatalf("leader %q", s.CachedInfo().Cluster.Leader)
	}
	servers[wiped].Shutdown()
	if err := os.RemoveAll(opts[wiped].StoreDir); err != nil {
		t.Fatal(err)
	}
	jsL := jsAt(t, servers[leader])
	publishRange(t, jsL, sent, 151, 200)
	servers[wiped] = restartServer(t, opts[wiped])
	eventually(t, "the wiped server's new replica current", func() error {
		s, err := jsL.Stream(tctx(t), "ORDERS")
		if err != nil {
			return err
		}
		ci := s.CachedInfo().Cluster
		for _, p := range ci.Replicas {
			if p.Name == servers[wiped].Name() && p.Current && !p.Offline {
				return nil
			}
		}
		return fmt.Errorf("cluster %+v", ci)
	})
	// With the other follower down, a publish needs the new replica's
	// vote: it succeeds once the replica is promoted.
	jsW := servesWithoutOther(t, servers, opts, sent, leader, wiped, other, 201, 230)
	publishRange(t, jsW, sent, 231, 240)
	checkAll(t, jsW, sent)
	// The deleted messages stay deleted.
	s, err := jsW.Stream(tctx(t), "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetMsg(tctx(t), 50); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatalf("deleted message 50: %v", err)
	}
}

// nats stream cluster peer-remove of a follower in a cluster of four:
// the replica moves to the fourth server (a new replica there, added as a
// learner and caught up by a stream snapshot, promoted while the removed
// one goes), stream info shows it pending while it catches up and then
// current, and it then carries acknowledged writes: with the other
// follower down the leader and it acknowledge more, and with the leader
// killed and that follower back, every acknowledged message is served.
func TestJetStreamClusterPeerRemoveMovesReplica(t *testing.T) {
	servers, opts := jsClusterMod(t, 4, func(_ int, o *server.Options) { o.RaftRetain = 8 })
	js0 := jsAt(t, servers[0])
	eventually(t, "create ORDERS", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := js0.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3})
		return err
	})
	sent := map[uint64]sentMsg{}
	publishRange(t, js0, sent, 1, 100)
	s, err := js0.Stream(tctx(t), "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	ci := s.CachedInfo().Cluster
	leader := leaderIndex(servers, ci.Leader)
	placed := map[string]bool{ci.Leader: true}
	for _, p := range ci.Replicas {
		placed[p.Name] = true
	}
	removed, spare := -1, -1
	for i, srv := range servers {
		switch {
		case !placed[srv.Name()]:
			spare = i
		case i != leader && removed < 0:
			removed = i
		}
	}
	if leader < 0 || removed < 0 || spare < 0 {
		t.Fatalf("cluster %+v", ci)
	}
	peerRemoveMoves(t, servers, js0, sent, leader, removed, spare)
	other := 6 - leader - removed - spare // the follower that stays
	servesWithoutOther(t, servers, opts, sent, leader, spare, other, 121, 140)
}

// peerRemoveMoves removes the replica of ORDERS on servers[removed]
// (nats stream cluster peer-remove through the leader's server),
// publishes messages 101 to 120 through js and waits until the replica
// moved to servers[spare], current, beside two others.
func peerRemoveMoves(t *testing.T, servers []*server.Server, js jetstream.JetStream, sent map[uint64]sentMsg, leader, removed, spare int) {
	t.Helper()
	out, errOut := runCLI(t, servers[leader].ClientURL(), "stream", "cluster", "peer-remove", "ORDERS", servers[removed].Name(), "-f")
	if strings.Contains(out+errOut, "10075") || strings.Contains(out+errOut, "peer remap failed") {
		t.Fatalf("nats stream cluster peer-remove:\n%s\n%s", out, errOut)
	}
	publishRange(t, js, sent, 101, 120)
	eventually(t, "the replica moved and current", func() error {
		ci := streamCluster(t, js)
		if ci == nil {
			return fmt.Errorf("no info")
		}
		names := map[string]bool{ci.Leader: true}
		current := false
		for _, p := range ci.Replicas {
			names[p.Name] = true
			current = current || p.Name == servers[spare].Name() && p.Current && !p.Pending
		}
		if names[servers[removed].Name()] || !current || len(ci.Replicas) != 2 {
			return fmt.Errorf("cluster %+v", ci)
		}
		return nil
	})
}

// streamCluster returns the stream's cluster info through js.
func streamCluster(t *testing.T, js jetstream.JetStream) *jetstream.ClusterInfo {
	t.Helper()
	s, err := js.Stream(tctx(t), "ORDERS")
	if err != nil {
		return nil
	}
	return s.CachedInfo().Cluster
}

// waitReplicas waits until the stream has a leader and exactly n-1 other
// replicas, every one current (none pending), and returns their names,
// the leader first.
func waitReplicas(t *testing.T, js jetstream.JetStream, n int) []string {
	t.Helper()
	var names []string
	eventually(t, fmt.Sprintf("%d current replicas", n), func() error {
		ci := streamCluster(t, js)
		if ci == nil || ci.Leader == "" || len(ci.Replicas) != n-1 {
			return fmt.Errorf("cluster %+v", ci)
		}
		names = []string{ci.Leader}
		for _, p := range ci.Replicas {
			if !p.Current || p.Pending || p.Offline {
				return fmt.Errorf("replica %+v", p)
			}
			names = append(names, p.Name)
		}
		return nil
	})
	return names
}

// num_replicas 3 -> 5 -> 3 by stream update (nats stream edit), with data
// present: the two new servers' replicas are added as learners, caught up
// by stream snapshots and promoted; scaled down, the two replicas that
// leave are removed (the leader kept) and stop. Between the steps every
// acknowledged message stays, and after the scale-up the original
// servers can be stopped: the new replicas hold everything. Last, down to
// one replica: every message kept.
func TestJetStreamClusterScaleByUpdate(t *testing.T) {
	servers, opts := jsClusterMod(t, 5, func(_ int, o *server.Options) { o.RaftRetain = 8 })
	nc, js := clusterClients(t, servers)
	cfg := jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3}
	eventually(t, "create ORDERS", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := js[0].CreateStream(ctx, cfg)
		return err
	})
	sent := map[uint64]sentMsg{}
	publishRange(t, js[0], sent, 1, 100)
	three := waitReplicas(t, js[0], 3)
	setReplicas(t, js[0], cfg, 5)
	publishRange(t, js[0], sent, 101, 120)
	five := waitReplicas(t, js[0], 5)
	// The original servers but the leader stop: the leader and the two
	// new replicas are a majority of five holding everything.
	idx := func(name string) int { return leaderIndex(servers, name) }
	var stopped []int
	for _, n := range three[1:] {
		stopped = append(stopped, idx(n))
		servers[idx(n)].Shutdown()
	}
	live := idx(five[0])
	for i := range servers {
		if !slices.Contains(stopped, i) && i != idx(three[0]) {
			live = i
		}
	}
	publishRange(t, js[live], sent, 121, 130)
	checkAll(t, js[live], sent)
	for _, i := range stopped {
		servers[i] = restartServer(t, opts[i])
	}
	setReplicas(t, js[live], cfg, 3)
	after := waitReplicas(t, js[live], 3)
	publishRange(t, js[live], sent, 131, 140)
	checkAll(t, js[live], sent)
	t.Logf("replicas: %v, then %v, then %v", three, five, after)
	// The leader's replica removed (peer-remove): it hands its leadership
	// over before it leaves, and a spare server takes its place.
	if r := stepDownRequest(t, nc[live], "$JS.API.STREAM.PEER.REMOVE.ORDERS", fmt.Sprintf(`{"peer":%q}`, after[0])); !r.Success {
		t.Fatalf("peer-remove of the leader: %+v", r.Error)
	}
	eventually(t, "the leader's replica moved", func() error {
		ci := streamCluster(t, js[live])
		if ci == nil || ci.Leader == "" || ci.Leader == after[0] || len(ci.Replicas) != 2 {
			return fmt.Errorf("cluster %+v", ci)
		}
		for _, p := range ci.Replicas {
			if p.Name == after[0] || !p.Current {
				return fmt.Errorf("cluster %+v", ci)
			}
		}
		return nil
	})
	publishRange(t, js[live], sent, 141, 150)
	checkAll(t, js[live], sent)
	// Down to one replica: the leader's, every message kept.
	setReplicas(t, js[live], cfg, 1)
	eventually(t, "one replica", func() error {
		if ci := streamCluster(t, js[live]); ci == nil || ci.Leader == "" || len(ci.Replicas) != 0 {
			return fmt.Errorf("cluster %+v", ci)
		}
		return nil
	})
	checkAll(t, js[live], sent)
}

// A stream of one replica with data scales to three (nats stream edit
// --replicas 3): its server's store becomes the first replica of a new
// group, the two new replicas are caught up by stream snapshots and
// promoted; killed, the original server leaves every acknowledged message
// served by the other two, deleted ones still deleted and the duplicate
// window kept. Back to one replica (the original server still down), every
// message is kept.
func TestJetStreamClusterScaleUpFromOne(t *testing.T) {
	servers, _ := jsClusterMod(t, 3, func(_ int, o *server.Options) { o.RaftRetain = 8 })
	_, js := clusterClients(t, servers)
	cfg := jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 1, Duplicates: time.Hour}
	eventually(t, "create ORDERS", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := js[0].CreateStream(ctx, cfg)
		return err
	})
	sent, _, other := scaleUpFromOne(t, servers, js, cfg)
	// The duplicate window came along: a retried publish of message 50
	// is a duplicate.
	m := &nats.Msg{Subject: "orders.1", Header: nats.Header{"Nats-Msg-Id": []string{"id-50"}}, Data: []byte("again")}
	var ack *jetstream.PubAck
	eventually(t, "republish 50", func() error {
		var err error
		ack, err = js[other].PublishMsg(tctx(t), m)
		return err
	})
	if !ack.Duplicate {
		t.Fatalf("message 50 published again: %+v", ack)
	}
	// Back to one replica with the original server still down: its
	// replica is removed first, and every message stays.
	setReplicas(t, js[other], cfg, 1)
	eventually(t, "one replica", func() error {
		if ci := streamCluster(t, js[other]); ci == nil || ci.Leader == "" || len(ci.Replicas) != 0 {
			return fmt.Errorf("cluster %+v", ci)
		}
		return nil
	})
	checkAll(t, js[other], sent)
}

// scaleUpFromOne publishes messages 1 to 100 to the one-replica stream
// ORDERS (cfg) through js[0] and deletes 3, 40 and 41; scales it to three
// replicas through another server, other, and publishes 101 to 110;
// stops the server that held it, home, publishes 111 to 120 and checks
// that every acknowledged message is served. It returns what is stored.
func scaleUpFromOne(t *testing.T, servers []*server.Server, js []jetstream.JetStream, cfg jetstream.StreamConfig) (sent map[uint64]sentMsg, home, other int) {
	t.Helper()
	sent = map[uint64]sentMsg{}
	publishRange(t, js[0], sent, 1, 100)
	s := deleteAcked(t, js[0], sent, 3, 40, 41)
	home = leaderIndex(servers, s.CachedInfo().Cluster.Leader)
	other = (home + 1) % 3
	setReplicas(t, js[other], cfg, 3)
	waitReplicas(t, js[other], 3)
	publishRange(t, js[other], sent, 101, 110)
	servers[home].Shutdown()
	publishRange(t, js[other], sent, 111, 120)
	checkAll(t, js[other], sent)
	return sent, home, other
}

// A stream that never stored a message takes new replicas too: scaled
// from one replica to three, its new replicas install the snapshot of an
// empty store (first and last sequence 0) and become current, and it
// takes publishes on all three. The manifest check used to refuse that
// snapshot and fenced the new replicas, leaving the stream leaderless
// (new-user trial).
func TestJetStreamClusterScaleUpEmptyStream(t *testing.T) {
	servers, _ := jsClusterMod(t, 3, nil)
	_, js := clusterClients(t, servers)
	cfg := jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 1}
	eventually(t, "create ORDERS", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := js[0].CreateStream(ctx, cfg)
		return err
	})
	setReplicas(t, js[1], cfg, 3)
	waitReplicas(t, js[1], 3)
	for i := 1; i <= 5; i++ {
		var ack *jetstream.PubAck
		eventually(t, "publish", func() error {
			var err error
			ack, err = js[2].Publish(tctx(t), "orders.x", []byte("x"))
			return err
		})
		if ack.Sequence != uint64(i) {
			t.Fatalf("publish %d: %+v", i, ack)
		}
	}
	waitReplicas(t, js[0], 3)
}

// A publish right after a replicated stream's create, through any
// server, finds the stream: the create is answered once the new leader's
// subscriptions have reached every server (its routes flushed), as
// nats-server's stream leader answers the create itself. A request with
// no retry sees "no responders" otherwise (new-user trial: 2 of 8
// immediate publishes failed once creates became quick).
func TestJetStreamClusterPublishRightAfterCreate(t *testing.T) {
	servers, _ := jsClusterMod(t, 3, nil)
	ncs, js := clusterClients(t, servers)
	// Every server catalogued with JetStream (a create placed before
	// is 10005 "jetstream not enabled in cluster", as in nats-server).
	waitMeta(t, servers, []string{"n1", "n2", "n3"})
	eventually(t, "a meta leader", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := js[0].AccountInfo(ctx)
		return err
	})
	for i := range 12 {
		name := fmt.Sprintf("S%d", i)
		eventually(t, "create "+name, func() error { // the same create again: idempotent
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err := js[i%3].CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name}, Replicas: 3})
			return err
		})
		for j, nc := range ncs {
			if _, err := nc.Request(name, []byte("x"), 5*time.Second); err != nil {
				t.Fatalf("publish to %s through server %d right after its create through server %d: %v", name, j, i%3, err)
			}
		}
	}
}

// A stream of two replicas placed without the meta leader is answered
// once its leader, elsewhere, has subscribed everywhere: a publish right
// after the create, through the server holding no replica, finds it
// (the meta leader answered at once, before the group had elected
// anyone, and publishes got "no responders" for about an election
// timeout), and the answer names the leader and the other replica (it
// named neither: the meta leader, outside the group, cannot see them).
// The same for a stream of one replica on another server than the meta
// leader (a core publish right after its create was lost now and then:
// the answer came before its server subscribed).
func TestJetStreamClusterPublishRightAfterCreateAway(t *testing.T) {
	servers, _ := jsClusterMod(t, 3, nil)
	ncs, js := clusterClients(t, servers)
	eventually(t, "a meta leader", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := js[0].AccountInfo(ctx)
		return err
	})
	for _, replicas := range []int{2, 1} {
		publishRightAfterCreateAway(t, servers, ncs, js, replicas)
	}
}

func publishRightAfterCreateAway(t *testing.T, servers []*server.Server, ncs []*nats.Conn, js []jetstream.JetStream, replicas int) {
	away := 0
	for i := 0; away < 3; i++ {
		if i == 30 {
			t.Fatalf("30 streams of %d replicas, %d placed without the meta leader", replicas, away)
		}
		name := fmt.Sprintf("A%d_%d", replicas, i)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		st, err := js[i%3].CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name}, Replicas: replicas})
		cancel()
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		// The answer names the leader and the other replica, as
		// nats-server's stream leader's answer does.
		if ci := st.CachedInfo().Cluster; ci == nil || ci.Leader == "" || len(ci.Replicas) != replicas-1 {
			t.Fatalf("create %s answered with cluster %+v, want its leader and other replicas", name, ci)
		}
		for j, nc := range ncs {
			if _, err := nc.Request(name, []byte("x"), 5*time.Second); err != nil {
				t.Fatalf("publish to %s through server %d right after its create: %v", name, j, err)
			}
		}
		ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
		info, err := st.Info(ctx)
		cancel()
		if err != nil || info.Cluster == nil {
			t.Fatalf("info of %s: %v", name, err)
		}
		holds := map[string]bool{info.Cluster.Leader: true}
		for _, p := range info.Cluster.Replicas {
			holds[p.Name] = true
		}
		for _, s := range servers {
			if m := s.JetStreamMeta(); m != nil && m.Leader == s.Name() && !holds[s.Name()] {
				away++
			}
		}
	}
}
