package route

// Peer is a server this server has a registered route to, as its route
// INFO describes it: the facts other connections between the two servers
// (the Raft transport, docs/routes.md "The cluster port") need to reach
// it.
type Peer struct {
	// Name is the peer's server_name (its server_id when it has none).
	Name string
	// ID is the peer's server_id.
	ID string
	// Addr is "host:port" of the peer's cluster listener: its INFO ip (the
	// advertised address), or the address the route reached with the
	// port its INFO announced. "" when the INFO gave none usable.
	Addr string
	// LameDuck: the peer announced lame duck mode (a route INFO with ldm
	// true); it is leaving, and a clustered JetStream places nothing on
	// it and hands it no leadership (docs/cluster.md, "Lame duck mode
	// and shutdown"), as nats-server v2.15.2 marks a lame duck server
	// offline.
	LameDuck bool
}
