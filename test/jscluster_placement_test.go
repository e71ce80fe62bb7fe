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

	cjs "github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/server"
)

// placementTags are the server_tags of the four servers of the placement
// tests: three "ssd" servers in zones 1 to 3, and a fourth, "hdd", in
// zone 1 again (written in mixed case: servers keep them lowercased).
var placementTags = [][]string{{"AZ:1", "ssd"}, {"az:2", "SSD"}, {"az:3", "ssd", " Region:East "}, {"az:1", "hdd"}}

// placementCluster starts four servers with placementTags (and the
// accounts of sysAppAuth, monitored), and returns them, their options,
// their monitoring URLs, and a client of APP on the first.
func placementCluster(t *testing.T, mod func(i int, o *server.Options)) ([]*server.Server, []server.Options, []string, *nats.Conn) {
	t.Helper()
	servers, opts := jsClusterMod(t, 4, func(i int, o *server.Options) {
		sysAppAuth(o)
		o.Tags = placementTags[i]
		if mod != nil {
			mod(i, o)
		}
	})
	mons := make([]string, len(servers))
	for i, s := range servers {
		mons[i] = monitored(t, s)
	}
	return servers, opts, mons, connect(t, servers[0].ClientURL(), nats.UserInfo("app", "app"))
}

// apiAnswer is the part of a JetStream API answer the placement tests
// read.
type apiAnswer struct {
	Type  string `json:"type"`
	Error *struct {
		Code        int    `json:"code"`
		ErrCode     int    `json:"err_code"`
		Description string `json:"description"`
	} `json:"error"`
	Config *struct {
		Replicas  int `json:"num_replicas"`
		Placement *struct {
			Tags []string `json:"tags"`
		} `json:"placement"`
	} `json:"config"`
	Cluster *struct {
		Leader   string `json:"leader"`
		Replicas []struct {
			Name    string `json:"name"`
			Current bool   `json:"current"`
		} `json:"replicas"`
		Desired *struct {
			Replicas []struct {
				Name string `json:"name"`
				Peer string `json:"peer"`
			} `json:"replicas"`
			Origin *struct {
				Replicas  int `json:"replicas"`
				Placement *struct {
					Tags []string `json:"tags"`
				} `json:"placement"`
			} `json:"origin"`
		} `json:"desired"`
	} `json:"cluster"`
	State *struct {
		Msgs uint64 `json:"messages"`
	} `json:"state"`
}

// servers returns the leader and replicas of a stream info, sorted.
func (a apiAnswer) servers() []string {
	if a.Cluster == nil {
		return nil
	}
	var out []string
	if a.Cluster.Leader != "" {
		out = append(out, a.Cluster.Leader)
	}
	for _, r := range a.Cluster.Replicas {
		out = append(out, r.Name)
	}
	slices.Sort(out)
	return out
}

// placedOn waits until stream name's info names a leader and n servers
// in all, and returns them sorted.
func placedOn(t *testing.T, nc *nats.Conn, name string, n int) []string {
	t.Helper()
	var got []string
	eventually(t, "the servers of "+name, func() error {
		a, err := jsAnswer(nc, "$JS.API.STREAM.INFO."+name, "")
		if err != nil {
			return err
		}
		if got = a.servers(); a.Cluster == nil || a.Cluster.Leader == "" || len(got) != n {
			return fmt.Errorf("servers %v", got)
		}
		return nil
	})
	return got
}

// jsAnswer sends body to subj and decodes the answer; no answer is an
// error.
func jsAnswer(nc *nats.Conn, subj, body string) (apiAnswer, error) {
	var a apiAnswer
	msg, err := nc.Request(subj, []byte(body), 2*time.Second)
	if err != nil {
		return a, err
	}
	if err := json.Unmarshal(msg.Data, &a); err != nil {
		return a, fmt.Errorf("%q: %v", msg.Data, err)
	}
	return a, nil
}

// wantAnswer sends body to subj until the answer is the error errCode
// with description desc (errCode 0: until it is no error), and returns
// it: while the cluster starts, an answer may be 10008, none, or a
// placement that does not know every server yet.
func wantAnswer(t *testing.T, nc *nats.Conn, subj, body string, errCode int, desc string) apiAnswer {
	t.Helper()
	var a apiAnswer
	eventually(t, subj+" "+body, func() error {
		var err error
		if a, err = jsAnswer(nc, subj, body); err != nil {
			return err
		}
		switch {
		case errCode == 0 && a.Error != nil:
			return fmt.Errorf("error %+v", *a.Error)
		case errCode != 0 && a.Error == nil:
			return fmt.Errorf("no error, want %d %q", errCode, desc)
		case errCode != 0 && (a.Error.ErrCode != errCode || a.Error.Description != desc):
			return fmt.Errorf("error %+v, want %d %q", *a.Error, errCode, desc)
		}
		return nil
	})
	return a
}

// Streams are placed on the servers whose server_tags hold every tag of
// their placement, compared without regard to case, and never on one
// with a tag written "!tag"; when too few servers match, the create gets
// nats-server v2.15.2's 10005 naming the tags, as given (the texts were
// taken from three nats-server processes with the same tags). /varz and
// the system account's server information show each server's tags,
// lowercased, and a $SYS request filtered by tags is answered by the
// servers holding them. A stream step-down naming tags hands the
// leadership to the replica on the server having them.
func TestJetStreamClusterPlacementTags(t *testing.T) {
	servers, _, mons, nc := placementCluster(t, nil)
	create := func(name string, replicas int, placement string) string {
		return fmt.Sprintf(`{"name":%q,"subjects":[%q],"num_replicas":%d,"placement":%s}`, name, strings.ToLower(name), replicas, placement)
	}
	wantAnswer(t, nc, "$JS.API.STREAM.CREATE.FAST", create("FAST", 3, `{"tags":["SSD"]}`), 0, "")
	if got := placedOn(t, nc, "FAST", 3); !slices.Equal(got, []string{"n1", "n2", "n3"}) {
		t.Errorf("FAST (ssd) on %v, want n1 n2 n3", got)
	}
	wantAnswer(t, nc, "$JS.API.STREAM.CREATE.SLOW", create("SLOW", 1, `{"tags":["hdd"]}`), 0, "")
	if got := placedOn(t, nc, "SLOW", 1); !slices.Equal(got, []string{"n4"}) {
		t.Errorf("SLOW (hdd) on %v, want n4", got)
	}
	wantAnswer(t, nc, "$JS.API.STREAM.CREATE.EAST", create("EAST", 1, `{"tags":["region:EAST","az:3"]}`), 0, "")
	if got := placedOn(t, nc, "EAST", 1); !slices.Equal(got, []string{"n3"}) {
		t.Errorf("EAST on %v, want n3", got)
	}
	wantAnswer(t, nc, "$JS.API.STREAM.CREATE.ZONE1", create("ZONE1", 2, `{"tags":["az:1"]}`), 0, "")
	if got := placedOn(t, nc, "ZONE1", 2); !slices.Equal(got, []string{"n1", "n4"}) {
		t.Errorf("ZONE1 (az:1) on %v, want n1 n4", got)
	}
	wantAnswer(t, nc, "$JS.API.STREAM.CREATE.NOTN1", create("NOTN1", 2, `{"tags":["!hdd","!az:1"]}`), 0, "")
	if got := placedOn(t, nc, "NOTN1", 2); !slices.Equal(got, []string{"n2", "n3"}) {
		t.Errorf("NOTN1 (!hdd, !az:1) on %v, want n2 n3", got)
	}
	for _, c := range []struct{ name, placement, desc string }{
		{"GPU", `{"tags":["GPU"]}`, "no suitable peers for placement, tags not matched ['GPU']"},
		{"HDD3", `{"tags":["HDD"]}`, "no suitable peers for placement, tags not matched ['HDD']"},
		{"NOSSD", `{"tags":["!ssd"]}`, "no suitable peers for placement, tags excluded ['ssd']"},
		{"ELSEWHERE", `{"cluster":"ELSEWHERE"}`, "no suitable peers for placement"},
	} {
		wantAnswer(t, nc, "$JS.API.STREAM.CREATE."+c.name, create(c.name, 3, c.placement), 10005, c.desc)
	}

	// A step-down naming tags hands the leadership to the replica whose
	// server has them.
	var leader string
	eventually(t, "the leader of FAST", func() error {
		a, err := jsAnswer(nc, "$JS.API.STREAM.INFO.FAST", "")
		if err != nil || a.Cluster == nil || a.Cluster.Leader == "" {
			return fmt.Errorf("%+v %v", a.Cluster, err)
		}
		leader = a.Cluster.Leader
		return nil
	})
	target := map[string]string{"n1": "n2", "n2": "n3", "n3": "n1"}[leader]
	r := stepDownRequest(t, nc, "$JS.API.STREAM.LEADER.STEPDOWN.FAST", fmt.Sprintf(`{"placement":{"tags":["AZ:%s"]}}`, target[1:]))
	if r.Error != nil || !r.Success {
		t.Fatalf("step-down to %s by tag: %+v", target, r.Error)
	}
	eventually(t, "FAST led by "+target, func() error {
		a, err := jsAnswer(nc, "$JS.API.STREAM.INFO.FAST", "")
		if err != nil || a.Cluster == nil || a.Cluster.Leader != target {
			return fmt.Errorf("%+v %v", a.Cluster, err)
		}
		return nil
	})

	for i, u := range mons {
		var varz struct {
			Tags []string `json:"tags"`
		}
		getJSONInto(t, u+"/varz", &varz)
		if want := lowerTags(placementTags[i]); !slices.Equal(varz.Tags, want) {
			t.Errorf("%s /varz tags %q, want %q", servers[i].Name(), varz.Tags, want)
		}
	}
	sys := connect(t, servers[1].ClientURL(), nats.UserInfo("sys", "sys"))
	names := pingNames(t, sys, `{"tags":["AZ:1"]}`, 2)
	if !slices.Equal(names, []string{"n1", "n4"}) {
		t.Errorf("STATSZ filtered by az:1 answered by %v, want n1 n4", names)
	}
	msg, err := sys.Request("$SYS.REQ.SERVER.PING.STATSZ", []byte(`{"server_name":"n3","exact_match":true}`), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var statsz struct {
		Server struct {
			Tags []string `json:"tags"`
		} `json:"server"`
	}
	if err := json.Unmarshal(msg.Data, &statsz); err != nil || !slices.Equal(statsz.Server.Tags, []string{"az:3", "ssd", "region:east"}) {
		t.Errorf("n3's statsz: %s (%v)", msg.Data, err)
	}
}

// lowerTags is tags as a server keeps them.
func lowerTags(tags []string) []string {
	var out []string
	for _, t := range tags {
		out = append(out, strings.ToLower(strings.TrimSpace(t)))
	}
	return out
}

// getJSONInto decodes the JSON at u into v.
func getJSONInto(t *testing.T, u string, v any) {
	t.Helper()
	_, body := monGet(t, u)
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("%s: %v", u, err)
	}
}

// pingNames sends $SYS.REQ.SERVER.PING.STATSZ with filter body and
// returns the names of the servers that answered, sorted: want answers
// are waited for (at most clusterTimeout), then any more that come
// within 200 ms (a server that should not answer is caught when it
// answers about as fast as the others; under load it may be missed,
// never the reverse).
func pingNames(t *testing.T, sys *nats.Conn, body string, want int) []string {
	t.Helper()
	inbox := nats.NewInbox()
	sub, err := sys.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := sys.PublishRequest("$SYS.REQ.SERVER.PING.STATSZ", inbox, []byte(body)); err != nil {
		t.Fatal(err)
	}
	var names []string
	deadline := time.Now().Add(clusterTimeout)
	for {
		wait := time.Until(deadline)
		if len(names) >= want {
			wait = 200 * time.Millisecond
		}
		msg, err := sub.NextMsg(wait)
		if err != nil {
			break
		}
		var r struct {
			Server struct {
				Name string `json:"name"`
			} `json:"server"`
		}
		if json.Unmarshal(msg.Data, &r) == nil {
			names = append(names, r.Server.Name)
		}
	}
	slices.Sort(names)
	return names
}

// With jetstream { unique_tag: "az:" }, no two replicas of a stream are
// on servers sharing their "az:" tag: n1 and n4 (both az:1) never hold
// the same stream, so four replicas cannot be placed (nats-server
// v2.15.2's "server tag not unique"), three can, on one of n1 and n4 and
// on n2 and n3; a placement naming an az: tag lifts the rule.
func TestJetStreamClusterPlacementUniqueTag(t *testing.T) {
	_, _, mons, nc := placementCluster(t, func(_ int, o *server.Options) { o.JetStreamUniqueTag = "AZ:" })
	for i := range 3 {
		name := fmt.Sprintf("U%d", i)
		wantAnswer(t, nc, "$JS.API.STREAM.CREATE."+name, fmt.Sprintf(`{"name":%q,"subjects":[%q],"num_replicas":3}`, name, name), 0, "")
		got := placedOn(t, nc, name, 3)
		if len(got) != 3 || !slices.Contains(got, "n2") || !slices.Contains(got, "n3") {
			t.Errorf("%s on %v, want n2, n3 and one of n1, n4", name, got)
		}
	}
	wantAnswer(t, nc, "$JS.API.STREAM.CREATE.U4", `{"name":"U4","subjects":["u4"],"num_replicas":4}`, 10005,
		"no suitable peers for placement, server tag not unique")
	wantAnswer(t, nc, "$JS.API.STREAM.CREATE.Z1", `{"name":"Z1","subjects":["z1"],"num_replicas":2,"placement":{"tags":["az:1"]}}`, 0, "")
	if got := placedOn(t, nc, "Z1", 2); !slices.Equal(got, []string{"n1", "n4"}) {
		t.Errorf("Z1 (az:1 named) on %v, want n1 n4", got)
	}
	var varz struct {
		JetStream struct {
			Config struct {
				UniqueTag string `json:"unique_tag"`
			} `json:"config"`
		} `json:"jetstream"`
	}
	getJSONInto(t, mons[0]+"/varz", &varz)
	if varz.JetStream.Config.UniqueTag != "az:" {
		t.Errorf("/varz jetstream.config.unique_tag %q, want az:", varz.JetStream.Config.UniqueTag)
	}
}

// A stream update naming another placement moves the stream (nats-server
// v2.15.2 answers it at once and moves the replicas): a stream of two
// replicas on n2 and n3 (tags "!hdd", "!az:1") moved to "az:1" ends on
// n1 and n4, every replica replaced, the leader's too, with every
// acknowledged message and the duplicate window, and its old servers
// drop their replicas; a stream of three on n1, n2, n3 moved to "!az:2"
// keeps n1 and n3 and replaces n2 by n4. A move with a scale is 10123;
// too few servers matching, nats-server's 10005 with the tags; a stream
// with a consumer of one replica and no server of the stream staying to
// take it cannot move to other servers yet (10069); a stream of one
// replica moves, and takes a placement its server already matches
// without moving; a stream with a replicated consumer moves with it.
func TestJetStreamClusterStreamMove(t *testing.T) {
	servers, _, _, nc := placementCluster(t, nil)
	js, err := nc.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	body := func(name string, replicas int, tags string) string {
		return fmt.Sprintf(`{"name":%q,"subjects":["%s.>"],"num_replicas":%d,"placement":{"tags":%s}}`, name, strings.ToLower(name), replicas, tags)
	}
	wantAnswer(t, nc, "$JS.API.STREAM.CREATE.PAIR", body("PAIR", 2, `["!hdd","!az:1"]`), 0, "")
	if got := placedOn(t, nc, "PAIR", 2); !slices.Equal(got, []string{"n2", "n3"}) {
		t.Fatalf("PAIR on %v, want n2 n3", got)
	}
	const msgs = 200
	for i := 1; i <= msgs; i++ {
		eventually(t, "publish", func() error {
			_, err := js.Publish(fmt.Sprintf("pair.%d", i), []byte("x"), nats.MsgId(fmt.Sprint(i)))
			return err
		})
	}
	wantAnswer(t, nc, "$JS.API.STREAM.UPDATE.PAIR", body("PAIR", 2, `["az:1"]`), 0, "")
	waitMoved(t, nc, "PAIR", []string{"n1", "n4"}, msgs)
	for _, i := range []int{0, 3} {
		eventually(t, servers[i].Name()+"'s replica of PAIR", func() error {
			si, err := accountStream(servers[i], "APP", "PAIR")
			if err != nil {
				return err
			}
			if si.State.Msgs != msgs || si.State.FirstSeq != 1 {
				return fmt.Errorf("%d messages from %d", si.State.Msgs, si.State.FirstSeq)
			}
			return nil
		})
	}
	// The duplicate window moved with the messages.
	ack, err := js.Publish("pair.1", []byte("x"), nats.MsgId("1"))
	if err != nil || !ack.Duplicate || ack.Sequence != 1 {
		t.Errorf("republish of message 1: %+v %v", ack, err)
	}
	if ack, err = js.Publish("pair.new", []byte("x")); err != nil || ack.Sequence != msgs+1 {
		t.Errorf("publish after the move: %+v %v", ack, err)
	}
	for _, i := range []int{1, 2} {
		eventually(t, servers[i].Name()+" drops its replica of PAIR", func() error {
			if _, err := accountStream(servers[i], "APP", "PAIR"); err == nil {
				return errors.New("still there")
			}
			return nil
		})
	}

	wantAnswer(t, nc, "$JS.API.STREAM.CREATE.TRIO", body("TRIO", 3, `["ssd"]`), 0, "")
	placedOn(t, nc, "TRIO", 3)
	for i := 1; i <= 10; i++ {
		eventually(t, "publish", func() error {
			_, err := js.Publish("trio.x", []byte("x"), nats.MsgId(fmt.Sprint(i)))
			return err
		})
	}
	wantAnswer(t, nc, "$JS.API.STREAM.UPDATE.TRIO", body("TRIO", 3, `["!az:2"]`), 0, "")
	waitMoved(t, nc, "TRIO", []string{"n1", "n3", "n4"}, 10)

	wantAnswer(t, nc, "$JS.API.STREAM.UPDATE.TRIO", body("TRIO", 2, `["ssd"]`), 10123, "can not move and scale a stream in a single update")
	wantAnswer(t, nc, "$JS.API.STREAM.UPDATE.TRIO", body("TRIO", 3, `["hdd"]`), 10005, "no suitable peers for placement, tags not matched ['hdd']")
	wantAnswer(t, nc, "$JS.API.STREAM.CREATE.ONE", body("ONE", 1, `["az:2"]`), 0, "")
	wantAnswer(t, nc, "$JS.API.STREAM.UPDATE.ONE", body("ONE", 1, `["nvme"]`), 10005, "no suitable peers for placement, tags not matched ['nvme']")
	// A stream of one replica moves as SERVER.EVACUATE moves it
	// (TestJetStreamClusterSingleStreamPlacementMove).
	wantAnswer(t, nc, "$JS.API.STREAM.UPDATE.ONE", body("ONE", 1, `["az:3"]`), 0, "")
	waitMoved(t, nc, "ONE", []string{"n3"}, 0)
	// A placement its server already satisfies moves nothing.
	a := wantAnswer(t, nc, "$JS.API.STREAM.UPDATE.ONE", body("ONE", 1, `["SSD"]`), 0, "")
	if a.Config == nil || a.Config.Placement == nil || !slices.Equal(a.Config.Placement.Tags, []string{"SSD"}) {
		t.Errorf("ONE's placement after the update: %+v", a.Config)
	}
	if got := placedOn(t, nc, "ONE", 1); !slices.Equal(got, []string{"n3"}) {
		t.Errorf("ONE on %v after a placement its server matches, want n3", got)
	}
	wantAnswer(t, nc, "$JS.API.CONSUMER.CREATE.PAIR.C", `{"stream_name":"PAIR","config":{"durable_name":"C","ack_policy":"explicit"}}`, 0, "")
	wantAnswer(t, nc, "$JS.API.CONSUMER.CREATE.PAIR.O", `{"stream_name":"PAIR","config":{"durable_name":"O","ack_policy":"explicit","num_replicas":1}}`, 0, "")
	// O has one replica and no server of PAIR stays: 10069.
	wantAnswer(t, nc, "$JS.API.STREAM.UPDATE.PAIR", body("PAIR", 2, `["!az:1"]`), 10069, "stream placement can not be changed")
	wantAnswer(t, nc, "$JS.API.STREAM.UPDATE.PAIR", body("PAIR", 2, `["AZ:1"]`), 0, "")
	waitMoved(t, nc, "PAIR", []string{"n1", "n4"}, msgs+1)
	// Without O, PAIR moves with its replicated consumer C.
	wantAnswer(t, nc, "$JS.API.CONSUMER.DELETE.PAIR.O", "", 0, "")
	wantAnswer(t, nc, "$JS.API.STREAM.UPDATE.PAIR", body("PAIR", 2, `["!az:1"]`), 0, "")
	waitMoved(t, nc, "PAIR", []string{"n2", "n3"}, msgs+1)
	eventually(t, "C moved with PAIR", func() error {
		a, err := jsAnswer(nc, "$JS.API.CONSUMER.INFO.PAIR.C", "")
		if err != nil {
			return err
		}
		if got := a.servers(); !slices.Equal(got, []string{"n2", "n3"}) {
			m, _ := nc.Request("$JS.API.CONSUMER.INFO.PAIR.C", nil, 2*time.Second)
			if m != nil {
				return fmt.Errorf("C on %v: %s", got, m.Data)
			}
			return fmt.Errorf("C on %v", got)
		}
		return nil
	})
}

// waitMoved waits until stream name runs on exactly servers (sorted),
// every replica current, with msgs messages, and its info has no
// desired block (the move is over: another may begin).
func waitMoved(t *testing.T, nc *nats.Conn, name string, servers []string, msgs uint64) {
	t.Helper()
	eventually(t, name+" moved to "+strings.Join(servers, " "), func() error {
		a, err := jsAnswer(nc, "$JS.API.STREAM.INFO."+name, "")
		if err != nil {
			return err
		}
		if a.Error != nil || a.Cluster == nil || a.Cluster.Leader == "" || !slices.Equal(a.servers(), servers) {
			return fmt.Errorf("servers %v (%+v)", a.servers(), a.Error)
		}
		if a.Cluster.Desired != nil {
			return errors.New("still moving (a desired block)")
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

// accountStream returns the info of server s's own replica of stream
// name in account acc (its engine's view).
func accountStream(s *server.Server, acc, name string) (*cjs.StreamInfo, error) {
	for _, a := range s.Accounts() {
		if a.Name == acc && a.JetStream != nil {
			si, err := a.JetStream.StreamInfo(name, cjs.InfoOptions{})
			if err != nil {
				return nil, err
			}
			return si, nil
		}
	}
	return nil, fmt.Errorf("no JetStream in %s", acc)
}
