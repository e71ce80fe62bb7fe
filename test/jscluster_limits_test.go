package test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/cairnmq/cairn/internal/config"
	"github.com/cairnmq/cairn/internal/server"
	"github.com/nats-io/nats.go"
)

// An account's JetStream limits hold across a cluster, as nats-server
// v2.15.2's meta leader checks them before it proposes a stream
// (jsClusteredStreamLimitsCheck): max_streams counts every stream the
// meta group assigns to the account, and max_storage or max_memory
// the reservations of all of them, max_bytes times the replicas. Before,
// each server checked only the streams it ran: a trial created 5
// streams in an account of 3, an R3 stream of 3 MB in an account of
// 2 MB, and streams of one replica that no server would start (left
// assigned, unanswered).
func TestJetStreamClusterAccountLimits(t *testing.T) {
	servers, _ := jsClusterMod(t, 3, func(_ int, o *server.Options) {
		o.Auth = config.Auth{
			Users: []config.User{{Name: "a", Password: "a", Account: "A"}},
			Accounts: []config.Account{{Name: "A", JetStream: &config.AccountJetStream{MaxMemory: 1 << 20, MaxStore: 20 << 20,
				MaxStreams: 3, MaxConsumers: -1, MaxAckPending: -1, MemoryMaxStreamBytes: -1, StoreMaxStreamBytes: -1}}},
		}
	})
	waitMeta(t, servers, []string{"n1", "n2", "n3"})
	nc := connect(t, servers[1].ClientURL(), nats.UserInfo("a", "a"))
	create := func(name string, replicas int, maxBytes int64, storage string) int {
		t.Helper()
		body := fmt.Sprintf(`{"name":%q,"subjects":[%q],"num_replicas":%d,"max_bytes":%d,"storage":%q}`, name, "s."+name, replicas, maxBytes, storage)
		code, _ := createStreamCode(t, nc, name, body)
		return code
	}
	for _, c := range []struct {
		name     string
		replicas int
		maxBytes int64
		storage  string
		want     int
	}{
		{"S1", 3, 4 << 20, "file", 0},       // 12 MB of 20 reserved
		{"S2", 3, 3 << 20, "file", 10047},   // 12 + 9 > 20
		{"S2", 1, 3 << 20, "file", 0},       // 12 + 3
		{"M1", 3, 1 << 20, "memory", 10028}, // 3 MB > 1 MB of memory
		{"M1", 1, 1 << 20, "memory", 0},
		{"S3", 1, -1, "file", 10027}, // a fourth stream
	} {
		if got := create(c.name, c.replicas, c.maxBytes, c.storage); got != c.want {
			t.Fatalf("create %s (R%d, max_bytes %d, %s): error %d, want %d", c.name, c.replicas, c.maxBytes, c.storage, got, c.want)
		}
	}
	// The scale-up of S2 to three replicas would reserve 12 + 9.
	m, err := nc.Request("$JS.API.STREAM.UPDATE.S2", []byte(`{"name":"S2","subjects":["s.S2"],"num_replicas":3,"max_bytes":3145728}`), clusterTimeout)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Error *struct {
			ErrCode int `json:"err_code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &r); err != nil || r.Error == nil || r.Error.ErrCode != 10047 {
		t.Fatalf("scale-up of S2 past the account's storage: %s", m.Data)
	}
}
