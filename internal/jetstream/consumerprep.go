package jetstream

import (
	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/stream"
)

// PrepareConsumer runs the checks of CreateConsumer against this
// server's replica of the stream without creating or changing anything,
// and returns the config to create (defaults applied, Name set) and
// whether a consumer of that name exists here with a config a create
// would leave as it is. The cluster layer's meta leader calls it before
// it proposes a replicated consumer's assignment (docs/clustering.md,
// "Replicated consumers"). Errors: those of CreateConsumer (10059, the
// config's, 10148, 10149, 10012, 10026, 10099/10100, 10102).
func (js *JetStream) PrepareConsumer(streamName string, cfg consumer.Config, action ConsumerAction, pedantic bool) (consumer.Config, bool, *jserr.Error) {
	r, jerr := js.lookup(streamName)
	if jerr != nil {
		return cfg, false, jerr
	}
	scfg := r.Config()
	cfg.SetStaticMetadata()
	if err := cfg.SetDefaults(&scfg, pedantic); err != nil {
		return cfg, false, err
	}
	if err := cfg.Validate(&scfg, false); err != nil {
		return cfg, false, err
	}
	if cfg.Name == "" {
		cfg.Name = cfg.Durable
	}
	r.cons.mu.Lock()
	defer r.cons.mu.Unlock()
	if c := r.cons.byName[cfg.Name]; c != nil {
		old := c.Config()
		same, err := r.checkRecreateLocked(&old, &cfg, action)
		cfg.SetEphemeralThreshold()
		return cfg, same, err
	}
	if action == UpdateOnly {
		return cfg, false, jserr.New(jserr.ConsumerDoesNotExist)
	}
	if err := r.checkNewLocked(&scfg, &cfg); err != nil {
		return cfg, false, err
	}
	cfg.SetEphemeralThreshold()
	return cfg, false, nil
}

// checkRecreateLocked runs recreate's checks of a create of an existing
// consumer whose config is old: same reports a create that changes
// nothing. The caller holds r.cons.mu.
func (r *streamEntry) checkRecreateLocked(old, cfg *consumer.Config, action ConsumerAction) (same bool, err *jserr.Error) {
	if action == CreateOnly {
		if !cfg.EqualForCreate(old) {
			return false, jserr.New(jserr.ConsumerAlreadyExists)
		}
		return true, nil
	}
	if r.Config().Retention == stream.WorkQueuePolicy {
		if err := consumer.CheckWorkQueueUpdate(cfg, r.consumerConfigsLocked(cfg.Name)); err != nil {
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
