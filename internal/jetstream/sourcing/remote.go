package sourcing

// Remote sourcing (docs/cluster.md, "Sourcing in a cluster"). In a
// clustered JetStream the origin of a mirror or source (of the same
// account, without `external` or `consumer`) may have no replica on the
// server where the sourcing stream leads. The sourcer then reads it as
// nats-server v2.15.2 reads every origin (setupMirrorConsumer,
// trySetupSourceConsumer): through a consumer of its own created on the
// origin with $JS.API.CONSUMER.CREATE, the exchange of an external
// sourcer (external.go, docs/external-sourcing.md) with the account's own
// API prefix and deliver subjects $JS.M.<random> / $JS.S.<random>. The
// cluster routes the requests to the meta leader and the deliveries,
// heartbeats and flow control between the origin's server and this one.
//
// Only the replica that leads the sourcing stream runs the exchange
// (lead.go), and it finds where copying starts from the stream's state once its log's
// committed operations are applied (streamrun.Stream.SyncLog): a mirror
// after its last sequence, a source after the origin sequence of its last
// copy (its Nats-Stream-Source header). A replica that stops leading
// deletes its consumer; the next leader creates one from its own state.
// A consumer whose server dies goes with it (an ephemeral): its
// heartbeats stop, and after 10 s without them the sourcer creates a new
// one from its position, as nats-server's health check does.

// runRemote sources from an origin with no replica on this server
// through the origin's consumer API, while the stream leads here
// (runLeading). It returns true when a replica of the origin runs here
// (the sourcer then reads its store), false once the sourcer stops.
func (s *sourcer) runRemote() bool {
	d := &durableRun{s: s, in: &inbox{sig: make(chan struct{}, 1)}, remote: true}
	return s.runLeading(d, d.setupExternal)
}
