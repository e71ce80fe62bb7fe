package jetstream

import (
	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/stream"
)

// The server's storage limits, max_memory_store and max_file_store
// (nats-server's, jetstream.go checkBytesLimits and limitsExceeded in
// v2.15.2; NoStorage is nats-server's explicit 0, a limit of zero bytes):
//
//   - a stream create or update reserves its max_bytes (1 byte when
//     unlimited) against the limit of its storage type; beyond the limit it
//     is refused with 10028 (memory) or 10047 (file);
//   - a publish to a stream whose storage type already uses more than
//     the limit is refused with 10023 insufficient resources.
//
// Usage is the sum of the streams' stored bytes, refreshed by each
// stream's apply goroutine after every batch it applies.

// storageLimit returns the limit in bytes for storage type st and
// whether there is one (NoStorage is a limit of 0 bytes).
func (js *JetStream) storageLimit(st stream.StorageType) (int64, bool) {
	limit := js.cfg.MaxStore
	if st == stream.MemoryStorage {
		limit = js.cfg.MaxMemory
	}
	return max(limit, 0), limit != 0
}

// checkReservationLocked checks cfg's max_bytes against the limit of its
// storage type, counting every other stream's reservation. The caller
// holds js.mu.
func (js *JetStream) checkReservationLocked(cfg *stream.Config) *jserr.Error {
	limit, limited := js.storageLimit(cfg.Storage)
	if !limited {
		return nil
	}
	var reserved int64
	for name, r := range js.streams {
		if name == cfg.Name {
			continue
		}
		if oc := r.config(); oc.Storage == cfg.Storage && oc.MaxBytes > 0 {
			reserved += oc.MaxBytes
		}
	}
	add := max(cfg.MaxBytes, 1)
	if reserved > limit || add > limit-reserved {
		if cfg.Storage == stream.MemoryStorage {
			return jserr.New(jserr.MemoryResourcesExceeded)
		}
		return jserr.New(jserr.StorageResourcesExceeded)
	}
	return nil
}

// overStorageLimit reports whether the streams of storage type st
// already use more than its limit.
func (js *JetStream) overStorageLimit(st stream.StorageType) bool {
	limit, limited := js.storageLimit(st)
	return limited && js.used[st].Load() > limit
}

// syncUsage adds the change in the stream's stored bytes since the last
// call to the server's usage of its storage type. It runs on the apply
// goroutine, only when a limit is set for that type.
func (r *runner) syncUsage() {
	st := r.storage
	if _, limited := r.js.storageLimit(st); !limited {
		return
	}
	b := int64(r.store.State(false).Bytes)
	r.js.used[st].Add(b - r.usedBytes)
	r.usedBytes = b
}

// releaseUsage removes a stopped stream's bytes from the usage.
func (r *runner) releaseUsage() {
	r.js.used[r.storage].Add(-r.usedBytes)
	r.usedBytes = 0
}
