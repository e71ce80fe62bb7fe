package jetstream

import (
	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/stream"
)

// PrepareConsumer runs the checks of CreateConsumer for a consumer of a
// stream whose config is scfg and whose existing consumers' configs are
// existing (by name), without creating or changing anything: the cluster
// layer's meta leader calls it with what its meta group holds, whether or
// not this server runs a replica of the stream, before it proposes the
// consumer's assignment (nats-server v2.15.2 jsClusteredConsumerRequest
// checks against its assignments too; docs/cluster.md, "Replicated
// consumers"). It returns the config to assign (defaults applied, Name
// set from the durable name; still empty for an ephemeral the request
// left unnamed, which the caller names) and whether a consumer of that
// name exists with a config a create would leave as it is. Errors: those
// of CreateConsumer but 10059 (the config's, 10148, 10149, 10012, 10013
// for a deliver subject still in use, 10026, 10099/10100, 10102).
func (js *JetStream) PrepareConsumer(scfg stream.Config, existing map[string]*consumer.Config, cfg consumer.Config, action ConsumerAction, pedantic bool) (consumer.Config, bool, *jserr.Error) {
	cfg.SetStaticMetadata()
	acc := js.consumerLimits()
	if err := cfg.SetDefaultsIn(&scfg, acc, pedantic); err != nil {
		return cfg, false, err
	}
	if err := cfg.ValidateIn(&scfg, acc, false); err != nil {
		return cfg, false, err
	}
	if cfg.Name == "" {
		cfg.Name = cfg.Durable
	}
	others := func(skip string) []*consumer.Config {
		out := make([]*consumer.Config, 0, len(existing))
		for name, c := range existing {
			if name != skip {
				out = append(out, c)
			}
		}
		return out
	}
	if old := existing[cfg.Name]; cfg.Name != "" && old != nil {
		same, err := checkRecreate(&scfg, old, &cfg, action, others(cfg.Name))
		if err == nil && !same && old.DeliverSubject != cfg.DeliverSubject && old.DeliverSubject != "" && js.tr.HasInterest(old.DeliverSubject) {
			err = jserr.New(jserr.ConsumerNameExist)
		}
		cfg.SetEphemeralThreshold()
		return cfg, same, err
	}
	if action == UpdateOnly {
		return cfg, false, jserr.New(jserr.ConsumerDoesNotExist)
	}
	if err := js.checkNew(&scfg, &cfg, others("")); err != nil {
		return cfg, false, err
	}
	cfg.SetEphemeralThreshold()
	return cfg, false, nil
}

// checkRecreate runs recreate's checks of a create of an existing
// consumer whose config is old (of a stream whose config is scfg, with
// the other consumers others): same reports a create that changes
// nothing.
func checkRecreate(scfg *stream.Config, old, cfg *consumer.Config, action ConsumerAction, others []*consumer.Config) (same bool, err *jserr.Error) {
	if action == CreateOnly {
		if !cfg.EqualForCreate(old) {
			return false, jserr.New(jserr.ConsumerAlreadyExists)
		}
		return true, nil
	}
	if scfg.Retention == stream.WorkQueuePolicy {
		if err := consumer.CheckWorkQueueUpdate(cfg, others); err != nil {
			return false, err
		}
	}
	if err := consumer.CheckUpdate(old, cfg); err != nil {
		return false, err
	}
	cfg.PauseUntil = old.PauseUntil
	return cfg.EqualForCreate(old), nil
}

// ConsumerLeads reports whether this server's consumer name of the
// stream delivers: it exists and, for a replicated consumer, leads with
// its subscriptions in place (consumerrun.Consumer.Leading).
func (js *JetStream) ConsumerLeads(streamName, name string) bool {
	c, jerr := js.lookupConsumer(streamName, name)
	return jerr == nil && c.Leading()
}

// HasInterest reports whether anything subscribes to subj, here or on a
// route (the engine's transport).
func (js *JetStream) HasInterest(subj string) bool { return js.tr.HasInterest(subj) }
