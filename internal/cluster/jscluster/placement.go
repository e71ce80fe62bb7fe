package jscluster

import (
	"math/rand/v2"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/stream"
)

// placeRequest returns the meta.PlaceRequest for replicas replicas of a
// stream with placement p (nil: none): in p's cluster, or this server's
// when p names none (nats-server v2.15.2 places in the requester's
// cluster, which is this one: cairn has no gateways); with p's tags and
// this server's jetstream { unique_tag }; the servers this server has no
// route to ranked last (offline); a fresh seed. The caller adds
// Existing and Exclude (docs/cluster.md, "The meta group" (placement)). st is the
// meta state of the caller's meta.Log.View (offlineIn).
func (c *Cluster) placeRequest(st *meta.State, replicas int, p *stream.Placement) meta.PlaceRequest {
	pr := meta.PlaceRequest{Replicas: replicas, Cluster: c.host.ClusterName(), UniqueTag: c.cfg.UniqueTag,
		Seed: rand.Uint64(), Offline: c.offlineIn(st)}
	if p != nil {
		pr.Tags = p.Tags
		if p.Cluster != "" {
			pr.Cluster = p.Cluster
		}
	}
	return pr
}
