package monitor

// clusterHealth adds to h what keeps this server's part of a JetStream
// cluster from being healthy (server.Server.JetStreamClusterHealth), as
// nats-server v2.15.2's healthz reports its meta layer and its assets:
// the meta group's problem ends the check (also with details); with
// js-meta-only nothing else is checked; the replicas of streams and
// consumers follow, those of the account, stream and consumer the
// options name when they name one, the first ending the check unless
// details were asked for. It reports whether the check ends here.
func (m *Monitor) clusterHealth(h *health, o healthzOptions) (done bool) {
	for _, p := range m.srv.JetStreamClusterHealth() {
		switch {
		case p.Kind == "meta":
			h.fail("JETSTREAM", "", "", "", p.Text)
			return true
		case o.jsMetaOnly:
			return true
		case o.account != "" && p.Account != o.account,
			o.stream != "" && p.Stream != o.stream,
			o.consumer != "" && p.Consumer != o.consumer:
			continue
		}
		typ := "STREAM"
		if p.Kind == "consumer" {
			typ = "CONSUMER"
		}
		h.fail(typ, p.Account, p.Stream, p.Consumer, p.Text)
		if !h.details {
			return true
		}
	}
	return o.jsMetaOnly
}
