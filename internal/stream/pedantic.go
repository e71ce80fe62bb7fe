package stream

import (
	"errors"
	"time"

	"github.com/cairnmq/cairn/internal/jserr"
)

// pedanticError returns error 10157 "pedantic mode: <text>"
// (nats-server NewJSPedanticError).
func pedanticError(text string) *jserr.Error {
	return jserr.New(jserr.Pedantic, jserr.Sub("err", errors.New(text)))
}

// CheckPedantic runs, on a config as the client sent it (before
// SetDefaults), the checks of a create or update request with
// "pedantic": true (nats-server v2.15.2 STREAM.CREATE, jsStreamCreateRequest): where SetDefaults would
// silently fix a value, pedantic mode refuses the request instead. It
// returns, in nats-server v2.15.2 checkStreamCfgLocked's order:
//
//   - the name, size, enumeration and replicas errors that nats-server
//     reports before its first pedantic check (10052, 10133), so that a
//     request with both kinds of problem gets the same error;
//   - 10157 "max_msgs must be set to -1" (and likewise max_msgs_per_subject,
//     max_bytes, max_msg_size, max_consumers) for a value below -1;
//   - 10052 for a negative or too short max_age (reported before the
//     duplicate window, as nats-server does);
//   - 10157 "duplicate window cannot be bigger than max age" when no
//     duplicate_window is set and max_age is below the 2 minute default
//     (not for mirrors and sourced streams, which get no window);
//   - 10052 "subject delete marker cannot be set if message TTLs are
//     disabled" / "... if roll-ups are disabled" when
//     subject_delete_marker_ttl is set without allow_msg_ttl /
//     allow_rollup_hdrs (nats-server uses 10052 here, not 10157);
//   - 10052 "message scheduling cannot be set if roll-ups are disabled"
//     for allow_msg_schedules without allow_rollup_hdrs;
//   - 10157 "republish source can not be empty", and 10157 "implicit
//     republish based on subject transform" for a ">" to ">" republish
//     that nats-server would rewrite to the transform's destination.
//
// nil means pedantic mode has nothing to refuse; the caller then goes on
// with SetDefaults and Validate as without pedantic.
func (c *Config) CheckPedantic() *jserr.Error {
	d := *c
	if d.Replicas == 0 {
		d.Replicas = 1
	}
	for _, check := range pedanticPrefix {
		if err := check(&d); err != nil {
			return err
		}
	}
	for _, check := range pedanticChecks {
		if err := check(c); err != nil {
			return err
		}
	}
	return nil
}

// pedanticPrefix are the checks nats-server makes before its first
// pedantic check.
var pedanticPrefix = []func(*Config) *jserr.Error{
	(*Config).checkName,
	(*Config).checkSizes,
	(*Config).checkEnums,
	(*Config).checkReplicas,
}

// pedanticChecks are the pedantic refusals, in nats-server's order.
var pedanticChecks = []func(*Config) *jserr.Error{
	(*Config).pedanticLimits,
	(*Config).pedanticWindow,
	(*Config).pedanticMarkers,
	(*Config).pedanticSchedules,
	(*Config).pedanticRePublish,
}

func (c *Config) pedanticLimits() *jserr.Error {
	for _, f := range []struct {
		v    int64
		name string
	}{
		{c.MaxMsgs, "max_msgs"},
		{c.MaxMsgsPerSubject, "max_msgs_per_subject"},
		{c.MaxBytes, "max_bytes"},
		{int64(c.MaxMsgSize), "max_msg_size"},
		{int64(c.MaxConsumers), "max_consumers"},
	} {
		if f.v < -1 {
			return pedanticError(f.name + " must be set to -1")
		}
	}
	return nil
}

func (c *Config) pedanticWindow() *jserr.Error {
	switch {
	case c.MaxAge < 0:
		return invalid("max age can not be negative")
	case c.MaxAge != 0 && c.MaxAge < minWindow:
		return invalid("max age needs to be >= 100ms")
	}
	sourced := c.Mirror != nil || len(c.Sources) > 0
	if c.DuplicateWindow == 0 && !sourced && c.MaxAge != 0 && c.MaxAge < DefaultDuplicateWindow {
		return pedanticError("duplicate window cannot be bigger than max age")
	}
	return nil
}

func (c *Config) pedanticMarkers() *jserr.Error {
	if c.SubjectDeleteMarkerTTL <= 0 {
		return nil
	}
	// The checks nats-server makes before these, in checkFlags' order.
	if err := c.checkWindows(); err != nil {
		return err
	}
	switch {
	case c.DenyPurge && c.AllowRollup:
		return invalid("roll-ups require the purge permission")
	case c.SubjectDeleteMarkerTTL < time.Second:
		return nil // Validate reports it
	case !c.AllowMsgTTL:
		return invalid("subject delete marker cannot be set if message TTLs are disabled")
	case !c.AllowRollup:
		return invalid("subject delete marker cannot be set if roll-ups are disabled")
	}
	return nil
}

// pedanticSchedules refuses message schedules without roll-ups, after the
// checks nats-server makes before it (checkFlags' order, on a copy: it
// would turn roll-ups on).
func (c *Config) pedanticSchedules() *jserr.Error {
	if !c.AllowMsgSchedules || c.AllowRollup {
		return nil
	}
	if err := c.checkWindows(); err != nil {
		return err
	}
	d := *c
	d.AllowMsgSchedules = false
	if err := d.checkFlags(); err != nil {
		return err
	}
	if c.Discard == DiscardNew {
		return invalid("message scheduling cannot use discard new")
	}
	return invalid("message scheduling cannot be set if roll-ups are disabled")
}

func (c *Config) pedanticRePublish() *jserr.Error {
	rp := c.RePublish
	switch {
	case rp == nil:
		return nil
	case rp.Source == "":
		return pedanticError("republish source can not be empty")
	case rp.Source == ">" && rp.Destination == ">" && c.SubjectTransform != nil &&
		len(c.Subjects) == 1 && c.SubjectTransform.Source == c.Subjects[0]:
		return pedanticError("implicit republish based on subject transform")
	}
	return nil
}
