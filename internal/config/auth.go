package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nkeys"
)

// Auth is who may connect and what each may do (docs/security.md): the
// authorization block, no_auth_user, and the users of the accounts block,
// as nats-server v2.15.2 reads them (server/opts.go parseAuthorization,
// parseUsers, parseUserPermissions). The flags --user, --pass and --auth
// set User, Password and Token.
//
// Slices and pointers in Auth are never modified once Load or the flags
// have set them, so a Config that shares them with its Clone stays a
// value.
type Auth struct {
	// Token is the one token every client must send (auth_token); a
	// value that looks like a bcrypt hash ("$2a$10$...") is compared with
	// bcrypt.
	Token string `key:"authorization.token"`
	// User and Password are the one user every client must send, when
	// Users is empty. Password may be a bcrypt hash.
	User     string `key:"authorization.user"`
	Password string `key:"authorization.password"`
	// Timeout is how long a client may take to send its CONNECT once it
	// has the INFO (authorization.timeout); 0 is nats-server's default,
	// 2 s.
	Timeout time.Duration `key:"authorization.timeout"`
	// Users are the users of the authorization block and of the accounts,
	// each with a password or an nkey. A user of an account names it in
	// Account; the others belong to the global account $G.
	Users []User `key:"authorization.users"`
	// NoAuthUser is the user, of Users, that a client sending no
	// credentials becomes (no_auth_user).
	NoAuthUser string `key:"no_auth_user"`
	// Accounts are the accounts of the accounts block (accounts.go).
	Accounts []Account `key:"accounts"`
	// Block reports that the file has an authorization block, even an
	// empty one: nats-server v2.15.2 then gives no implicit no_auth_user
	// to a configuration whose only account is the system account
	// (SystemAccountOnly).
	Block bool `key:"authorization"`
	// NoSystemAccount is no_system_account (no_system, no_sys_acc): no
	// default system account $SYS (SystemAccountName).
	NoSystemAccount bool `key:"no_system_account"`
}

// User is one user of the authorization block or of an account: a name
// and password, or an nkey (a public user key starting with U) whose
// owner proves itself by signing the server's nonce.
type User struct {
	Name     string // user, username; "" for an nkey user
	Password string // pass, password; may be a bcrypt hash
	Nkey     string // nkey: a public user nkey, for an nkey user
	Account  string // the account the user belongs to; "" is the global account $G
	// Permissions restrict what the user may publish and subscribe to; nil
	// allows everything.
	Permissions *Permissions
	// ConnectionTypes, when not empty, are the only connection types the
	// user may use (allowed_connection_types, upper case: STANDARD,
	// WEBSOCKET, LEAFNODE, LEAFNODE_WS, MQTT, MQTT_WS, IN_PROCESS). cairn's
	// clients are all STANDARD.
	ConnectionTypes []string
}

// ID is the name a user is looked up by: its name or its nkey.
func (u *User) ID() string {
	if u.Nkey != "" {
		return u.Nkey
	}
	return u.Name
}

// Permissions are what a user may publish and subscribe to
// (docs/security.md, "Permissions").
type Permissions struct {
	Publish   *SubjectPermission // nil: any subject
	Subscribe *SubjectPermission // nil: any subject and queue
	// Response, when set, lets the user publish to the reply subject of a
	// message it received, up to MaxMsgs times within Expires, even where
	// Publish does not allow it (allow_responses).
	Response *ResponsePermission
}

// SubjectPermission is an allow list and a deny list of subjects,
// wildcards allowed; a subscribe entry may name a queue group after a
// space ("foo.* workers"). A subject is allowed when Allow is nil or
// matches it, and no Deny entry does: deny beats allow.
type SubjectPermission struct {
	Allow []string // nil: everything; empty and not nil: nothing
	Deny  []string
}

// ResponsePermission is allow_responses: how many replies (MaxMsgs, a
// negative value is unlimited) may be sent to a received reply subject,
// and for how long (Expires, negative is forever).
type ResponsePermission struct {
	MaxMsgs int
	Expires time.Duration
}

// Defaults of allow_responses: true, in nats-server v2.15.2's code
// (DEFAULT_ALLOW_RESPONSE_MAX_MSGS, DEFAULT_ALLOW_RESPONSE_EXPIRATION;
// its documentation says no time limit, its code says two minutes).
const (
	DefaultResponseMaxMsgs = 1
	DefaultResponseExpires = 2 * time.Minute
)

// authKeys are the top-level authentication keys.
var authKeys = keyTable{
	"authorization": authorizationKey,
	"no_auth_user":  func(c *Config, it item, r *report) { setString(&c.Auth.NoAuthUser, it, r) },
}

// authorization is what one authorization block says, before it is
// checked against the rest of the file.
type authorization struct {
	user, pass, token string
	users             []User
	usersSet          bool // a users key, even an empty array
	defaults          *Permissions
}

// authorizationKey reads the top-level authorization block.
func authorizationKey(c *Config, it item, r *report) {
	a, ok := parseAuthorization(c, it, r)
	if !ok {
		return
	}
	c.Auth.User, c.Auth.Password, c.Auth.Token = a.user, a.pass, a.token
	c.Auth.Block = true
	switch {
	case (a.user != "" || a.pass != "") && a.token != "":
		r.errorf(it, "Cannot have a user/pass and token")
		return
	case (a.usersSet || len(c.Auth.Users) > 0) && a.user != "":
		r.errorf(it, "Can not have a single user/pass and a users array")
		return
	case (a.usersSet || len(c.Auth.Users) > 0) && a.token != "":
		r.errorf(it, "Can not have a token and a users array")
		return
	}
	r.addUsers(c, it, a.users)
}

// parseAuthorization reads an authorization block (nats-server
// parseAuthorization). It reports false when the value is not a block.
func parseAuthorization(c *Config, it item, r *report) (*authorization, bool) {
	m, ok := r.mapOf(it, "authorization")
	if !ok {
		return nil, false
	}
	a := &authorization{}
	var tmp Config
	block(&tmp, m, it, keyTable{
		"user":                func(_ *Config, it item, r *report) { setString(&a.user, it, r) },
		"username":            func(_ *Config, it item, r *report) { setString(&a.user, it, r) },
		"pass":                func(_ *Config, it item, r *report) { setString(&a.pass, it, r) },
		"password":            func(_ *Config, it item, r *report) { setString(&a.pass, it, r) },
		"token":               func(_ *Config, it item, r *report) { setString(&a.token, it, r) },
		"timeout":             func(_ *Config, it item, r *report) { authTimeoutKey(c, it, r) },
		"users":               func(_ *Config, it item, r *report) { a.users, a.usersSet = parseUsers(it, r), true },
		"default_permission":  func(_ *Config, it item, r *report) { a.defaults = parsePermissions(it, r) },
		"default_permissions": func(_ *Config, it item, r *report) { a.defaults = parsePermissions(it, r) },
		"permissions":         func(_ *Config, it item, r *report) { a.defaults = parsePermissions(it, r) },
		"auth_callout":        unsupportedYet,
		"auth_hook":           unsupportedYet,
		"proxy_required":      zeroOnlyBool,
	}, r)
	applyDefaultPermissions(a.users, a.defaults)
	return a, true
}

// authTimeoutKey reads authorization.timeout: seconds (an integer or a
// float) or a duration string (nats-server parseAuthorization).
func authTimeoutKey(c *Config, it item, r *report) {
	var secs float64
	switch v := it.val.(type) {
	case int64:
		secs = float64(v)
	case float64:
		secs = v
	case string:
		d, err := time.ParseDuration(v)
		if err != nil {
			r.errorf(it, "error parsing authorization config, 'timeout' %s", err)
			return
		}
		secs = d.Seconds()
	default:
		r.errorf(it, "error parsing authorization config, 'timeout' wrong type")
		return
	}
	if secs > 60 {
		r.invalidUse(it, fmt.Sprintf("timeout of %v (%f seconds) is high, consider keeping it under 60 seconds. possibly caused by unquoted duration; use '1m' instead of 1m, for example", it.val, secs))
	}
	if secs < 0 {
		r.errorf(it, "error parsing authorization config, 'timeout' can not be negative")
		return
	}
	c.Auth.Timeout = time.Duration(secs * float64(time.Second))
}

// applyDefaultPermissions gives the default permissions to the users that
// have none of their own.
func applyDefaultPermissions(users []User, def *Permissions) {
	if def == nil {
		return
	}
	for i := range users {
		if users[i].Permissions == nil {
			users[i].Permissions = def
		}
	}
}

// parseUsers reads a users array (nats-server parseUsers).
func parseUsers(it item, r *report) []User {
	arr, ok := it.val.([]any)
	if !ok {
		r.errorf(it, "Expected users field to be an array, got %v", it.val)
		return nil
	}
	var users []User
	for _, e := range arr {
		ue := unwrap(it.key, e, it)
		m, ok := ue.val.(map[string]any)
		if !ok {
			r.errorf(ue, "Expected user entry to be a map/struct, got %v", ue.val)
			continue
		}
		if u, ok := parseUser(m, ue, r); ok {
			users = append(users, u)
		}
	}
	return users
}

// parseUser reads one entry of a users array.
func parseUser(m map[string]any, parent item, r *report) (User, bool) {
	var u User
	var tmp Config
	block(&tmp, m, parent, keyTable{
		"nkey":                     func(_ *Config, it item, r *report) { setString(&u.Nkey, it, r) },
		"user":                     func(_ *Config, it item, r *report) { setString(&u.Name, it, r) },
		"username":                 func(_ *Config, it item, r *report) { setString(&u.Name, it, r) },
		"pass":                     func(_ *Config, it item, r *report) { setString(&u.Password, it, r) },
		"password":                 func(_ *Config, it item, r *report) { setString(&u.Password, it, r) },
		"permission":               func(_ *Config, it item, r *report) { u.Permissions = parsePermissions(it, r) },
		"permissions":              func(_ *Config, it item, r *report) { u.Permissions = parsePermissions(it, r) },
		"authorization":            func(_ *Config, it item, r *report) { u.Permissions = parsePermissions(it, r) },
		"allowed_connection_types": func(_ *Config, it item, r *report) { u.ConnectionTypes = connectionTypes(it, r) },
		"connection_types":         func(_ *Config, it item, r *report) { u.ConnectionTypes = connectionTypes(it, r) },
		"clients":                  func(_ *Config, it item, r *report) { u.ConnectionTypes = connectionTypes(it, r) },
		"proxy_required":           zeroOnlyBool,
	}, r)
	switch {
	case u.Nkey == "" && u.Name == "":
		r.errorf(parent, "User entry requires a user")
		return u, false
	case u.Nkey != "" && !nkeys.IsValidPublicUserKey(u.Nkey):
		r.errorf(parent, "Not a valid public nkey for a user")
		return u, false
	case u.Nkey != "" && (u.Name != "" || u.Password != ""):
		r.errorf(parent, "Nkey users do not take usernames or passwords")
		return u, false
	}
	return u, true
}

// Connection types a user may be limited to (nats-server v2.15.2
// convertAllowedConnectionTypes, jwt.ConnectionType*).
var knownConnectionTypes = map[string]bool{
	"STANDARD": true, "WEBSOCKET": true, "LEAFNODE": true, "LEAFNODE_WS": true,
	"MQTT": true, "MQTT_WS": true, "IN_PROCESS": true,
}

// ConnectionTypeStandard is the connection type of a plain NATS client,
// the only kind cairn accepts.
const ConnectionTypeStandard = "STANDARD"

// connectionTypes reads allowed_connection_types: a string or an array of
// strings, matched without regard to case.
func connectionTypes(it item, r *report) []string {
	var names []string
	switch v := it.val.(type) {
	case string:
		names = []string{v}
	case []any:
		for _, e := range v {
			ei := unwrap(it.key, e, it)
			s, ok := ei.val.(string)
			if !ok {
				r.errorf(ei, "error parsing allowed connection types: unsupported type in array %T", ei.val)
				continue
			}
			names = append(names, s)
		}
	default:
		r.errorf(it, "error parsing allowed connection types: unsupported type %T", it.val)
		return nil
	}
	var out, unknown []string
	for _, n := range names {
		n = strings.ToUpper(n)
		if knownConnectionTypes[n] {
			out = append(out, n)
		} else {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) > 0 {
		r.errorf(it, "invalid connection types %q", unknown)
	}
	return out
}

// parsePermissions reads a permissions block (nats-server
// parseUserPermissions). It returns nil when the value is not a block.
func parsePermissions(it item, r *report) *Permissions {
	m, ok := it.val.(map[string]any)
	if !ok {
		r.errorf(it, "Expected permissions to be a map/struct, got %+v", it.val)
		return nil
	}
	p := &Permissions{}
	for _, e := range entries(m, it) {
		switch strings.ToLower(e.key) {
		case "pub", "publish", "import":
			p.Publish = parseSubjectPermission(e, r, false)
		case "sub", "subscribe", "export":
			p.Subscribe = parseSubjectPermission(e, r, true)
		case "publish_allow_responses", "allow_responses":
			p.Response = parseAllowResponses(e, r)
		default:
			if !e.usedVar {
				r.errorf(e, "Unknown field %q parsing permissions", e.key)
			}
		}
	}
	if p.Response != nil {
		// allow_responses turns the blanket publish allow off.
		if p.Publish == nil {
			p.Publish = &SubjectPermission{}
		}
		if p.Publish.Allow == nil {
			p.Publish.Allow = []string{}
		}
	}
	return p
}

// parseSubjectPermission reads a publish or subscribe permission: a
// subject, an array of subjects (both an allow list), or a block with
// allow and deny. Subscribe entries may carry a queue group.
func parseSubjectPermission(it item, r *report, allowQueue bool) *SubjectPermission {
	m, ok := it.val.(map[string]any)
	if !ok {
		subjects, ok := permSubjects(it, r, allowQueue)
		if !ok {
			return nil
		}
		return &SubjectPermission{Allow: subjects}
	}
	if len(m) == 0 {
		return nil
	}
	p := &SubjectPermission{}
	for _, e := range entries(m, it) {
		switch strings.ToLower(e.key) {
		case "allow":
			p.Allow, _ = permSubjects(e, r, allowQueue)
		case "deny":
			p.Deny, _ = permSubjects(e, r, allowQueue)
		default:
			if !e.usedVar {
				r.errorf(e, "Unknown field name %q parsing subject permissions, only 'allow' or 'deny' are permitted", e.key)
			}
		}
	}
	return p
}

// permSubjects reads a subject or an array of subjects of a permission
// and checks each (nats-server parsePermSubjects, checkPermSubjectArray).
func permSubjects(it item, r *report, allowQueue bool) ([]string, bool) {
	var subjects []string
	switch v := it.val.(type) {
	case string:
		subjects = []string{v}
	case []any:
		subjects = []string{}
		for _, e := range v {
			ei := unwrap(it.key, e, it)
			s, ok := ei.val.(string)
			if !ok {
				r.errorf(ei, "Subject in permissions array cannot be cast to string")
				return nil, false
			}
			subjects = append(subjects, s)
		}
	default:
		r.errorf(it, "Expected subject permissions to be a subject, or array of subjects, got %T", it.val)
		return nil, false
	}
	if err := CheckPermissionSubjects(subjects, allowQueue); err != nil {
		r.errorf(it, "%v", err)
		return nil, false
	}
	return subjects, true
}

// CheckPermissionSubjects checks the entries of a permission list: each
// is a valid subject or, when allowQueue, a valid subject and a valid
// queue separated by whitespace. The error is nats-server v2.15.2's
// (checkPermSubjectArray).
func CheckPermissionSubjects(list []string, allowQueue bool) error {
	for _, s := range list {
		if validPermSubject(s) {
			continue
		}
		f := strings.Fields(s)
		switch {
		case !allowQueue || len(f) != 2:
			return fmt.Errorf("subject %q is not a valid subject", s)
		case !validPermSubject(f[0]):
			return fmt.Errorf("subject %q is not a valid subject", f[0])
		case !validPermSubject(f[1]):
			return fmt.Errorf("queue %q is not a valid queue", f[1])
		}
	}
	return nil
}

// validPermSubject is nats-server's IsValidSubject: non-empty tokens, no
// whitespace, ">" only last. (The config package imports nothing of
// cairn's, so it does not use internal/subject.)
func validPermSubject(s string) bool {
	if s == "" || strings.ContainsAny(s, " \t\r\n\f") {
		return false
	}
	toks := strings.Split(s, ".")
	for i, t := range toks {
		if t == "" || (t == ">" && i != len(toks)-1) {
			return false
		}
	}
	return true
}

// parseAllowResponses reads allow_responses: true (one response within
// two minutes), false, or a block with max and expires (nats-server
// parseAllowResponses; 0 keeps the default, a negative value is
// unlimited).
func parseAllowResponses(it item, r *report) *ResponsePermission {
	rp := &ResponsePermission{MaxMsgs: DefaultResponseMaxMsgs, Expires: DefaultResponseExpires}
	switch v := it.val.(type) {
	case bool:
		if !v {
			return nil
		}
		return rp
	case map[string]any:
		for _, e := range entries(v, it) {
			switch strings.ToLower(e.key) {
			case "max", "max_msgs", "max_messages", "max_responses":
				if n, ok := r.int64Of(e); ok && n != 0 {
					rp.MaxMsgs = int(n)
				}
			case "expires", "expiration", "ttl":
				s, ok := e.val.(string)
				if !ok {
					r.errorf(e, "error parsing expires, not a duration string")
					return nil
				}
				d, err := time.ParseDuration(s)
				if err != nil {
					r.errorf(e, "error parsing expires: %v", err)
					return nil
				}
				if d != 0 {
					rp.Expires = d
				}
			default:
				if !e.usedVar {
					r.errorf(e, "Unknown field %q parsing permissions", e.key)
				}
			}
		}
		return rp
	}
	r.errorf(it, "error parsing response permissions, expected a boolean or a map")
	return nil
}

// addUsers adds users to the configuration, refusing a name or nkey
// defined twice, here or in an account (nats-server "Duplicate user %q
// detected", "Duplicate nkey %q detected").
func (r *report) addUsers(c *Config, at item, users []User) {
	seen := map[string]bool{}
	for _, u := range c.Auth.Users {
		seen[u.ID()] = true
	}
	for _, u := range users {
		if seen[u.ID()] {
			if u.Nkey != "" {
				r.errorf(at, "Duplicate nkey %q detected", u.Nkey)
			} else {
				r.errorf(at, "Duplicate user %q detected", u.Name)
			}
			return
		}
		seen[u.ID()] = true
	}
	c.Auth.Users = append(c.Auth.Users[:len(c.Auth.Users):len(c.Auth.Users)], users...)
}

// Required reports whether clients must authenticate: a token, a user, or
// users are configured (nats-server configureAuthorization).
func (a *Auth) Required() bool {
	return a.Token != "" || a.User != "" || len(a.Users) > 0
}

// validate checks what depends on several keys or on flags (nats-server
// v2.15.2 validateAuth, validateNoAuthUser); the texts are nats-server's.
func (a *Auth) validate() error {
	if err := a.validateAccounts(); err != nil {
		return err
	}
	if a.NoAuthUser == "" {
		return nil
	}
	if len(a.Users) == 0 {
		return fmt.Errorf(`no_auth_user: "%s" present, but users/nkeys are not defined`, a.NoAuthUser)
	}
	for i := range a.Users {
		if a.Users[i].ID() == a.NoAuthUser {
			return nil
		}
	}
	return fmt.Errorf(`no_auth_user: "%s" not present as user or nkey in authorization block or account configuration`, a.NoAuthUser)
}
