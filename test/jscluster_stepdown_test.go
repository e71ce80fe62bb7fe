package test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairnmq/cairn/internal/monitor"
	"github.com/cairnmq/cairn/internal/server"
)

// startMonitor makes s answer the system account's $SYS requests, as
// cmd/cairn does (the CLI's server commands send them).
func startMonitor(t *testing.T, s *server.Server) {
	t.Helper()
	m, err := monitor.New(monitor.Options{Server: s})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.ServeSystemRequests(); err != nil {
		t.Fatal(err)
	}
}

// apiReply is a step-down response as nats-server v2.15.2 sends it.
type apiReply struct {
	Type    string `json:"type"`
	Success bool   `json:"success"`
	Error   *struct {
		Code        int    `json:"code"`
		ErrCode     int    `json:"err_code"`
		Description string `json:"description"`
	} `json:"error"`
}

// stepDownRequest sends body to subj through nc and decodes the answer.
func stepDownRequest(t *testing.T, nc *nats.Conn, subj, body string) apiReply {
	t.Helper()
	r, err := tryStepDown(nc, subj, body)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// tryStepDown is stepDownRequest for a request sent again until it is
// answered as wanted (in eventually): a request that reaches no leader
// (the group's leadership moving, an earlier step-down's) goes
// unanswered, in nats-server too, and is an error to retry, as is an
// answer that does not decode.
func tryStepDown(nc *nats.Conn, subj, body string) (apiReply, error) {
	msg, err := nc.Request(subj, []byte(body), 5*time.Second)
	if err != nil {
		return apiReply{}, fmt.Errorf("%s %s: %w", subj, body, err)
	}
	var r apiReply
	if err := json.Unmarshal(msg.Data, &r); err != nil {
		return apiReply{}, fmt.Errorf("%s: %q: %w", subj, msg.Data, err)
	}
	return r, nil
}

// wantStepDownError checks r is the error code with description desc ("": any).
func wantStepDownError(t *testing.T, what string, r apiReply, code int, desc string) {
	t.Helper()
	if r.Error == nil || r.Error.ErrCode != code || (desc != "" && r.Error.Description != desc) || r.Success {
		t.Fatalf("%s: %+v (error %+v), want %d %q", what, r, r.Error, code, desc)
	}
}

// $JS.API.STREAM.LEADER.STEPDOWN in a cluster, sent through a server
// that does not lead the stream: the leader hands over (to the server a
// preferred placement names, when it does), a new leader is elected and
// publishes continue; the errors are nats-server's (its texts measured on
// nats-server 2.15.2: docs/cluster.md, "Step-down"); a stream with one
// replica answers success; nats stream cluster step-down works.
func TestJetStreamClusterStreamStepDown(t *testing.T) {
	servers := jsCluster(t, 3)
	ncs := make([]*nats.Conn, 3)
	js := make([]jetstream.JetStream, 3)
	for i, s := range servers {
		ncs[i] = connect(t, s.ClientURL())
		var err error
		if js[i], err = jetstream.New(ncs[i]); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "create ORDERS", func() error {
		_, err := js[0].CreateStream(ctx2(t), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3})
		return err
	})
	eventually(t, "create ONE", func() error {
		_, err := js[0].CreateStream(ctx2(t), jetstream.StreamConfig{Name: "ONE", Subjects: []string{"one.>"}})
		return err
	})
	seq := uint64(0)
	pub := func(i int) {
		t.Helper()
		seq++
		clusterPublish(t, js[i], fmt.Sprintf("orders.%d", seq), seq)
	}
	pub(0)
	leader := streamLeader(t, servers, js[0], "ORDERS")
	via := (leader + 1) % 3
	const subj = "$JS.API.STREAM.LEADER.STEPDOWN.ORDERS"

	r := stepDownRequest(t, ncs[via], subj, "")
	if r.Type != "io.nats.jetstream.api.v1.stream_leader_stepdown_response" || !r.Success || r.Error != nil {
		t.Fatalf("step-down: %+v", r)
	}
	eventually(t, "a new leader", func() error {
		if l := streamLeader(t, servers, js[via], "ORDERS"); l == leader {
			return fmt.Errorf("still %s", servers[l].Name())
		}
		return nil
	})
	pub(via)
	leader = streamLeader(t, servers, js[via], "ORDERS")

	// Preferred: the server named takes over.
	target := (leader + 2) % 3
	r = stepDownRequest(t, ncs[via], subj, fmt.Sprintf(`{"placement":{"preferred":%q}}`, servers[target].Name()))
	if !r.Success {
		t.Fatalf("step-down to %s: %+v", servers[target].Name(), r.Error)
	}
	eventually(t, "leader "+servers[target].Name(), func() error {
		if l := streamLeader(t, servers, js[via], "ORDERS"); l != target {
			return fmt.Errorf("leader %s", servers[l].Name())
		}
		return nil
	})
	pub(target)
	leader = target

	// Errors.
	r = stepDownRequest(t, ncs[via], subj, `{"placement":{"preferred":"n9"}}`)
	wantStepDownError(t, "unknown preferred", r, 10005, `preferred server "n9" not known`)
	r = stepDownRequest(t, ncs[via], subj, fmt.Sprintf(`{"placement":{"preferred":%q}}`, servers[leader].Name()))
	wantStepDownError(t, "preferred leader", r, 10005, fmt.Sprintf(`preferred server %q is already leader`, servers[leader].Name()))
	r = stepDownRequest(t, ncs[via], subj, `{"placement":{"tags":["az:9"]}}`)
	wantStepDownError(t, "tags nobody has", r, 10005, "no replacement peer connected")
	r = stepDownRequest(t, ncs[via], subj, `{"placement":{"cluster":"ELSEWHERE"}}`)
	wantStepDownError(t, "another cluster", r, 10005, "no replacement peer connected")
	r = stepDownRequest(t, ncs[via], subj, `{bad`)
	wantStepDownError(t, "bad JSON", r, 10025, "")
	r = stepDownRequest(t, ncs[via], "$JS.API.STREAM.LEADER.STEPDOWN.NOPE", "")
	wantStepDownError(t, "no such stream", r, 10059, "stream not found")
	if r = stepDownRequest(t, ncs[via], "$JS.API.STREAM.LEADER.STEPDOWN.ONE", ""); !r.Success {
		t.Fatalf("one replica: %+v", r.Error)
	}
	if l := streamLeader(t, servers, js[via], "ORDERS"); l != leader {
		t.Fatalf("a refused step-down moved the leader to %s", servers[l].Name())
	}

	// PEER.REMOVE, answered by the meta leader: nats-server's checks,
	// then, for a replica of a three-server cluster, 10075: no server to
	// move it to (nats-server 2.15.2 answers the same).
	const peerRemove = "$JS.API.STREAM.PEER.REMOVE.ORDERS"
	wantStepDownError(t, "peer-remove without a body", stepDownRequest(t, ncs[via], peerRemove, ""), 10003, "bad request")
	wantStepDownError(t, "peer-remove of no peer", stepDownRequest(t, ncs[via], peerRemove, `{"peer":""}`), 10003, "bad request")
	wantStepDownError(t, "peer-remove of a stranger", stepDownRequest(t, ncs[via], peerRemove, `{"peer":"n9"}`), 10040, "peer not a member")
	wantStepDownError(t, "peer-remove of a replica, no server to take it", stepDownRequest(t, ncs[via], peerRemove, fmt.Sprintf(`{"peer":%q}`, servers[via].Name())), 10075, "peer remap failed")
	wantStepDownError(t, "peer-remove in no stream", stepDownRequest(t, ncs[via], "$JS.API.STREAM.PEER.REMOVE.NOPE", `{"peer":"n1"}`), 10059, "stream not found")

	// The CLI: it polls the stream's info until the leader changes.
	out, errOut := runCLI(t, servers[via].ClientURL(), "stream", "cluster", "step-down", "ORDERS")
	if !strings.Contains(out+errOut, "New leader elected") {
		t.Fatalf("nats stream cluster step-down:\n%s\n%s", out, errOut)
	}
	pub(via)
}

// $JS.API.META.LEADER.STEPDOWN from a user of the system account: the
// meta leader hands over, the new one answers the meta group's requests
// (a create), and /jsz's meta_cluster names it, which
// `nats server cluster step-down` reads; a user of another account gets
// no answer. SERVER.REMOVE's refusals are nats-server's (its removal of a
// member: TestJetStreamClusterServerRemove).
func TestJetStreamClusterMetaStepDown(t *testing.T) {
	servers, _ := jsClusterMod(t, 3, func(_ int, o *server.Options) { sysAppAuth(o) })
	app := connect(t, servers[0].ClientURL(), nats.UserInfo("app", "app"))
	js, err := jetstream.New(app)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "create ORDERS", func() error {
		_, err := js.CreateStream(ctx2(t), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3})
		return err
	})
	clusterPublish(t, js, "orders.1", 1)
	metaLeader := func() string {
		t.Helper()
		var name string
		eventually(t, "the meta leader", func() error {
			for _, s := range servers {
				if mi := s.JetStreamMeta(); mi != nil && mi.Leader != "" {
					name = mi.Leader
					return nil
				}
			}
			return fmt.Errorf("no meta leader")
		})
		return name
	}
	old := metaLeader()
	via := (leaderIndex(servers, old) + 1) % 3
	sys := connect(t, servers[via].ClientURL(), nats.UserInfo("sys", "sys"))
	r := stepDownRequest(t, sys, "$JS.API.META.LEADER.STEPDOWN", "")
	if r.Type != "io.nats.jetstream.api.v1.meta_leader_stepdown_response" || !r.Success {
		t.Fatalf("meta step-down: %+v", r)
	}
	eventually(t, "a new meta leader", func() error {
		if l := metaLeader(); l == old {
			return fmt.Errorf("still %s", l)
		}
		return nil
	})
	eventually(t, "create through the new meta leader", func() error {
		_, err := js.CreateStream(ctx2(t), jetstream.StreamConfig{Name: "MORE", Subjects: []string{"more.>"}, Replicas: 3})
		return err
	})
	clusterPublish(t, js, "orders.2", 2)

	r = stepDownRequest(t, sys, "$JS.API.META.LEADER.STEPDOWN", `{"placement":{"preferred":"n9"}}`)
	wantStepDownError(t, "unknown preferred", r, 10005, `preferred server "n9" not known`)
	r = stepDownRequest(t, sys, "$JS.API.SERVER.REMOVE", `{"peer":"n9"}`)
	wantStepDownError(t, "remove an unknown server", r, 10044, "server is not a member of the cluster")
	r = stepDownRequest(t, sys, "$JS.API.SERVER.REMOVE", "")
	wantStepDownError(t, "remove nothing", r, 10003, "bad request")
	// SERVER.EVACUATE (`nats server cluster evacuate`) checks as REMOVE
	// does (evacuating a member: TestJetStreamClusterServerEvacuate).
	r = stepDownRequest(t, sys, "$JS.API.SERVER.EVACUATE", `{"peer":"n9"}`)
	wantStepDownError(t, "evacuate an unknown server", r, 10044, "server is not a member of the cluster")
	r = stepDownRequest(t, sys, "$JS.API.SERVER.EVACUATE", "")
	wantStepDownError(t, "evacuate nothing", r, 10003, "bad request")
	if _, err := app.Request("$JS.API.META.LEADER.STEPDOWN", nil, 500*time.Millisecond); err == nil {
		t.Fatal("a user of another account was answered")
	}

	// The CLI finds the meta leader in $SYS.REQ.SERVER.PING.JSZ.
	for _, s := range servers {
		startMonitor(t, s)
	}
	old = metaLeader()
	out, errOut, err := tryCLI(t, servers[via].ClientURL(), append(sysUser, "server", "cluster", "step-down")...)
	if err != nil || !strings.Contains(out+errOut, "New leader elected") {
		t.Fatalf("nats server cluster step-down: %v\n%s\n%s", err, out, errOut)
	}
	eventually(t, "a new meta leader", func() error {
		if l := metaLeader(); l == old {
			return fmt.Errorf("still %s", l)
		}
		return nil
	})
	clusterPublish(t, js, "orders.3", 3)
}
