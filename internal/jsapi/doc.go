// Package jsapi serves the JetStream JSON API, the $JS.API subjects of
// nats-server v2.15.2's JetStream API (ADR-1), on top of the engine in internal/jetstream. It is
// level 4 of docs/design-jetstream.md: it knows the subjects, the request
// and response JSON and the order of nats-server's checks, and nothing of
// connections. nats-server v2.15.2 is the reference for every byte a
// client sees; the comments that say "nats-server v2.15.2" record what
// that server was seen to send.
//
// # Flow
//
//  1. New subscribes to the API subjects through the jetstream.Transport
//     (apiSubjects: everything under $JS.API except
//     $JS.API.CONSUMER.MSG.NEXT and $JS.API.DIRECT, which belong to
//     consumers and streams and must give no-responders when those are
//     missing, and the system-account META, SERVER and ACCOUNT subjects,
//     which a clustered server's system account serves through System,
//     system.go).
//  2. The subscription handler runs on the publisher's read loop: it copies
//     subject, reply, header and body into a request and pushes it onto a
//     bounded queue without blocking. A full queue drops the request and
//     logs a warning (nats-server also drops, and sends an advisory).
//  3. A few worker goroutines take requests in turn, find the endpoint by
//     the tokens after $JS.API (route.go), run its handler and publish
//     exactly one JSON response to the reply subject, or none when the
//     request had no reply subject (the action still runs), then, while
//     someone listens, the request's audit advisory on
//     $JS.EVENT.ADVISORY.API (audit.go).
//  4. Close unsubscribes and stops the workers; requests still queued are
//     dropped.
//
// # Responses
//
// Every response is a JSON object whose first key is "type"
// (io.nats.jetstream.api.v1.<endpoint>_response). A failure adds "error"
// ({code, err_code, description} from internal/jserr) and leaves out the
// success fields, except those nats-server always writes (paging keys,
// "purged", the pause fields). Request bodies are decoded leniently:
// unknown keys are ignored, where nats-server (strict by default) answers
// 10025; malformed JSON gives 10025 "invalid JSON: <detail>" with
// nats-server's detail text.
//
// The API level this package advertises is 4 (APILevel): per-message
// TTLs and subject delete markers, atomic and fast batch publishing. A
// request whose Nats-Required-Api-Level header asks for more,
// or is not a number, gets 10185. The server must give the engine the same
// level and the advertised version (jetstream.Config.APILevel and
// Version), which it reports in the _nats.level and _nats.ver metadata of
// stream configs.
//
// testdata/golden.txt holds requests recorded against nats-server v2.15.2
// with its answers; TestGolden replays them against cairn.
package jsapi
