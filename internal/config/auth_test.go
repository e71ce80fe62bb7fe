package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// The authorization block reaches Auth as nats-server v2.15.2 reads it
// (server/opts.go parseAuthorization, parseUsers, parseUserPermissions).
func TestAuthorizationBlock(t *testing.T) {
	c, _ := mustLoad(t, `
authorization {
  timeout: 0.5
  default_permissions { publish: "pub.>", subscribe: { deny: ["secret.>", "> *.prod"] } }
  users = [
    { user: alice, password: "$2a$11$abcdefghijklmnopqrstuuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZa" }
    { user: bob, pass: b, permissions: { pub: { allow: ["a", "b.*"], deny: "b.x" }, allow_responses: { max: 3, expires: "5s" } } }
    { nkey: UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4, allowed_connection_types: ["standard", "Websocket"] }
    { user: carol, password: c, permissions: { publish: { allow: [] }, allow_responses: true } }
  ]
}
no_auth_user: bob
`)
	a := c.Auth
	if a.Timeout != 500*time.Millisecond || a.NoAuthUser != "bob" || len(a.Users) != 4 {
		t.Fatalf("auth %+v", a)
	}
	def := &Permissions{Publish: &SubjectPermission{Allow: []string{"pub.>"}}, Subscribe: &SubjectPermission{Deny: []string{"secret.>", "> *.prod"}}}
	if !reflect.DeepEqual(a.Users[0].Permissions, def) || !reflect.DeepEqual(a.Users[2].Permissions, def) {
		t.Errorf("default permissions not applied: %+v %+v", a.Users[0].Permissions, a.Users[2].Permissions)
	}
	bob := a.Users[1].Permissions
	want := &Permissions{
		Publish:  &SubjectPermission{Allow: []string{"a", "b.*"}, Deny: []string{"b.x"}},
		Response: &ResponsePermission{MaxMsgs: 3, Expires: 5 * time.Second},
	}
	if !reflect.DeepEqual(bob, want) {
		t.Errorf("bob %+v %+v", bob.Publish, bob.Response)
	}
	if got := a.Users[2].ConnectionTypes; !reflect.DeepEqual(got, []string{"STANDARD", "WEBSOCKET"}) || a.Users[2].ID() != a.Users[2].Nkey {
		t.Errorf("nkey user %+v", a.Users[2])
	}
	carol := a.Users[3].Permissions
	if carol.Publish.Allow == nil || len(carol.Publish.Allow) != 0 || *carol.Response != (ResponsePermission{MaxMsgs: 1, Expires: 2 * time.Minute}) {
		t.Errorf("carol %+v %+v", carol.Publish, carol.Response)
	}
	if !a.Required() {
		t.Error("users configured but auth not required")
	}
	if err := c.Validate(); err != nil {
		t.Error(err)
	}
}

// allow_responses alone turns the blanket publish allow off: only replies
// may be published (nats-server parseUserPermissions).
func TestAllowResponsesDeniesOtherPublishes(t *testing.T) {
	c, _ := mustLoad(t, "authorization { users: [ { user: u, password: p, permissions: { allow_responses: true } } ] }")
	p := c.Auth.Users[0].Permissions
	if p.Publish == nil || p.Publish.Allow == nil || len(p.Publish.Allow) != 0 {
		t.Fatalf("publish %+v", p.Publish)
	}
}

func TestAuthorizationErrors(t *testing.T) {
	cases := []struct{ text, want string }{
		{"authorization { token: t, user: a }", `F:1:0: Cannot have a user/pass and token`},
		{"authorization { user: a, users: [ {user: b} ] }", `F:1:0: Can not have a single user/pass and a users array`},
		{"authorization { token: t, users: [ {user: b} ] }", `F:1:0: Can not have a token and a users array`},
		{"authorization { users: [ {user: b}, {user: b} ] }", `F:1:0: Duplicate user "b" detected`},
		{"authorization { users: 5 }", `F:1:16: Expected users field to be an array, got 5`},
		{"authorization { users: [ 5 ] }", `F:1:25: Expected user entry to be a map/struct, got 5`},
		{"authorization { users: [ {password: x} ] }", `F:1:38: User entry requires a user`},
		{"authorization { users: [ {nkey: UABC} ] }", `F:1:37: Not a valid public nkey for a user`},
		{"authorization { users: [ {nkey: UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4, user: x} ] }", `F:1:98: Nkey users do not take usernames or passwords`},
		{"authorization { users: [ {user: a, colour: red} ] }", `F:1:35: unknown field "colour"`},
		{"authorization { colour: red }", `F:1:16: unknown field "colour"`},
		{"authorization { users: [ {user: a, permissions: 5} ] }", `F:1:35: Expected permissions to be a map/struct, got 5`},
		{"authorization { users: [ {user: a, permissions: {publish: \"a b\"}} ] }", `F:1:49: subject "a b" is not a valid subject`},
		{"authorization { users: [ {user: a, permissions: {subscribe: \"a..b q\"}} ] }", `F:1:49: subject "a..b" is not a valid subject`},
		{"authorization { users: [ {user: a, permissions: {subscribe: \"a q.>.x\"}} ] }", `F:1:49: queue "q.>.x" is not a valid queue`},
		{"authorization { users: [ {user: a, permissions: {publish: {allow: [true, x]}}} ] }", `F:1:67: Subject in permissions array cannot be cast to string`},
		{"authorization { users: [ {user: a, permissions: {publish: {permit: x}}} ] }", `F:1:59: Unknown field name "permit" parsing subject permissions, only 'allow' or 'deny' are permitted`},
		{"authorization { users: [ {user: a, permissions: {write: x}} ] }", `F:1:49: Unknown field "write" parsing permissions`},
		{"authorization { users: [ {user: a, permissions: {allow_responses: {expires: 5}}} ] }", `F:1:67: error parsing expires, not a duration string`},
		{"authorization { users: [ {user: a, permissions: {allow_responses: 5}} ] }", `F:1:49: error parsing response permissions, expected a boolean or a map`},
		{"authorization { users: [ {user: a, allowed_connection_types: [\"carrier pigeon\"]} ] }", `F:1:35: invalid connection types ["CARRIER PIGEON"]`},
		{"authorization { timeout: \"x\" }", `F:1:16: error parsing authorization config, 'timeout' time: invalid duration "x"`},
		{"authorization { auth_callout { issuer: x } }", `F:1:16: field "auth_callout" is not supported by cairn yet`},
		{"authorization: 5", `F:1:0: Expected map to define authorization, got int64`},
	}
	for _, tc := range cases {
		t.Run(tc.text, func(t *testing.T) {
			wantLines(t, problemTexts(t, tc.text), tc.want)
		})
	}
}

// A long timeout is probably an unquoted duration (nats-server's
// warning).
func TestAuthTimeoutWarning(t *testing.T) {
	_, warns := mustLoad(t, "authorization { token: t, timeout: 120 }")
	if len(warns) != 1 || !strings.Contains(warns[0].Msg, `invalid use of field "timeout": timeout of 120 (120.000000 seconds) is high`) {
		t.Fatalf("warnings %v", warns)
	}
}

// no_auth_user must name a configured user (nats-server validateNoAuthUser,
// at start: no position).
func TestNoAuthUserValidated(t *testing.T) {
	for text, want := range map[string]string{
		"no_auth_user: x": `no_auth_user: "x" present, but users/nkeys are not defined`,
		"no_auth_user: x\nauthorization { users: [ {user: y} ] }": `no_auth_user: "x" not present as user or nkey in authorization block or account configuration`,
	} {
		c, _ := mustLoad(t, text)
		if err := c.Validate(); err == nil || err.Error() != want {
			t.Errorf("%q: %v, want %s", text, err, want)
		}
	}
}
