package test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

// An account's jetstream { max_ack_pending } bounds its consumers, as in
// nats-server v2.15.2 (setConsumerConfigDefaults, checkConsumerCfg): a
// consumer that sets none gets the smaller of 1000 and the limit, one
// that sets more (itself, or through its stream's consumer_limits) is
// refused with 10121 "consumer max ack pending exceeds system limit of
// <limit>", on create and on update; a limit above 1000 leaves the
// default at 1000. The same file against cairn and nats-server.
func TestAccountMaxAckPending(t *testing.T) {
	conf := fmt.Sprintf(`
jetstream { store_dir: %q }
accounts {
  M { users = [ { user: m, password: p } ], jetstream { max_ack_pending: 50 } }
  L { users = [ { user: l, password: p } ], jetstream { max_ack_pending: 5000 } }
}
`, t.TempDir())
	const excess = `{"code":400,"err_code":10121,"description":"consumer max ack pending exceeds system limit of 50"}`
	forEach(t, secTargets(t, conf, nil), func(t *testing.T, tg secTarget) {
		if tg.name != "cairn" {
			return
		}
		m, err := nats.Connect(tg.url, nats.UserInfo("m", "p"))
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		ackCreate(t, m, "$JS.API.STREAM.CREATE.S", `{"name":"S","subjects":["s.>"]}`, "")
		ackCreate(t, m, "$JS.API.STREAM.CREATE.CL", `{"name":"CL","subjects":["cl.>"],"consumer_limits":{"max_ack_pending":100}}`, "")
		for _, c := range []struct {
			what, subj, body, wantErr string
			wantMAP                   float64
		}{
			{"default explicit", "S.D", `{"durable_name":"D","ack_policy":"explicit"}`, "", 50},
			{"default none", "S.N", `{"durable_name":"N","ack_policy":"none"}`, "", 0},
			{"at the limit", "S.E", `{"durable_name":"E","ack_policy":"explicit","max_ack_pending":50}`, "", 50},
			{"above the limit", "S.X", `{"durable_name":"X","ack_policy":"explicit","max_ack_pending":51}`, excess, 0},
			{"unlimited", "S.U", `{"durable_name":"U","ack_policy":"explicit","max_ack_pending":-1}`, "", -1},
			{"update above", "S.D", `{"durable_name":"D","ack_policy":"explicit","max_ack_pending":500}`, excess, 0},
			{"update below", "S.D", `{"durable_name":"D","ack_policy":"explicit","max_ack_pending":10}`, "", 10},
			{"stream limit above", "CL.C", `{"durable_name":"C","ack_policy":"explicit"}`, excess, 0},
		} {
			body := `{"stream_name":"` + c.subj[:len(c.subj)-2] + `","config":` + c.body + `}`
			got := ackCreate(t, m, "$JS.API.CONSUMER.CREATE."+c.subj, body, c.wantErr)
			if c.wantErr == "" && got != c.wantMAP {
				t.Errorf("%s: max_ack_pending %v, want %v", c.what, got, c.wantMAP)
			}
		}

		l, err := nats.Connect(tg.url, nats.UserInfo("l", "p"))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ackCreate(t, l, "$JS.API.STREAM.CREATE.S", `{"name":"S","subjects":["s.>"]}`, "")
		if got := ackCreate(t, l, "$JS.API.CONSUMER.CREATE.S.D", `{"stream_name":"S","config":{"durable_name":"D","ack_policy":"explicit"}}`, ""); got != 1000 {
			t.Errorf("limit 5000: default max_ack_pending %v, want 1000", got)
		}
		ackCreate(t, l, "$JS.API.CONSUMER.CREATE.S.B", `{"stream_name":"S","config":{"durable_name":"B","ack_policy":"explicit","max_ack_pending":5000}}`, "")
	})
}

// ackCreate sends a stream or consumer create and checks its error
// against wantErr (the "error" object's exact JSON; "" for none); it
// returns the config's max_ack_pending.
func ackCreate(t *testing.T, nc *nats.Conn, subj, body, wantErr string) float64 {
	t.Helper()
	r, err := nc.Request(subj, []byte(body), readTimeout)
	if err != nil {
		t.Fatalf("%s: %v", subj, err)
	}
	var resp struct {
		Error  json.RawMessage `json:"error"`
		Config struct {
			MaxAckPending float64 `json:"max_ack_pending"`
		} `json:"config"`
	}
	if err := json.Unmarshal(r.Data, &resp); err != nil {
		t.Fatalf("%s: %v in %s", subj, err, r.Data)
	}
	if string(resp.Error) != wantErr {
		t.Fatalf("%s %s: error %s, want %s", subj, body, resp.Error, wantErr)
	}
	return resp.Config.MaxAckPending
}

// A restore whose snapshot holds a consumer above the account's
// max_ack_pending fails as a whole with 10062, the consumer's refusal in
// its text (nats-server v2.15.2: "restore failed: failed to add consumer
// "PG": consumer max ack pending exceeds system limit of 50 (10121)").
// cairn leaves no stream (nats-server leaves it without the consumer:
// docs/compatibility.md). The same file against cairn and nats-server.
func TestAccountMaxAckPendingRestore(t *testing.T) {
	natsCLI(t)
	conf := fmt.Sprintf(`
jetstream { store_dir: %q }
accounts {
  M { users = [ { user: m, password: p } ], jetstream { max_ack_pending: 50 } }
  U { users = [ { user: u, password: p } ], jetstream: enabled }
}
`, t.TempDir())
	forEach(t, secTargets(t, conf, nil), func(t *testing.T, tg secTarget) {
		u, err := nats.Connect(tg.url, nats.UserInfo("u", "p"))
		if err != nil {
			t.Fatal(err)
		}
		defer u.Close()
		ackCreate(t, u, "$JS.API.STREAM.CREATE.S", `{"name":"S","subjects":["s.>"]}`, "")
		ackCreate(t, u, "$JS.API.CONSUMER.CREATE.S.PG", `{"stream_name":"S","config":{"durable_name":"PG","ack_policy":"explicit","max_ack_pending":100}}`, "")
		dir := t.TempDir() + "/backup"
		if out, errOut := runCLI(t, tg.url, "--user", "u", "--password", "p", "stream", "backup", "S", dir, "--consumers"); !strings.Contains(out+errOut, `for stream "S"`) {
			t.Fatalf("nats stream backup:\n%s%s", out, errOut)
		}
		got := runCLIFail(t, tg.url, "--user", "m", "--password", "p", "stream", "restore", dir)
		if want := `restore failed: failed to add consumer "PG": consumer max ack pending exceeds system limit of 50 (10121) (10062)`; !strings.Contains(got, want) {
			t.Fatalf("restore into M:\n%s\nwant %q", got, want)
		}
		if tg.name != "cairn" {
			return
		}
		m, err := nats.Connect(tg.url, nats.UserInfo("m", "p"))
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		r, err := m.Request("$JS.API.STREAM.INFO.S", nil, readTimeout)
		if err != nil || !strings.Contains(string(r.Data), `"err_code":10059`) {
			t.Fatalf("STREAM.INFO after the failed restore: %v %s", err, r.Data)
		}
	})
}
