package jetstream

import (
	"fmt"
	"sort"
	"time"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/store"
)

// This file answers what the monitoring endpoints ask of JetStream
// (internal/monitor: /jsz, /healthz and /metrics): what is stored, which
// streams could not be restored, and whether a stream can still take
// publishes. Nothing here takes a lock of the publish path beyond the
// read locks the $JS.API info requests take.

// StreamProblem is why a stream cannot serve: Kind is "recover" (its
// directory was found at start and not restored), "fenced" (its store
// refuses writes after an I/O error until a restart), "damaged" (its store
// found damaged records, which it will not serve) or "disk" (the disk
// guard refuses publishes to file streams).
type StreamProblem struct {
	Stream string
	Kind   string
	Err    string
}

// fencer is implemented by a store that can tell whether it is fenced
// (the file store).
type fencer interface{ Fenced() error }

// Problems returns every stream that cannot serve as it should, sorted by
// stream name; the disk guard's refusal, when on, comes last with an
// empty Stream. It reads the free space again when due (diskLow).
func (js *JetStream) Problems() []StreamProblem {
	js.mu.Lock()
	var out []StreamProblem
	for name, why := range js.unrestored {
		out = append(out, StreamProblem{Stream: name, Kind: "recover", Err: why})
	}
	entries := js.entriesLocked()
	js.mu.Unlock()
	for _, r := range entries {
		if f, ok := r.Store().(fencer); ok {
			if err := f.Fenced(); err != nil {
				out = append(out, StreamProblem{Stream: r.Name(), Kind: "fenced", Err: err.Error()})
				continue
			}
		}
		if lost := r.Store().State(false).Lost; lost != nil && len(lost.Msgs) > 0 {
			out = append(out, StreamProblem{Stream: r.Name(), Kind: "damaged",
				Err: fmt.Sprintf("%d messages lost or damaged (sequences %d-%d), found and not served; purge them to clear this (nats stream purge --seq %d)", len(lost.Msgs), lost.Msgs[0], lost.Msgs[len(lost.Msgs)-1], lost.Msgs[len(lost.Msgs)-1]+1)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Stream < out[j].Stream })
	if js.DiskLow() {
		out = append(out, StreamProblem{Kind: "disk", Err: fmt.Sprintf(
			"the file system of %s has less free space than the reserve: publishes to file streams are refused", js.cfg.StoreDir)})
	}
	return out
}

// entriesLocked returns the running streams. The caller holds mu.
func (js *JetStream) entriesLocked() []*streamEntry {
	out := make([]*streamEntry, 0, len(js.streams))
	for _, r := range js.streams {
		out = append(out, r)
	}
	return out
}

// DiskLow reports whether the disk guard refuses publishes to file
// streams (streamrun.Storage.DiskLow), reading the free space again when
// due.
func (js *JetStream) DiskLow() bool { return js.storage.DiskLow(0) }

// StoreDir returns the store directory (-sd); the data is in its
// jetstream subdirectory.
func (js *JetStream) StoreDir() string { return js.cfg.StoreDir }

// SyncPolicy reports whether file streams acknowledge only fsynced
// messages (always), or else the ack_before_sync_interval they sync on,
// in nanoseconds.
func (js *JetStream) SyncPolicy() (always bool, interval int64) {
	if d := js.cfg.AckBeforeSyncInterval; d > 0 {
		return false, int64(d)
	}
	return true, 0
}

// DefaultMaxConsumersPerStream is nats-server v2.15.2's default
// jetstream { limits { default_max_consumers } } (JSDefaultMaxConsumersPerStream).
const DefaultMaxConsumersPerStream = 1000

// DefaultMaxConsumers returns the consumers a stream may have when
// neither it nor its account sets a cap (Config.DefaultMaxConsumers):
// 1000 by default, 0 for none.
func (js *JetStream) DefaultMaxConsumers() int {
	switch d := js.cfg.DefaultMaxConsumers; {
	case d == 0:
		return DefaultMaxConsumersPerStream
	case d < 0:
		return 0
	default:
		return d
	}
}

// StreamDetail is one stream for /jsz: its info and, when asked for, its
// consumers' infos sorted by name.
type StreamDetail struct {
	Info      *StreamInfo
	Consumers []*consumer.Info
}

// Details returns every stream's info, sorted by name, with its consumers
// when consumers is set. A stream or consumer deleted meanwhile is left
// out. Its state's consumer count is of the consumers running on this
// server (in a cluster, those with a replica here), as nats-server
// v2.15.2's /jsz reports each stream's and adds them up (its local
// stream's state), not STREAM.INFO's count over the cluster.
func (js *JetStream) Details(consumers bool) []StreamDetail {
	names := js.Names("")
	out := make([]StreamDetail, 0, len(names))
	for _, name := range names {
		r, jerr := js.lookup(name)
		if jerr != nil {
			continue
		}
		si, err := js.StreamInfo(name, InfoOptions{})
		if err != nil {
			continue
		}
		si.State.Consumers = r.numConsumers()
		d := StreamDetail{Info: si}
		if consumers {
			d.Consumers = js.consumerInfos(name)
		}
		out = append(out, d)
	}
	return out
}

func (js *JetStream) consumerInfos(stream string) []*consumer.Info {
	names, err := js.ConsumerNames(stream)
	if err != nil {
		return nil
	}
	sort.Strings(names)
	out := make([]*consumer.Info, 0, len(names))
	for _, n := range names {
		if ci, err := js.ConsumerInfo(stream, n); err == nil {
			out = append(out, ci)
		}
	}
	return out
}

// SyncStats returns the group-commit statistics of the file streams.
func (js *JetStream) SyncStats() *store.SyncStats { return js.cfg.SyncStats }

// OldestUnacked returns, for each consumer of stream that has deliveries
// awaiting an ack, how long the longest-waiting one has waited since it
// was (last) delivered; consumers with none are absent.
func (js *JetStream) OldestUnacked(stream string) map[string]time.Duration {
	r, jerr := js.lookup(stream)
	if jerr != nil {
		return nil
	}
	out := map[string]time.Duration{}
	now := js.now().UnixNano()
	for _, c := range r.cons.list() {
		if oldest, ok := c.OldestPending(); ok {
			out[c.Name()] = time.Duration(max(now-oldest, 0))
		}
	}
	return out
}
