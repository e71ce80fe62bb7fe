// Package auth decides who a client is and what it may do, as nats-server
// v2.15.2 decides it for a configuration file's users (docs/security.md):
//
//   - Directory (users.go) authenticates a CONNECT's credentials against a
//     token, a single user, or a table of users (plain or bcrypt
//     passwords) and nkey users (an Ed25519 signature of the nonce the
//     server sent in INFO, checked with github.com/nats-io/nkeys), with
//     the no_auth_user for clients that send none. It returns the User:
//     its account and its compiled permissions.
//   - Perms (perms.go) are a user's publish and subscribe permissions:
//     allow and deny lists with wildcards and queue entries, deny beating
//     allow, checked at PUB and SUB, and at delivery for subscriptions
//     that overlap a deny entry; and the allow_responses limits.
//
// The package knows nothing of connections: the server calls it from a
// client's read loop and keeps any per-connection state (the publish
// cache, the replies a client may answer) itself. Everything here is
// immutable once built and safe for concurrent use. Secrets (passwords,
// tokens) are held only to be compared, in constant time or with bcrypt,
// and are never formatted into an error or a log line.
package auth
