// Package jserr is the catalog of JetStream API errors: the object
// {"code", "err_code", "description"} that a $JS.API response carries in
// its "error" field (docs/protocol.md 2.4; the whole catalog is
// nats-server v2.15.2 server/errors.json).
//
// errors.json is the single source. gen.go turns it into catalog_gen.go:
// one ErrCode constant per entry, named after nats-server's constant
// without the JS prefix and the Err/ErrF/F suffix (JSStreamNotFoundErr is
// StreamNotFound), and the table of HTTP-like codes and description
// templates. Clients match on err_code, so codes are never changed or
// reused; new errors are appended to errors.json.
//
// A description may hold {name} markers, filled in by Sub arguments:
//
//	err := jserr.New(jserr.StreamWrongLastSequence, jserr.Sub("seq", 41))
//	// json.Marshal(err): {"code":400,"err_code":10071,"description":"wrong last sequence: 41"}
//
// Only the edge (jsapi, server) builds these; lower layers return their own
// sentinel errors, which the edge translates (docs/architecture.md rule 4).
package jserr

//go:generate go run gen.go
