package test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/server"
	"github.com/nats-io/nats.go"
)

// TestDifferentialAPIAudit compares the API audit advisories
// ($JS.EVENT.ADVISORY.API) of both servers, with jetstream { domain }:
// which requests are audited (answered ones, errors included, with or
// without a reply subject; not a successful STREAM.MSG.GET, nor a
// consumer's or stream's own subjects), their keys and key order, the
// client's ClientInfo keys and values, the request and the response.
func TestDifferentialAPIAudit(t *testing.T) {
	diffRequireNatsServer(t)
	d := newDifferOpts(t, func(o *server.Options) { o.JetStreamDomain = "HUB" })
	d.partial, d.audits = true, true
	api := diffAPI
	d.req("audit account info", api+"INFO", "")
	d.req("audit stream create", api+"STREAM.CREATE.AU", `{"name":"AU","subjects":["au.>"],"storage":"memory"}`)
	d.req("audit stream create again", api+"STREAM.CREATE.AU", `{"name":"AU","subjects":["au.>"],"storage":"file"}`)
	d.req("audit stream info missing", api+"STREAM.INFO.NOPE", "")
	d.req("audit stream info bad json", api+"STREAM.INFO.AU", `{"subjects_filter":`)
	d.req("audit msg get missing", api+"STREAM.MSG.GET.AU", `{"seq":1}`)
	d.pub("audit pub", "au.a", "one")
	d.req("audit msg get", api+"STREAM.MSG.GET.AU", `{"seq":1}`) // not audited
	d.req("audit msg get domain", "$JS.HUB.API.STREAM.MSG.GET.AU", `{"seq":5}`)
	d.req("audit consumer create", api+"CONSUMER.CREATE.AU.C", diffConsumerBody("AU", "", `{"durable_name":"C","ack_policy":"explicit"}`))
	d.frames("audit pull", api+"CONSUMER.MSG.NEXT.AU.C", "", `{"batch":1}`, 1) // not an API request
	d.frames("audit direct get", api+"DIRECT.GET.AU", "", `{"seq":1}`, 1)      // nor this
	d.req("audit consumer info", api+"CONSUMER.INFO.AU.C", "")
	d.req("audit consumer names", api+"CONSUMER.NAMES.AU", "")
	d.req("audit level", api+"STREAM.NAMES", "", diffHdr("Nats-Required-Api-Level", "99"))
	// Without a reply subject: audited all the same.
	diffBoth(d, func(s *diffSide) error { return s.nc.Publish(api+"STREAM.INFO.GONE", nil) })
	d.req("audit consumer delete", api+"CONSUMER.DELETE.AU.C", "")
	d.req("audit stream delete", api+"STREAM.DELETE.AU", "")
	d.endOfRun()
	d.check()
	n := 0
	for l := range d.labels {
		if strings.HasPrefix(l, "advisory audit ") {
			n++
		}
	}
	if n != 16 { // the 14 audited above, and endOfRun's stream names and account info
		t.Errorf("%d audits compared, want 16", n)
	}
}

// TestAPIAuditClients: the "client" of an audit describes the requester
// as nats-server v2.15.2 does, for a user with a password, an nkey user
// (whose issuer_key is its account) and the user of an account without
// JetStream (whose 10039 answers are audited too); the advisory goes to
// the request's account only.
func TestAPIAuditClients(t *testing.T) {
	nk := newNkeyUser(t)
	conf := fmt.Sprintf(`server_name: audsrv
jetstream { store_dir: %q }
accounts {
  A: { jetstream: enabled, users: [ {user: a, password: pa}, {nkey: %s} ] }
  B: { users: [ {user: b, password: pb} ] }
}`, t.TempDir(), nk.pub)
	nkeyOpt := nats.Nkey(nk.pub, func(nonce []byte) ([]byte, error) { return nk.kp.Sign(nonce) })
	forEach(t, secTargets(t, conf, nil), func(t *testing.T, tg secTarget) {
		listenA := connect(t, tg.url, nats.UserInfo("a", "pa"))
		listenB := connect(t, tg.url, nats.UserInfo("b", "pb"))
		advA := subSync(t, listenA, "$JS.EVENT.ADVISORY.API")
		advB := subSync(t, listenB, "$JS.EVENT.ADVISORY.API")
		flush(t, listenA)
		flush(t, listenB)

		for _, tc := range []struct {
			who, subj string
			auth      nats.Option
			adv       *nats.Subscription
			acc, user string
			issuer    bool
		}{
			{"password user", "$JS.API.INFO", nats.UserInfo("a", "pa"), advA, "A", "a", false},
			{"nkey user", "$JS.API.STREAM.INFO.X", nkeyOpt, advA, "A", nk.pub, true},
			{"no JetStream", "$JS.API.INFO", nats.UserInfo("b", "pb"), advB, "B", "b", false},
		} {
			nc := connect(t, tg.url, tc.auth, nats.Name("auditor"))
			r, err := nc.Request(tc.subj, nil, 2*time.Second)
			if err != nil {
				t.Fatalf("%s: %v", tc.who, err)
			}
			m, err := tc.adv.NextMsg(2 * time.Second)
			if err != nil {
				t.Fatalf("%s: no audit: %v", tc.who, err)
			}
			if keys := diffTopKeys(m.Data); fmt.Sprint(keys) != "[type id timestamp server client subject response]" {
				t.Errorf("%s: keys %v", tc.who, keys)
			}
			var adv struct {
				Server   string          `json:"server"`
				Subject  string          `json:"subject"`
				Response string          `json:"response"`
				Client   json.RawMessage `json:"client"`
			}
			if err := json.Unmarshal(m.Data, &adv); err != nil {
				t.Fatalf("%s: %v: %s", tc.who, err, m.Data)
			}
			if adv.Server != "audsrv" || adv.Subject != tc.subj || adv.Response != string(r.Data) {
				t.Errorf("%s: audit %s for answer %s", tc.who, m.Data, r.Data)
			}
			want := "[start host id acc user name lang ver rtt server kind client_type]"
			if tc.issuer {
				want = "[start host id acc user name lang ver rtt server issuer_key kind client_type]"
			}
			if keys := diffTopKeys(adv.Client); fmt.Sprint(keys) != want {
				t.Errorf("%s: client keys %v, want %s", tc.who, keys, want)
			}
			var c map[string]any
			_ = json.Unmarshal(adv.Client, &c)
			if c["acc"] != tc.acc || c["user"] != tc.user || c["name"] != "auditor" || c["lang"] != "go" ||
				c["ver"] != nats.Version || c["host"] != "127.0.0.1" || c["server"] != "audsrv" ||
				c["kind"] != "Client" || c["client_type"] != "nats" || (tc.issuer && c["issuer_key"] != tc.acc) {
				t.Errorf("%s: client %s", tc.who, adv.Client)
			}
			nc.Close()
		}
		// Each account heard its own requests only.
		for _, sub := range []*nats.Subscription{advA, advB} {
			if m, err := sub.NextMsg(200 * time.Millisecond); err == nil {
				t.Errorf("extra audit %s", m.Data)
			}
		}
	})
}
