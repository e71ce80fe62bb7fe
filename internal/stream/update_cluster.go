package stream

import "github.com/cairnmq/cairn/internal/jserr"

// PrepareClusteredUpdate is PrepareUpdate for a clustered JetStream: a
// stream may have replicas (ValidateClustered, where PrepareUpdate's
// Validate refuses num_replicas above 1 with 10074). The errors are
// PrepareUpdate's otherwise: 10157, 10052 and the other validation codes,
// 10056.
func (c *Config) PrepareClusteredUpdate(name string, pedantic bool) *jserr.Error {
	if pedantic {
		if err := c.CheckPedantic(); err != nil {
			return err
		}
	}
	c.SetDefaults()
	if err := c.ValidateClustered(); err != nil {
		return err
	}
	if name != "" && c.Name != name {
		return jserr.New(jserr.StreamMismatch)
	}
	c.SetStaticMetadata()
	return nil
}

// CheckClusteredUpdate is CheckUpdate for a clustered JetStream
// (nats-server v2.15.2 configUpdateCheckLocked, whose single-server
// refusal of replicas does not apply in a cluster): the same checks,
// texts and order, and the seal applied to next, but a change of
// num_replicas passes. Whether the cluster can carry out a change of
// num_replicas (a scale) is the caller's decision, after the checks that
// need the other streams and the consumers, where nats-server makes it.
func CheckClusteredUpdate(old, next *Config) *jserr.Error {
	switch {
	case next.Name != old.Name:
		return invalid("stream configuration name must match original")
	case next.Storage != old.Storage:
		return invalid("stream configuration update can not change storage type")
	case next.Retention != old.Retention && (old.Retention == WorkQueuePolicy || next.Retention == WorkQueuePolicy):
		return invalid("stream configuration update can not change retention policy to/from workqueue")
	}
	return checkUpdateRest(old, next)
}
