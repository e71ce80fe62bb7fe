package stream

import (
	"encoding/json"

	"github.com/cairnmq/cairn/internal/jserr"
)

// CheckUpdate decides whether a stream whose config is old may take the
// config next, with nats-server v2.15.2's rules, texts and order
// (nats-server v2.15.2 configUpdateCheck, what an update may change; server/stream.go configUpdateCheckLocked).
// Both configs must have passed SetDefaults and Validate. The errors are
// 10052 (name, storage, retention to or from workqueue, unsealing,
// cancelling deny_delete or deny_purge, disabling TTLs or schedules,
// changing counters or the persist mode), 10074 for replicas and 10055
// for a changed mirror (removing it is allowed). Checks that need the
// consumers (10069) or the other streams (10065) belong to the caller.
//
// When it returns nil and next seals the stream, CheckUpdate applies the
// seal to next as nats-server does: max_age 0, discard new, deny_delete
// and deny_purge true, allow_rollup_hdrs false.
func CheckUpdate(old, next *Config) *jserr.Error {
	if err := checkUpdateIdentity(old, next); err != nil {
		return err
	}
	return checkUpdateRest(old, next)
}

// checkUpdateRest runs the checks after the identity's in nats-server's
// order and applies the seal (CheckUpdate).
func checkUpdateRest(old, next *Config) *jserr.Error {
	for _, check := range updateChecks {
		if err := check(old, next); err != nil {
			return err
		}
	}
	if next.Sealed {
		next.MaxAge = 0
		next.Discard = DiscardNew
		next.DenyDelete, next.DenyPurge = true, true
		next.AllowRollup = false
	}
	return nil
}

// updateChecks are CheckUpdate's checks after the identity's, in
// nats-server's order.
var updateChecks = []func(old, next *Config) *jserr.Error{
	checkUpdateFlags,
	checkUpdateMirror,
	checkUpdateFeatures,
}

// checkUpdateIdentity: name, replicas, storage and retention.
func checkUpdateIdentity(old, next *Config) *jserr.Error {
	switch {
	case next.Name != old.Name:
		return invalid("stream configuration name must match original")
	case next.Replicas > 1:
		return jserr.New(jserr.StreamReplicasNotSupported)
	case next.Storage != old.Storage:
		return invalid("stream configuration update can not change storage type")
	case next.Retention != old.Retention && (old.Retention == WorkQueuePolicy || next.Retention == WorkQueuePolicy):
		return invalid("stream configuration update can not change retention policy to/from workqueue")
	}
	return nil
}

// checkUpdateFlags: the flags that may only go from false to true.
func checkUpdateFlags(old, next *Config) *jserr.Error {
	switch {
	case old.Sealed && !next.Sealed:
		return invalid("stream configuration update can not unseal a sealed stream")
	case old.DenyDelete && !next.DenyDelete:
		return invalid("stream configuration update can not cancel deny message deletes")
	case old.DenyPurge && !next.DenyPurge:
		return invalid("stream configuration update can not cancel deny purge")
	}
	return nil
}

// checkUpdateMirror refuses a changed mirror; removing it promotes the
// mirror to a normal stream.
func checkUpdateMirror(old, next *Config) *jserr.Error {
	if next.Mirror == nil {
		return nil
	}
	if old.Mirror == nil || !sameJSON(old.Mirror, next.Mirror) {
		return jserr.New(jserr.StreamMirrorNotUpdatable)
	}
	return nil
}

// checkUpdateFeatures: discard new per subject (as in Validate), TTLs,
// counters, schedules and the persist mode.
func checkUpdateFeatures(old, next *Config) *jserr.Error {
	switch {
	case next.DiscardNewPerSubject && next.Discard != DiscardNew:
		return invalid("discard new per subject requires discard new policy to be set")
	case next.DiscardNewPerSubject && next.MaxMsgsPerSubject <= 0:
		return invalid("discard new per subject requires max msgs per subject > 0")
	case old.AllowMsgTTL && !next.AllowMsgTTL:
		return invalid("message TTL status can not be disabled")
	case old.AllowMsgCounter != next.AllowMsgCounter:
		return invalid("stream configuration update can not change message counter setting")
	case old.AllowMsgSchedules && !next.AllowMsgSchedules:
		return invalid("message schedules can not be disabled")
	case old.PersistMode != next.PersistMode:
		return invalid("stream configuration update can not change persist mode")
	}
	return nil
}

// sameJSON reports whether a and b encode to the same JSON.
func sameJSON(a, b any) bool {
	x, errX := json.Marshal(a)
	y, errY := json.Marshal(b)
	return errX == nil && errY == nil && string(x) == string(y)
}
