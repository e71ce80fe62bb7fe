package test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A stream of three replicas on four cairn processes, a follower
// peer-removed: the spare server's new replica is caught up by a stream
// snapshot whose messages it fetches from the leader, and the leader is
// killed (SIGKILL) as soon as that install begins. The fetch fails over
// to another replica as soon as the leader's connection ends, within a
// couple of seconds of the kill (a trial measured 10 s: the fetch waited
// for its request timeout; docs/cluster.md, "Stream snapshots"), and
// the new replica ends current with every message.
func TestJetStreamClusterCatchupSourceKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level test")
	}
	if targetIsNatsServer() {
		t.Skip("cairn's catch-up")
	}
	kc := newKillClusterArgs(t, buildCairn(t), 4, func(int) []string { return []string{"-js", "-sd", t.TempDir()} })
	var urls []string
	for _, p := range kc.procs {
		urls = append(urls, p.url)
	}
	nc, err := nats.Connect(strings.Join(urls, ","), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "create ORDERS", func() error {
		_, err := js.CreateStream(ctx2(t), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3})
		return err
	})
	// 96 MiB: the fetch takes a good part of a second, so the kill
	// lands in it.
	const msgs, batch = 384, 32
	payload := make([]byte, 256<<10)
	for i := range msgs / batch {
		eventually(t, fmt.Sprintf("publish batch %d", i), func() error {
			var futs []jetstream.PubAckFuture
			for k := range batch {
				f, err := js.PublishAsync(fmt.Sprintf("orders.%d", i*batch+k), payload, jetstream.WithMsgID(fmt.Sprint(i*batch+k)))
				if err != nil {
					return err
				}
				futs = append(futs, f)
			}
			for _, f := range futs {
				select {
				case <-f.Ok():
				case err := <-f.Err():
					return err
				case <-time.After(clusterTimeout):
					return fmt.Errorf("no PubAck")
				}
			}
			return nil
		})
	}
	placed := waitReplicas(t, js, 3)
	leader := int(placed[0][1] - '1')
	spare := -1
	for i := range kc.procs {
		if !slices.Contains(placed, fmt.Sprintf("n%d", i+1)) {
			spare = i
		}
	}
	if r := stepDownRequest(t, nc, "$JS.API.STREAM.PEER.REMOVE.ORDERS", fmt.Sprintf(`{"peer":%q}`, placed[2])); !r.Success {
		t.Fatalf("peer-remove %s: %+v", placed[2], r.Error)
	}
	log := kc.procs[spare].log
	waitFor(t, clusterTimeout, "the spare server's install", func() bool {
		return strings.Contains(log.String(), "installing the snapshot")
	})
	kc.procs[leader].kill()
	if strings.Contains(log.String(), "installed the snapshot") {
		t.Fatal("the install ended before the kill: the test needs more data")
	}
	waitFor(t, 5*time.Second, "the fetch to leave the killed leader", func() bool {
		return strings.Contains(log.String(), "could not serve")
	})
	if l := grepLines(log.String(), "could not serve"); !strings.Contains(l, "is gone") {
		t.Fatalf("the fetch left the leader for another reason:\n%s", l)
	}
	want := fmt.Sprintf("n%d", spare+1)
	eventually(t, "ORDERS current on "+want, func() error {
		s, err := js.Stream(ctx2(t), "ORDERS")
		if err != nil {
			return err
		}
		si := s.CachedInfo()
		ci := si.Cluster
		if ci == nil || ci.Leader == "" || si.State.Msgs != msgs {
			return fmt.Errorf("cluster %+v, %d messages", ci, si.State.Msgs)
		}
		names := []string{ci.Leader}
		for _, p := range ci.Replicas {
			if p.Name == want && (!p.Current || p.Pending) {
				return fmt.Errorf("replica %+v", p)
			}
			names = append(names, p.Name)
		}
		if !slices.Contains(names, want) {
			return fmt.Errorf("on %v", names)
		}
		return nil
	})
	waitFor(t, clusterTimeout, "the install", func() bool { return strings.Contains(log.String(), "installed the snapshot") })
}

// grepLines returns the lines of s holding any of words.
func grepLines(s string, words ...string) string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		for _, w := range words {
			if strings.Contains(l, w) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}
