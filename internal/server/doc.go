// Package server is the network edge of cairn: it accepts client
// connections, speaks the NATS client protocol on them
// (docs/protocol.md section 1, as nats-server v2.15.2 does)
// and dispatches published messages to matching subscriptions (dispatch.go).
//
// # Goroutines and ownership
//
//  1. Server.acceptLoop owns the listener. It stops when Shutdown closes it.
//  2. Each client has one read goroutine (client.readLoop). It owns the
//     client's parser, its connect options and its subscription map (the map
//     is also touched by other goroutines when an auto-unsubscribe limit is
//     reached, so it sits under client.mu). It parses, matches subjects in the
//     shared sublist and appends MSG frames to the outbound buffers of the
//     receiving clients. It never blocks on another client's socket.
//  3. Each client has one write goroutine (client.writeLoop). It owns the
//     socket's write side: it swaps the outbound buffer under outbound.mu and
//     writes the bytes with a write deadline.
//  4. A per-client ping timer (time.AfterFunc) sends PINGs and closes stale
//     connections.
//
// Lock order: cluster.infoMu, cluster.mu, Server.mu, pingState.mu,
// client.mu, outbound.mu (CONCURRENCY.md); cluster.mu and Server.mu are
// never held together. No code holds two outbound.mu at once. The sublist
// has its own internal locking and is never called with outbound.mu held.
//
// # Routes
//
// With Options.Cluster, the server also listens for routes from other
// servers and dials the configured ones (cluster.go, route_dial.go). A
// route is a connection kind: a client whose routeConn (routeconn.go)
// speaks the route protocol of internal/route. The peer's interest lives in
// the sublist as subscriptions of the route connection; local interest is
// counted and announced to every route (interest.go); a published message
// goes once to each peer with matching interest, and a message from a peer
// goes to local subscribers only (forward.go, dispatch.go). docs/routes.md
// describes the behaviour.
//
// # Flow control
//
// A reader appends to a receiver's outbound buffer and, once per read
// batch, wakes the receiver's writer. If a receiver's pending bytes exceed
// Options.MaxPending, or a socket write exceeds Options.WriteDeadline, the
// receiver is a slow consumer and is closed without an -ERR (docs/protocol.md
// 1.10), so no client's memory grows without bound because it stops reading.
package server
