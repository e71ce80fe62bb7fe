package consumer

import (
	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/subject"
)

// Limitable reports whether c counts towards the stream's max_consumers
// and the workqueue rules: every consumer except nats-server's internal
// direct and sourcing ones (nats-server numLimitableConsumers and
// partitionUnique).
func (c *Config) Limitable() bool { return !c.Direct && !c.Sourcing }

// CheckWorkQueue makes nats-server v2.15.2's checks for a new consumer cfg
// on a workqueue stream (nats-server v2.15.2's retention policies; consumer.go
// addConsumerWithAssignment), in its order, after Validate and after the
// caller's max_consumers check (10026). others are the stream's other
// consumers. It returns
//
//   - 10098 unless the ack policy is explicit (or flow_control);
//   - 10101 unless the deliver policy is all;
//   - 10099 when cfg has no filter and another limitable consumer exists;
//   - 10100 when a filter of cfg overlaps a filter of another limitable
//     consumer, or another one has no filter.
//
// A direct or sourcing cfg passes. Call it only for workqueue streams;
// a consumer that already exists takes CheckWorkQueueUpdate instead.
func CheckWorkQueue(cfg *Config, others []*Config) *jserr.Error {
	if !cfg.Limitable() {
		return nil
	}
	if cfg.AckPolicy != AckExplicit && cfg.AckPolicy != AckFlowControl {
		return jserr.New(jserr.ConsumerWQRequiresExplicitAck)
	}
	if cfg.DeliverPolicy != DeliverAll {
		return jserr.New(jserr.ConsumerWQConsumerNotDeliverAll)
	}
	if !anyLimitable(others) {
		return nil
	}
	if len(cfg.Filters()) == 0 {
		return jserr.New(jserr.ConsumerWQMultipleUnfiltered)
	}
	return CheckWorkQueueUpdate(cfg, others)
}

// CheckWorkQueueUpdate makes the one workqueue check nats-server v2.15.2
// applies when a create or update request names a consumer that exists
// (consumer.go partitionUnique): 10100 when a filter of cfg overlaps a
// filter of another limitable consumer in others, or another one has no
// filter. An unfiltered cfg passes, as in nats-server, even beside other
// consumers.
func CheckWorkQueueUpdate(cfg *Config, others []*Config) *jserr.Error {
	for _, f := range cfg.Filters() {
		for _, o := range others {
			if o.Limitable() && !disjoint(f, o.Filters()) {
				return jserr.New(jserr.ConsumerWQConsumerNotUnique)
			}
		}
	}
	return nil
}

func anyLimitable(cfgs []*Config) bool {
	for _, c := range cfgs {
		if c.Limitable() {
			return true
		}
	}
	return false
}

// disjoint reports whether no subject matches both f and one of filters;
// no filters means every subject.
func disjoint(f string, filters []string) bool {
	if len(filters) == 0 {
		return false
	}
	for _, g := range filters {
		if subject.Overlap(f, g) {
			return false
		}
	}
	return true
}
