package stream

import "github.com/cairnmq/cairn/internal/jserr"

// PrepareCreate readies the config of a STREAM.CREATE request and runs
// every check that needs nothing but the config, in nats-server v2.15.2's
// order (jsStreamCreateRequest, then addStream): the static metadata is
// set; the name must equal name, the stream named by the request
// subject (10056; "" skips this check, for callers without a subject);
// CheckCreate (10128, sealed, mirror_direct); with pedantic,
// CheckPedantic (10157); SetDefaults; Validate. The checks that need the
// other streams or the server (the existing stream, overlaps, limits,
// origins) belong to the engine, which runs them after this. It is the
// one place the API layer's create goes through.
func (c *Config) PrepareCreate(name string, pedantic bool) *jserr.Error {
	return c.prepareCreate(name, pedantic, false)
}

// PrepareClusteredCreate is PrepareCreate for a clustered JetStream: a
// stream may have replicas (ValidateClustered).
func (c *Config) PrepareClusteredCreate(name string, pedantic bool) *jserr.Error {
	return c.prepareCreate(name, pedantic, true)
}

func (c *Config) prepareCreate(name string, pedantic, clustered bool) *jserr.Error {
	c.SetStaticMetadata()
	if name != "" && c.Name != name {
		return jserr.New(jserr.StreamMismatch)
	}
	if err := c.CheckCreate(); err != nil {
		return err
	}
	if pedantic {
		if err := c.CheckPedantic(); err != nil {
			return err
		}
	}
	c.SetDefaults()
	if clustered {
		return c.ValidateClustered()
	}
	return c.Validate()
}

// PrepareRestore readies the config of a STREAM.RESTORE request and runs
// every check that needs nothing but the config, in nats-server
// v2.15.2's order (jsStreamRestoreRequest): CheckCreate (10128, sealed,
// mirror_direct), SetDefaults, Validate. Unlike a create, the config's
// metadata stays as the request gives it: nats-server adds no
// _nats.req.level to a restored stream. The name against the request
// subject is the API layer's check, before this; the checks needing the
// other streams and the server belong to the engine.
func (c *Config) PrepareRestore() *jserr.Error {
	if err := c.CheckCreate(); err != nil {
		return err
	}
	c.SetDefaults()
	return c.Validate()
}

// PrepareUpdate readies the config of a STREAM.UPDATE request and runs
// every check that needs nothing but the config, in nats-server
// v2.15.2's order (jsStreamUpdateRequest): with pedantic, CheckPedantic
// (10157); SetDefaults and Validate (so an empty body gives 10052 before
// the name check); the name must equal name (10056; "" skips it); then
// the static metadata is set. CheckUpdate, against the stream's current
// config, and the checks needing the consumers and the other streams
// belong to the engine, after this.
func (c *Config) PrepareUpdate(name string, pedantic bool) *jserr.Error {
	if pedantic {
		if err := c.CheckPedantic(); err != nil {
			return err
		}
	}
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		return err
	}
	if name != "" && c.Name != name {
		return jserr.New(jserr.StreamMismatch)
	}
	c.SetStaticMetadata()
	return nil
}
