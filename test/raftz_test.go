package test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/cairnmq/cairn/internal/server"
)

// raftzGroup is what the /raftz test reads of a group.
type raftzGroup struct {
	ID           string `json:"id"`
	State        string `json:"state"`
	Size         int    `json:"size"`
	QuorumNeeded int    `json:"quorum_needed"`
	Committed    uint64 `json:"committed"`
	Applied      uint64 `json:"applied"`
	Leader       string `json:"leader"`
	Term         uint64 `json:"term"`
	PIndex       uint64 `json:"pindex"`
	WAL          struct {
		LastSeq uint64 `json:"last_seq"`
	} `json:"wal"`
	Peers map[string]struct {
		Name  string `json:"name"`
		Known bool   `json:"known"`
	} `json:"peers"`
}

type raftzReply struct {
	Server struct {
		Name string `json:"name"`
	} `json:"server"`
	Data map[string]map[string]raftzGroup `json:"data"`
}

// TestRaftzCluster: `nats server request raft` (the
// $SYS.REQ.SERVER.PING.RAFTZ request) and /raftz report each server's
// Raft groups as nats-server v2.15.2 does (docs/monitoring.md, "/raftz"):
// by default the meta group under the system account, one leader that
// every server names, its peers by name; with --account APP the stream's
// and the consumer's groups, named as /jsz names them; group= one group;
// a single server without a cluster has none (404).
func TestRaftzCluster(t *testing.T) {
	if targetIsNatsServer() {
		t.Skip("starts cairn binaries")
	}
	natsCLI(t)
	tr := startTrio(t, "cairn", buildCairn(t))
	tr.populate(t)
	leader := tr.metaLeader(t)

	// The meta group, as the CLI shows it from each server.
	var replies []raftzReply
	eventually(t, "three RAFTZ replies that agree on the meta leader", func() error {
		replies = cliRaftz(t, tr.clients[0])
		if len(replies) != 3 {
			return fmt.Errorf("%d replies", len(replies))
		}
		var leaders []string
		for _, r := range replies {
			g, ok := r.Data["SYS"]["_meta_"]
			if !ok || len(r.Data) != 1 || len(r.Data["SYS"]) != 1 {
				return fmt.Errorf("%s: %+v", r.Server.Name, r.Data)
			}
			if g.Size != 3 || g.QuorumNeeded != 2 || g.Term == 0 || g.Committed == 0 || g.Applied > g.Committed ||
				g.PIndex == 0 || g.WAL.LastSeq != g.PIndex || len(g.Peers) != 2 {
				return fmt.Errorf("%s: %+v", r.Server.Name, g)
			}
			var names []string
			for id, p := range g.Peers {
				if !p.Known || id == g.ID || len(id) != 8 {
					return fmt.Errorf("%s: peer %s %+v", r.Server.Name, id, p)
				}
				names = append(names, p.Name)
			}
			if slices.Contains(names, r.Server.Name) {
				return fmt.Errorf("%s lists itself among its peers %v", r.Server.Name, names)
			}
			if (g.State == "LEADER") != (r.Server.Name == tr.names[leader]) || (g.State == "LEADER") != (g.Leader == g.ID) {
				return fmt.Errorf("%s: %s, leader %s, id %s", r.Server.Name, g.State, g.Leader, g.ID)
			}
			leaders = append(leaders, g.Leader)
		}
		if leaders[0] != leaders[1] || leaders[1] != leaders[2] {
			return fmt.Errorf("leaders %v", leaders)
		}
		return nil
	})

	// The stream's and the consumer's groups, under their account, named
	// as /jsz names them.
	_, body := httpGet(t, tr.mons[leader]+"/jsz?acc=APP&streams=true&consumers=true&raft=true")
	var jsz struct {
		Accounts []struct {
			Streams []struct {
				Group     string `json:"stream_raft_group"`
				Consumers []struct {
					Group string `json:"raft_group"`
				} `json:"consumer_raft_groups"`
			} `json:"stream_detail"`
		} `json:"account_details"`
	}
	if err := json.Unmarshal(body, &jsz); err != nil || len(jsz.Accounts) != 1 || len(jsz.Accounts[0].Streams) != 1 ||
		len(jsz.Accounts[0].Streams[0].Consumers) != 1 {
		t.Fatalf("/jsz %s: %v", body, err)
	}
	sg, cg := jsz.Accounts[0].Streams[0].Group, jsz.Accounts[0].Streams[0].Consumers[0].Group
	eventually(t, "the APP groups on every server", func() error {
		replies := cliRaftz(t, tr.clients[1], "--account", "APP")
		if len(replies) != 3 {
			return fmt.Errorf("%d replies", len(replies))
		}
		for _, r := range replies {
			groups := r.Data["APP"]
			if len(r.Data) != 1 || len(groups) != 2 || groups[sg].Size != 3 || groups[cg].Size != 3 {
				return fmt.Errorf("%s: %+v, want %s and %s", r.Server.Name, r.Data, sg, cg)
			}
		}
		return nil
	})
	var one map[string]map[string]raftzGroup
	code, body := httpGet(t, tr.mons[0]+"/raftz?acc=APP&group="+sg)
	if err := json.Unmarshal(body, &one); code != http.StatusOK || err != nil || len(one["APP"]) != 1 || one["APP"][sg].Size != 3 {
		t.Errorf("/raftz?acc=APP&group=%s: %d %s", sg, code, body)
	}
	if code, body := httpGet(t, tr.mons[0]+"/raftz?group=nope"); code != http.StatusOK || strings.TrimSpace(string(body)) != "{}" {
		t.Errorf("/raftz?group=nope: %d %s", code, body)
	}

	// No cluster, no Raft groups.
	_, mon := startCairnServer(t, server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir()})
	if code, body := httpGet(t, mon+"/raftz"); code != http.StatusNotFound || string(body) != "No Raft nodes registered" {
		t.Errorf("single server /raftz: %d %q", code, body)
	}
}

// cliRaftz runs `nats server request raft` as the system user with args
// and returns the replies, one JSON document a line.
func cliRaftz(t *testing.T, u string, args ...string) []raftzReply {
	t.Helper()
	out, _ := runCLI(t, u, append(append(sysUser, "server", "request", "raft"), args...)...)
	var replies []raftzReply
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r raftzReply
		if line := strings.TrimSpace(sc.Text()); strings.HasPrefix(line, "{") && json.Unmarshal([]byte(line), &r) == nil {
			replies = append(replies, r)
		}
	}
	return replies
}
