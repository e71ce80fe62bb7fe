package test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/monitor"
	"github.com/nats-io/nats.go"
)

// clusterPartFields is what the cluster part of a replicated stream's or
// consumer's info says of its Raft traffic.
type clusterPartFields struct {
	RaftGroup  string `json:"raft_group"`
	SystemAcc  bool   `json:"system_account"`
	TrafficAcc string `json:"traffic_account"`
}

// TestJetStreamClusterMonitorFields: what trial 34 found different from
// nats-server v2.15.2 in a three-server cluster whose every server lists
// the three in its routes (docs/monitoring.md): every route reads
// did_solicit and is_configured true on both of its servers, the one
// that accepted it too (nats-server keeps the solicited state of the
// duplicate it dropped); a replicated stream's and consumer's cluster
// part and /raftz name the system account as their Raft traffic's
// (system_account true, traffic_account SYS); /raftz's wal part counts
// the bytes and times of the entries a group holds.
func TestJetStreamClusterMonitorFields(t *testing.T) {
	if targetIsNatsServer() {
		t.Skip("starts cairn binaries")
	}
	tr := startTrio(t, "cairn", buildCairn(t))
	tr.populate(t)
	tr.metaLeader(t)

	eventually(t, "every route solicited and configured on both of its servers", func() error {
		for i, m := range tr.mons {
			var rz struct {
				Routes []struct {
					RemoteName   string `json:"remote_name"`
					DidSolicit   bool   `json:"did_solicit"`
					IsConfigured bool   `json:"is_configured"`
				} `json:"routes"`
			}
			if _, body := httpGet(t, m+"/routez"); json.Unmarshal(body, &rz) != nil || len(rz.Routes) != 2 {
				return fmt.Errorf("%s /routez: %s", tr.names[i], body)
			}
			for _, r := range rz.Routes {
				if !r.DidSolicit || !r.IsConfigured {
					return fmt.Errorf("%s: route to %s: did_solicit %v, is_configured %v", tr.names[i], r.RemoteName, r.DidSolicit, r.IsConfigured)
				}
			}
		}
		return nil
	})

	// The cluster parts, in the JetStream API and in /jsz.
	app := connect(t, tr.clients[0], nats.UserInfo("app", "app"))
	var si struct {
		Cluster clusterPartFields `json:"cluster"`
	}
	var ci struct {
		Cluster clusterPartFields `json:"cluster"`
	}
	if err := apiGet(app, "$JS.API.STREAM.INFO.ORDERS", &si); err != nil {
		t.Fatal(err)
	}
	if err := apiGet(app, "$JS.API.CONSUMER.INFO.ORDERS.worker", &ci); err != nil {
		t.Fatal(err)
	}
	for what, c := range map[string]clusterPartFields{"stream info": si.Cluster, "consumer info": ci.Cluster} {
		if c.RaftGroup == "" || !c.SystemAcc || c.TrafficAcc != "SYS" {
			t.Errorf("%s cluster %+v: want system_account true, traffic_account SYS", what, c)
		}
	}
	for i, m := range tr.mons {
		var jsz struct {
			Accounts []struct {
				Streams []struct {
					Cluster   clusterPartFields `json:"cluster"`
					Consumers []struct {
						Cluster clusterPartFields `json:"cluster"`
					} `json:"consumer_detail"`
				} `json:"stream_detail"`
			} `json:"account_details"`
		}
		_, body := httpGet(t, m+"/jsz?acc=APP&consumers=true")
		if err := json.Unmarshal(body, &jsz); err != nil || len(jsz.Accounts) != 1 || len(jsz.Accounts[0].Streams) != 1 ||
			len(jsz.Accounts[0].Streams[0].Consumers) != 1 {
			t.Fatalf("%s /jsz: %v in %s", tr.names[i], err, body)
		}
		sd := jsz.Accounts[0].Streams[0]
		if c, cc := sd.Cluster, sd.Consumers[0].Cluster; !c.SystemAcc || c.TrafficAcc != "SYS" || !cc.SystemAcc || cc.TrafficAcc != "SYS" {
			t.Errorf("%s /jsz: stream cluster %+v, consumer cluster %+v", tr.names[i], c, cc)
		}
	}

	// /raftz: every group of every server; at least one holds entries.
	held := 0
	for i, m := range tr.mons {
		for _, q := range []string{"", "?acc=APP"} {
			var rz monitor.RaftzStatus
			_, body := httpGet(t, m+"/raftz"+q)
			if err := json.Unmarshal(body, &rz); err != nil || len(rz) != 1 {
				t.Fatalf("%s /raftz%s: %v in %s", tr.names[i], q, err, body)
			}
			for acc, groups := range rz {
				for name, g := range groups {
					what := fmt.Sprintf("%s /raftz %s %s", tr.names[i], acc, name)
					if !g.SystemAcc || g.TrafficAcc != "SYS" {
						t.Errorf("%s: system_account %v, traffic_account %q", what, g.SystemAcc, g.TrafficAcc)
					}
					if err := checkRaftzWAL(g); err != nil {
						t.Errorf("%s: %v", what, err)
					}
					if g.WAL.Msgs > 0 {
						held++
					}
				}
			}
		}
	}
	if held == 0 {
		t.Errorf("no /raftz group holds an entry")
	}
}

// checkRaftzWAL checks a group's wal part: the entries first_seq..
// last_seq, each at least the 13 bytes the WAL writes besides its data,
// appended between first_ts and last_ts, within the last minute; none
// held: no bytes and no first_ts, first_seq past last_seq.
func checkRaftzWAL(g monitor.RaftzGroup) error {
	w := g.WAL
	now := time.Now()
	switch {
	case w.LastSeq != g.PIndex:
		return fmt.Errorf("wal last_seq %d, pindex %d", w.LastSeq, g.PIndex)
	case w.Msgs == 0 && (w.Bytes != 0 || !w.FirstTime.IsZero() || w.FirstSeq != w.LastSeq+1):
		return fmt.Errorf("no entry held, wal %+v", w)
	case w.Msgs == 0:
		return nil
	case w.LastSeq-w.FirstSeq+1 != w.Msgs || w.Bytes < 13*w.Msgs:
		return fmt.Errorf("wal %+v", w)
	case w.FirstTime.After(w.LastTime) || now.Sub(w.FirstTime) > time.Minute || w.LastTime.After(now.Add(time.Second)):
		return fmt.Errorf("wal times %v..%v at %v", w.FirstTime, w.LastTime, now)
	}
	return nil
}
