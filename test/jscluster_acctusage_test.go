package test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/cairnmq/cairn/internal/config"
	"github.com/cairnmq/cairn/internal/server"
	"github.com/nats-io/nats.go"
)

// An account's max_file and max_memory bound what its streams store
// over the whole cluster, every replica counted, when a publish is
// checked (docs/cluster.md, "Account limits"), as nats-server v2.15.2
// counts every server's usage of the account: an R3 stream without
// max_bytes in an account of 1 MiB is refused (10002) once each replica
// holds about a third of it. Before, each server counted only the bytes
// it stored itself, and the stream held the whole limit on each replica
// (105 messages of 10 kB where nats-server took 35).

// usageCluster starts three servers, tagged s1, s2 and s3, with the
// account A (user a/a) of max_file and max_memory limit, and returns
// them with a client of A connected to the first.
func usageCluster(t *testing.T, limit int64) ([]*server.Server, *nats.Conn) {
	t.Helper()
	servers, _ := jsClusterMod(t, 3, func(i int, o *server.Options) {
		o.Tags = []string{fmt.Sprintf("s%d", i+1)}
		o.Auth = config.Auth{
			Users: []config.User{{Name: "a", Password: "a", Account: "A"}},
			Accounts: []config.Account{{Name: "A", JetStream: &config.AccountJetStream{MaxMemory: limit, MaxStore: limit,
				MaxStreams: -1, MaxConsumers: -1, MaxAckPending: -1, MemoryMaxStreamBytes: -1, StoreMaxStreamBytes: -1}}},
		}
	})
	waitMeta(t, servers, []string{"n1", "n2", "n3"})
	return servers, connect(t, servers[0].ClientURL(), nats.UserInfo("a", "a"))
}

// createUsageStream creates stream name (subject name.x) through nc with
// the config fields given (JSON members), retrying until it is created.
func createUsageStream(t *testing.T, nc *nats.Conn, name, fields string) {
	t.Helper()
	body := fmt.Sprintf(`{"name":%q,"subjects":[%q],%s}`, name, name+".x", fields)
	eventually(t, "create "+name, func() error {
		if code, answer := createStreamCode(t, nc, name, body); code != 0 {
			return fmt.Errorf("%s", answer)
		}
		return nil
	})
}

// createStreamCode sends $JS.API.STREAM.CREATE.<name> with body through
// nc and returns the answer's error code (0: created) and the answer,
// asking again while there is no answer or it is 10008 (the cluster has
// no meta leader yet, or lost it).
func createStreamCode(t *testing.T, nc *nats.Conn, name, body string) (code int, answer []byte) {
	t.Helper()
	eventually(t, "an answer to the create of "+name, func() error {
		m, err := nc.Request("$JS.API.STREAM.CREATE."+name, []byte(body), clusterTimeout/4)
		if err != nil {
			return err
		}
		var r struct {
			Error *struct {
				ErrCode int `json:"err_code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(m.Data, &r); err != nil {
			return err
		}
		if r.Error != nil && r.Error.ErrCode == 10008 {
			return fmt.Errorf("10008: %s", m.Data)
		}
		code, answer = 0, m.Data
		if r.Error != nil {
			code = r.Error.ErrCode
		}
		return nil
	})
	return code, answer
}

// publishCode publishes payload to subj through nc and returns the
// PubAck's error code, 0 when it was stored.
func publishCode(t *testing.T, nc *nats.Conn, subj string, payload []byte) int {
	t.Helper()
	m, err := nc.Request(subj, payload, clusterTimeout/4)
	if err != nil {
		t.Fatalf("publish to %s: %v", subj, err)
	}
	var a struct {
		Seq   uint64 `json:"seq"`
		Error *struct {
			ErrCode int `json:"err_code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &a); err != nil {
		t.Fatalf("PubAck %q: %v", m.Data, err)
	}
	if a.Error != nil {
		return a.Error.ErrCode
	}
	if a.Seq == 0 {
		t.Fatalf("PubAck %s", m.Data)
	}
	return 0
}

// streamBytes returns the bytes stream name holds, as its info through
// nc says.
func streamBytes(t *testing.T, nc *nats.Conn, name string) uint64 {
	t.Helper()
	var bytes uint64
	eventually(t, "the info of "+name, func() error {
		m, err := nc.Request("$JS.API.STREAM.INFO."+name, nil, clusterTimeout/4)
		if err != nil {
			return err
		}
		var si struct {
			State *struct {
				Bytes uint64 `json:"bytes"`
			} `json:"state"`
		}
		if err := json.Unmarshal(m.Data, &si); err != nil || si.State == nil {
			return fmt.Errorf("%s: %v", m.Data, err)
		}
		bytes = si.State.Bytes
		return nil
	})
	return bytes
}

// A stream of three replicas without max_bytes, published to without
// pause until refused: it stops at a third of the account's limit,
// within one message, and the refusal is 10002; the account info counts
// the three replicas. Before, it stopped at the whole limit.
func TestJetStreamClusterAccountUsageReplicatedFile(t *testing.T) {
	testAccountUsageReplicated(t, "file")
}

// As above for a memory stream against max_memory.
func TestJetStreamClusterAccountUsageReplicatedMemory(t *testing.T) {
	testAccountUsageReplicated(t, "memory")
}

func testAccountUsageReplicated(t *testing.T, storage string) {
	const limit = 1 << 20
	payload := make([]byte, 10000)
	_, nc := usageCluster(t, limit)
	createUsageStream(t, nc, "R", fmt.Sprintf(`"num_replicas":3,"storage":%q`, storage))
	stored, code := 0, 0
	for code == 0 && stored < 3*limit/len(payload) {
		if code = publishCode(t, nc, "R.x", payload); code == 0 {
			stored++
		}
	}
	if code != 10002 {
		t.Fatalf("%d messages stored, then error %d, want 10002", stored, code)
	}
	per := streamBytes(t, nc, "R")
	size := per / uint64(stored)
	t.Logf("%d messages of %d bytes stored, %d bytes each replica", stored, size, per)
	if 3*per <= limit || 3*(per-size) > limit {
		t.Fatalf("each replica holds %d bytes (%d messages): three are %d, want the first past the limit of %d", per, stored, 3*per, limit)
	}
	eventually(t, "the account's usage over the three replicas", func() error {
		m, err := nc.Request("$JS.API.INFO", nil, clusterTimeout/4)
		if err != nil {
			return err
		}
		var ai struct {
			Memory uint64 `json:"memory"`
			Store  uint64 `json:"storage"`
		}
		if err := json.Unmarshal(m.Data, &ai); err != nil {
			return err
		}
		got := ai.Store
		if storage == "memory" {
			got = ai.Memory
		}
		if got != 3*per {
			return fmt.Errorf("account info %s, want %s %d", m.Data, storage, 3*per)
		}
		return nil
	})
}

// Two streams of one replica on two servers: once the first holds the
// account's whole limit, a publish to the second, on another server, is
// refused (10002) as soon as the first's server's report of the account
// reached it; once the first stream is deleted, the second takes
// publishes again. Before, each server counted only its own streams,
// and the account held its limit on every server.
func TestJetStreamClusterAccountUsageOtherServers(t *testing.T) {
	const limit = 256 << 10
	_, nc := usageCluster(t, limit)
	createUsageStream(t, nc, "FULL", `"num_replicas":1,"placement":{"tags":["s1"]}`)
	createUsageStream(t, nc, "MORE", `"num_replicas":1,"placement":{"tags":["s2"]}`)
	big := make([]byte, 8000)
	for n := 0; ; n++ {
		code := publishCode(t, nc, "FULL.x", big)
		if code == 10002 {
			break
		}
		if code != 0 || n > limit/len(big)+1 {
			t.Fatalf("FULL: message %d: error %d, after %d bytes", n+1, code, streamBytes(t, nc, "FULL"))
		}
	}
	small := []byte("x")
	var took int
	eventually(t, "MORE refused once FULL's server reported the account full", func() error {
		switch code := publishCode(t, nc, "MORE.x", small); code {
		case 10002:
			return nil
		case 0:
			took++
			return fmt.Errorf("MORE took message %d", took)
		default:
			t.Fatalf("MORE: error %d", code)
		}
		return nil
	})
	t.Logf("MORE took %d messages before FULL's server's report came", took)
	m, err := nc.Request("$JS.API.STREAM.DELETE.FULL", nil, clusterTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Data) == "" {
		t.Fatal("no answer to the delete")
	}
	eventually(t, "MORE takes publishes again once FULL is deleted", func() error {
		if code := publishCode(t, nc, "MORE.x", small); code != 0 {
			return fmt.Errorf("error %d", code)
		}
		return nil
	})
}
