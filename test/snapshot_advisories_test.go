package test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/server"
	"github.com/nats-io/nats.go"
)

// The snapshot and restore advisories name the client that asked for the
// snapshot or the restore, as nats-server v2.15.2 does (its ClientInfo,
// the shape of the API audit advisory's "client"): a real nats.go client
// named "snapper" snapshots a stream, deletes it and restores it, and a
// second client reads the four advisories. Against either server
// (CAIRN_TEST_TARGET); the differential test compares every key with
// nats-server's.
func TestSnapshotRestoreAdvisoriesNameClient(t *testing.T) {
	u := startServer(t, func(o *server.Options) { o.JetStream = true })
	watch := connect(t, u)
	advs, err := watch.SubscribeSync("$JS.EVENT.ADVISORY.STREAM.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := watch.Flush(); err != nil {
		t.Fatal(err)
	}
	nc := connect(t, u, nats.Name("snapper"))
	cfg := `{"name":"SA","subjects":["sa.>"],"storage":"file"}`
	apiReq(t, nc, "$JS.API.STREAM.CREATE.SA", cfg)
	for range 3 {
		if _, err := nc.Request("sa.x", []byte("data"), readTimeout); err != nil {
			t.Fatal(err)
		}
	}
	data := takeStreamSnapshot(t, nc, "SA")
	apiReq(t, nc, "$JS.API.STREAM.DELETE.SA", "")
	restoreStream(t, nc, "SA", `{"config":`+cfg+`}`, data)

	want := []string{"SNAPSHOT_CREATE", "SNAPSHOT_COMPLETE", "RESTORE_CREATE", "RESTORE_COMPLETE"}
	seen := map[string]map[string]any{}
	deadline := time.Now().Add(readTimeout)
	for len(seen) < len(want) && time.Now().Before(deadline) {
		m, err := advs.NextMsg(time.Until(deadline))
		if err != nil {
			break
		}
		for _, w := range want {
			if m.Subject == "$JS.EVENT.ADVISORY.STREAM."+w+".SA" {
				var a struct {
					Client map[string]any `json:"client"`
				}
				if err := json.Unmarshal(m.Data, &a); err != nil {
					t.Fatalf("%s: %v in %s", w, err, m.Data)
				}
				seen[w] = a.Client
			}
		}
	}
	cid, err := nc.GetClientID()
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range want {
		c, ok := seen[w]
		switch {
		case !ok:
			t.Errorf("no %s advisory", w)
		case c == nil:
			t.Errorf("%s: client is null", w)
		case c["name"] != "snapper" || c["acc"] != "$G" || c["lang"] != "go" || c["kind"] != "Client" ||
			c["id"] != float64(cid) || c["host"] != "127.0.0.1":
			t.Errorf("%s: client %v, want the snapper connection (id %d) of account $G", w, c, cid)
		}
	}
}

// apiReq sends a JetStream API request and fails t on an error answer.
func apiReq(t *testing.T, nc *nats.Conn, subj, body string) []byte {
	t.Helper()
	r, err := nc.Request(subj, []byte(body), readTimeout)
	if err != nil {
		t.Fatalf("%s: %v", subj, err)
	}
	var e struct {
		Error *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	if json.Unmarshal(r.Data, &e) != nil || e.Error != nil {
		t.Fatalf("%s: %s", subj, r.Data)
	}
	return r.Data
}

// takeStreamSnapshot snapshots stream name as `nats stream backup` does:
// it subscribes to a deliver subject, asks for the snapshot, answers each
// chunk that has a reply subject, and returns the bytes once the empty
// message that ends the snapshot arrives.
func takeStreamSnapshot(t *testing.T, nc *nats.Conn, name string) []byte {
	t.Helper()
	deliver := nats.NewInbox()
	sub, err := nc.SubscribeSync(deliver)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	apiReq(t, nc, "$JS.API.STREAM.SNAPSHOT."+name, `{"deliver_subject":"`+deliver+`"}`)
	var data []byte
	for {
		m, err := sub.NextMsg(readTimeout)
		if err != nil {
			t.Fatalf("snapshot chunk: %v", err)
		}
		if len(m.Data) == 0 {
			return data
		}
		data = append(data, m.Data...)
		if m.Reply != "" {
			if err := m.Respond(nil); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// restoreStream restores stream name from data as `nats stream restore`
// does: the request, the chunks to the subject it answers with, each
// waiting for its answer, and the empty message that ends it, whose
// answer must be the stream's info.
func restoreStream(t *testing.T, nc *nats.Conn, name, body string, data []byte) {
	t.Helper()
	var r struct {
		DeliverSubject string `json:"deliver_subject"`
	}
	if err := json.Unmarshal(apiReq(t, nc, "$JS.API.STREAM.RESTORE."+name, body), &r); err != nil || r.DeliverSubject == "" {
		t.Fatalf("restore answer: %v %+v", err, r)
	}
	for rest := data; len(rest) > 0; {
		n := min(64<<10, len(rest))
		if _, err := nc.Request(r.DeliverSubject, rest[:n], readTimeout); err != nil {
			t.Fatalf("restore chunk: %v", err)
		}
		rest = rest[n:]
	}
	apiReq(t, nc, r.DeliverSubject, "")
}
