// Package transport carries raftnode frames between the servers of a
// cluster over dedicated TCP connections on the cluster port, next to the
// routes (docs/cluster.md, "The transport"; docs/routes.md, "The cluster
// port"). It implements raftnode.Transport: Send never blocks on the
// network, it queues the frame for the peer's writer or fails at once.
//
// A raftnode.ServerID is the server name (-n, server_name). A server learns
// where a peer listens from its registered route to that peer (the route
// INFO's ip, or the address the route reached with the INFO's port; see
// Host.ClusterPeers), so the transport dials only servers the cluster has
// already admitted, and admits on its port only servers whose name belongs
// to a registered route.
//
// # Connections
//
// Each connection carries frames one way: every server dials its own
// connection to each peer and only writes on it, and only reads on the
// connections it accepted. There are no dial races to settle and no
// duplicate connections to choose between; a peer that dials again (its
// side broke) replaces its previous accepted connection.
//
// # Wire format
//
// When the cluster block has tls, the connection starts with a TLS
// handshake in which each side verifies the other's certificate, as a
// route's does (docs/routes.md, "TLS"; Host.SecureClusterConn on the
// dialing side, the server's cluster port on the accepting side), and
// everything below travels inside TLS. Then the accepting server speaks
// first, as it does to every connection on the cluster port (its route
// INFO); then the dialing server sends its hello, the accepting server
// admits or refuses it, and frames follow:
//
//	dialer                                          acceptor (cluster port)
//	  | ---------------- TCP connect -----------------> |
//	  | <======= TLS handshake (with cluster tls) ====> |  both certificates verified
//	  | <-------- INFO {route info}\r\n ---------------- |  server_name must be the peer dialed
//	  | -------- RAFT {hello}\r\n ---------------------> |  within 2 s (the cluster port's rule)
//	  | <-------- +OK\r\n  or  -ERR '<text>'\r\n ------- |  -ERR: closed
//	  | -------- frame, frame, ... --------------------> |  until either side closes
//
//	hello:  {"v":1,"name":"<dialer's server name>","cluster":"<cluster name>",
//	         "user":"<user>","pass":"<password>"}
//	        v        the transport version, 1; another is refused
//	        name     the dialer's server name: its raftnode.ServerID
//	        cluster  the dialer's cluster name; another is refused
//	        user, pass  the cluster credentials, present when the acceptor's
//	                 INFO says auth_required (omitted otherwise)
//	        inc, tags   the dialer's store incarnation (32 hexadecimal digits)
//	                 and server_tags
//	        known    {"<server>":"<incarnation>",...}: the incarnation the
//	                 dialer's catalogue knows each server by (omitted when
//	                 empty); a server restarted on a wiped store learns from
//	                 it that the cluster knew it under another store
//	        meta, members  whether the dialer runs the meta group, and the
//	                 servers its routes name (Config.Meta, Config.Members)
//	        level    the dialer's build's feature level (FeatureLevel;
//	                 absent from builds before levels)
//
//	frame:  | length (u32, little endian) | raftnode frame (length bytes) |
//	        length   1 .. MaxFrameBytes (64 MiB); 0, or more than that, closes
//	                 the connection (Send refuses such a frame). raftnode
//	                 splits a round's messages into frames within it and
//	                 proposes no entry larger than it less 150 bytes
//	                 (raftnode.DefaultMaxEntryBytes)
//
// The raftnode frame carries its own CRC (raftnode package comment,
// "Frames"); a frame whose CRC fails closes the connection too, since a
// damaged length would leave every later frame misaligned. The dialer
// reconnects; Raft recovers the frames lost on the way.
//
// # Admission
//
// The acceptor refuses, with -ERR and close, a hello that does not parse or
// names another version ('Unsupported Raft Transport Version'), another
// cluster ('Cluster Name Mismatch'), wrong credentials when the cluster
// block has authorization { user, password } ('Authorization Violation',
// checked with the server's route rule, Host.ClusterAuthOK), or a name that
// is this server's own or belongs to no registered route ('Unknown Raft
// Peer'). So a stranger reaching the cluster port cannot inject frames
// under a member's name without the cluster credentials, the same bar a
// route must clear; without credentials configured, anyone who can reach
// the cluster port can form a route, and the transport is no weaker. The
// source address is not compared with the route's (NAT and advertised
// addresses make it differ legitimately). With the cluster block's tls, a
// peer must also pass the TLS handshake with a certificate the cluster
// trusts before it can send a hello, and no frame crosses the network in
// clear.
//
// # Sending
//
// Each peer has a bounded queue (MaxQueueBytes, 64 MiB) and one writer
// goroutine that dials, writes the queued frames through a buffered writer
// and flushes when the queue is empty, so the frames of one round leave in
// few writes (TCP_NODELAY is set). Send fails at once with ErrUnknownPeer
// when no route names the peer and no connection to it is up, with
// ErrUnreachable while the last dial failed (nothing is queued for a peer
// that cannot be reached: raftnode treats the error as the peer being
// unreachable and retries later), and with ErrQueueFull when the queue is
// full. A connection that breaks is dialed again at once, then with a
// backoff of 50 ms doubling to 2 s, with jitter. A route to the peer that
// registers with a new address, or a new server_id (the peer restarted: a
// connection still up goes to a process that is gone, and is closed),
// makes the writer dial at once. A liveness-only frame is not queued
// behind another one still waiting.
package transport
