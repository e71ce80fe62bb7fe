package config

import (
	"reflect"
	"testing"
)

// The accounts block reaches Auth as nats-server v2.15.2 reads it: users
// with their account (and the account's default permissions), JetStream
// limits, exports and imports.
func TestAccountsBlock(t *testing.T) {
	c, _ := mustLoad(t, `
accounts {
  A {
    users = [ { user: a1, password: p }, { user: a2, password: p, permissions: { publish: "x" } } ]
    default_permissions { subscribe: "a.>" }
    jetstream { max_memory: 1MB, max_file: 1GB, max_streams: 10, max_consumers: 5 }
    exports = [
      { stream: "events.>" }
      { service: "help", response_type: stream, accounts: [B] }
    ]
  }
  B {
    users = [ { user: b1, password: p } ]
    jetstream: enabled
    imports = [
      { stream: { account: A, subject: "events.>" }, prefix: from_a }
      { service: { account: A, subject: help }, to: ask }
    ]
  }
  C: {}
}
authorization { users = [ { user: g, password: p } ] }
`)
	a := c.Auth
	if len(a.Accounts) != 3 || len(a.Users) != 4 {
		t.Fatalf("accounts %+v users %+v", a.Accounts, a.Users)
	}
	byName := map[string]User{}
	for _, u := range a.Users {
		byName[u.Name] = u
	}
	if byName["a1"].Account != "A" || byName["b1"].Account != "B" || byName["g"].Account != "" {
		t.Errorf("user accounts %+v", byName)
	}
	if !reflect.DeepEqual(byName["a1"].Permissions, &Permissions{Subscribe: &SubjectPermission{Allow: []string{"a.>"}}}) ||
		byName["a2"].Permissions.Subscribe != nil {
		t.Errorf("default permissions %+v %+v", byName["a1"].Permissions, byName["a2"].Permissions)
	}
	A, B := a.Account("A"), a.Account("B")
	if js := A.JetStream; js == nil || js.MaxMemory != 1<<20 || js.MaxStore != 1<<30 || js.MaxStreams != 10 || js.MaxConsumers != 5 || js.MaxAckPending != -1 {
		t.Errorf("A jetstream %+v", A.JetStream)
	}
	if js := B.JetStream; js == nil || js.MaxStreams != -1 || a.Account("C").JetStream != nil {
		t.Errorf("B, C jetstream %+v %+v", B.JetStream, a.Account("C"))
	}
	wantEx := []Export{{Subject: "events.>"}, {Subject: "help", Service: true, Accounts: []string{"B"}, ResponseType: "stream"}}
	if !reflect.DeepEqual(A.Exports, wantEx) {
		t.Errorf("exports %+v", A.Exports)
	}
	if len(B.Imports) != 2 || B.Imports[0].LocalSubject() != "from_a.events.>" || B.Imports[1].LocalSubject() != "ask" || !B.Imports[1].Service {
		t.Errorf("imports %+v", B.Imports)
	}
	if err := c.Validate(); err != nil {
		t.Error(err)
	}
}

// An account's limits block: each key and its alias, -1 for a key not
// given, max_leafnodes accepted (nats-server v2.15.2 parseAccountLimits).
func TestAccountLimits(t *testing.T) {
	c, _ := mustLoad(t, "max_subs: 7\naccounts { A { limits { max_conn: 3, max_pay: 100, max_leafs: 2 } }, B { limits { max_connections: 0, max_subscriptions: 4, max_payload: 5 } }, C {} }")
	if c.Limits.MaxSubs != 7 {
		t.Errorf("max_subs %d", c.Limits.MaxSubs)
	}
	want := map[string]*AccountLimits{"A": {3, NoLimit, 100}, "B": {0, 4, 5}, "C": nil}
	for _, a := range c.Auth.Accounts {
		w, ok := want[a.Name]
		if !ok {
			continue
		}
		if (w == nil) != (a.Limits == nil) || (w != nil && *w != *a.Limits) {
			t.Errorf("account %s limits %+v, want %+v", a.Name, a.Limits, w)
		}
	}
}

// Message tracing settings (nats-server v2.15.2 opts.go): allow_trace on
// a service export and a stream import, and an account's msg_trace or
// trace_dest in each form, a destination alone sampling 100%, a sampling
// alone dropped with a warning, and the two keys adding up (E).
func TestAccountsMsgTrace(t *testing.T) {
	c, warns := mustLoad(t, `
accounts {
  A {
    exports = [ { service: svc, allow_trace: true }, { service: other }, { stream: "s.>" } ]
    msg_trace: "a.trace"
  }
  B {
    imports = [
      { stream: { account: A, subject: "s.>" }, prefix: p, allow_trace: true }
      { service: { account: A, subject: svc } }
    ]
    msg_trace { dest: b.trace, sampling: "25%" }
  }
  C { trace_dest { dest: c.trace, sampling: 40 } }
  D { msg_trace { sampling: 10 } }
  E { trace_dest { sampling: 10 }, msg_trace: e.trace }
}
`)
	A, B := c.Auth.Account("A"), c.Auth.Account("B")
	if !A.Exports[0].AllowTrace || A.Exports[1].AllowTrace || A.Exports[2].AllowTrace {
		t.Errorf("exports %+v", A.Exports)
	}
	if !B.Imports[0].AllowTrace || B.Imports[1].AllowTrace {
		t.Errorf("imports %+v", B.Imports)
	}
	want := map[string]*MsgTrace{"A": {"a.trace", 100}, "B": {"b.trace", 25}, "C": {"c.trace", 40}, "D": nil, "E": {"e.trace", 10}}
	for name, w := range want {
		if got := c.Auth.Account(name).Trace; !reflect.DeepEqual(got, w) {
			t.Errorf("account %s trace %+v, want %+v", name, got, w)
		}
	}
	if len(warns) != 1 || warns[0].Msg != "Trace destination sampling ignored since no destination was set" || warns[0].Line != 15 {
		t.Errorf("warnings %v", warns)
	}
}

func TestAccountsErrors(t *testing.T) {
	const exp = "A { exports = [ { stream: \"pub.>\" }, { service: svc, accounts: [B] } ] }\n"
	const mexp = "A { exports = [ { service: \"x.>\" }, { stream: \"s.*.*\" } ] }\n"
	cases := []struct{ text, want string }{
		{"accounts { A: 5 }", `F:1:11: Expected map entries for accounts`},
		{"accounts [ A, A ]", `F:1:14: Duplicate Account Entry: A`},
		{"accounts { A { users: [ {user: x} ] }, B { users: [ {user: x} ] } }", `F:1:43: Duplicate user "x" detected`},
		{"accounts { A { colour: red } }", `F:1:15: unknown field "colour"`},
		{"accounts { A { jetstream: maybe } }", `F:1:15: Expected 'enabled' or 'disabled' for string value, got 'maybe'`},
		{"accounts { A { jetstream: { max_streams: x } } }", `F:1:28: Expected a parseable size for "max_streams", got x`},
		{"accounts { A { imports = [ { stream: { account: B, subject: x } } ] } }", `F:1:0: "B" account not defined for stream import`},
		{"accounts { " + exp + " B { imports = [ { stream: { account: A, subject: \"other\" } } ] } }", `F:1:0: Error adding stream import "other": stream import not authorized`},
		{"accounts { " + exp + " C { imports = [ { service: { account: A, subject: svc } } ] }, B {} }", `F:1:0: Error adding service import "svc": service import not authorized`},
		{"accounts { " + exp + " B { imports = [ { stream: { account: A, subject: \"pub.x\" }, prefix: \"a.*\" } ] } }", `F:1:0: Error adding stream import "pub.x": stream import prefix can not contain wildcard tokens`},
		{"accounts { " + exp + " B { imports = [ { stream: { account: A, subject: \"pub.x\" }, prefix: p, to: q } ] } }", `F:2:80: Stream import can not have a 'prefix' and a 'to' property`},
		{"accounts { A { exports = [ { stream: s, response_type: single } ] } }", `F:1:63: Detected response directive on non-service`},
		{"accounts { A { exports = [ { service: s, response_type: many } ] } }", `F:1:41: Unknown response type: "many"`},
		{"accounts { " + mexp + " B { imports = [ { service: { account: A, subject: \"x.>\" }, to: \"y.*\" } ] } }",
			`F:1:0: Error adding service import "x.>": failed to create mapping transform for service import subject from "y.*" to "x.>": invalid subject`},
		{"accounts { " + mexp + " B { imports = [ { stream: { account: A, subject: \"s.*.*\" }, to: \"t.*\" } ] } }",
			`F:1:0: Error adding stream import "s.*.*": failed to create mapping transform for stream import subject from "s.*.*" to "t.*": invalid mapping destination: not using all of the token wildcard(s) in t.$1`},
		{"accounts { A { exports = [{stream: x}], imports = [{stream: {account: B, subject: x}}] }, B { exports = [{stream: x}], imports = [{stream: {account: A, subject: x}}] } }", `F:1:0: Error adding stream import "x": import forms a cycle`},
		{"accounts { \"../x\" {} }", `F:1:12: account name "../x" cannot be used: it names a directory of the JetStream store`},
		{"accounts { A { limits: 5 } }", `F:1:15: Expected account limits to be a map/struct, got 5`},
		{"accounts { A { limits: { max_conn: 1, foo: 2 } } }", `F:1:38: Unknown field "foo" parsing account limits`},
		{"accounts { A { limits: { max_subs: x } } }", `F:1:25: interface conversion: interface {} is string, not int64`},
		{"accounts { A { mappings: { a: b } } }", `F:1:15: field "mappings" is not supported by cairn yet`},
		{"accounts { A { exports = [ { stream: s, allow_trace: true } ] } }", `F:1:40: Detected allow_trace directive on non-service`},
		{"accounts { A { exports = [ { service: s, allow_trace: maybe } ] } }", `F:1:41: interface conversion: interface {} is string, not bool`},
		{"accounts { " + exp + " B { imports = [ { service: { account: A, subject: svc }, allow_trace: true } ] } }", `F:2:59: Detected allow_trace directive on a non-stream`},
		{"accounts { A { msg_trace: { dest: \"a b\" } } }", `F:1:28: Trace destination "a b" is not valid`},
		{"accounts { A { msg_trace: { dest: \"a.*\" } } }", `F:1:28: Trace destination "a.*" is not valid`},
		{"accounts { A { msg_trace: { dest: 5 } } }", `F:1:28: Field "dest" should be a string, got int64`},
		{"accounts { A { msg_trace: { dest: x, sampling: 0 } } }", `F:1:37: Ttrace destination sampling value 0 is invalid, needs to be [1..100]`},
		{"accounts { A { msg_trace: { dest: x, sampling: \"150%\" } } }", `F:1:37: Ttrace destination sampling value 150 is invalid, needs to be [1..100]`},
		{"accounts { A { msg_trace: { dest: x, sampling: abc } } }", `F:1:37: Invalid trace destination sampling value "abc"`},
		{"accounts { A { msg_trace: { dest: x, sampling: 1.5 } } }", `F:1:37: Trace destination sampling field "sampling" should be an integer or a percentage, got float64`},
		{"accounts { A { msg_trace: { dest: x, foo: 1 } } }", `F:1:37: Unknown field "foo" parsing account message trace map/struct "msg_trace"`},
		{"accounts { A { trace_dest: 5 } }", `F:1:15: Expected account message trace "trace_dest" to be a string or a map/struct, got int64`},
		{"authorization { token: t }\naccounts { A { users: [ {user: x} ] } }", `F:1:0: Can not have a token and a users array`},
		{"accounts { A { users: [ {user: x} ] } }\nauthorization { user: u, password: p }", `F:2:1: Can not have a single user/pass and a users array`},
	}
	for _, tc := range cases {
		t.Run(tc.text, func(t *testing.T) {
			wantLines(t, problemTexts(t, tc.text), tc.want)
		})
	}
}

// The system account is chosen as nats-server v2.15.2 chooses it, and
// system_account no longer warns: it names the account whose users send
// the $SYS requests.
func TestSystemAccount(t *testing.T) {
	for _, tc := range []struct {
		name, text, want string
		only             bool // SystemAccountOnly
	}{
		{"default", "port: 4222", "$SYS", false},
		{"off", "no_system_account: true", "", false},
		{"alias off", "no_sys_acc: true", "", false},
		{"named", "accounts { SYS { users [{user: s, password: p}] } }\nsystem_account: SYS", "SYS", true},
		{"alias", "accounts { SYS { users [{user: s, password: p}] } }\nsystem: SYS", "SYS", true},
		{"named wins over off", "accounts { SYS {} }\nsystem_account: SYS\nno_system_account: true", "SYS", true},
		{"$SYS account", "accounts { \"$SYS\" { users [{user: s, password: p}] } }", "$SYS", true},
		{"other account", "accounts { SYS { users [{user: s, password: p}] } }", "$SYS", false},
		{"two accounts", "accounts { SYS {}, A {} }\nsystem_account: SYS", "SYS", false},
		{"authorization block", "accounts { SYS {} }\nsystem_account: SYS\nauthorization { users [{user: u, password: p}] }", "SYS", false},
		{"empty authorization block", "accounts { SYS {} }\nsystem_account: SYS\nauthorization {}", "SYS", false},
		{"no_auth_user", "accounts { SYS { users [{user: s, password: p}] } }\nsystem_account: SYS\nno_auth_user: s", "SYS", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, warns := mustLoad(t, tc.text)
			if len(warns) != 0 {
				t.Fatalf("warnings %v", warns)
			}
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			if got := SystemAccountName(&c.Auth, &c.Operator); got != tc.want {
				t.Fatalf("system account %q, want %q", got, tc.want)
			}
			if got := SystemAccountOnly(&c.Auth, &c.Operator); got != tc.only {
				t.Fatalf("system account only %v, want %v", got, tc.only)
			}
		})
	}
	for _, tc := range []struct{ text, want string }{
		{"system_account: NOPE", "error resolving system account: account missing"},
		{`system_account: "$SYS"`, "error resolving system account: account missing"},
		{"accounts { SYS { jetstream: enabled } }\nsystem_account: SYS\njetstream: enabled", "Not allowed to enable JetStream on the system account"},
	} {
		c, _ := mustLoad(t, tc.text)
		if err := c.Validate(); err == nil || err.Error() != tc.want {
			t.Errorf("%q: %v, want %q", tc.text, err, tc.want)
		}
	}
	// Without JetStream on the server, the system account's jetstream
	// block does nothing and is not an error.
	c, _ := mustLoad(t, "accounts { SYS { jetstream: enabled } }\nsystem_account: SYS")
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}
