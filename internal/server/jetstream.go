package server

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"

	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/jsapi"
)

// jsTransport lets JetStream subscribe and publish inside this server.
type jsTransport struct{ s *Server }

func (t jsTransport) Subscribe(subj, queue string, h jetstream.MsgHandler) (jetstream.Subscription, error) {
	return t.s.SubscribeInternal(subj, queue, MsgHandler(h))
}

func (t jsTransport) Publish(subj, reply string, hdr, data []byte) bool {
	return t.s.Publish(subj, reply, hdr, data)
}

func (t jsTransport) PublishAs(match, subj, reply string, hdr, data []byte) bool {
	return t.s.PublishAs(match, subj, reply, hdr, data)
}

func (t jsTransport) HasInterest(subj string) bool { return t.s.HasInterest(subj) }

// defaultStoreDir is where JetStream keeps its data without -sd, as
// nats-server v2.15.2 does (the system temporary directory).
func defaultStoreDir() string { return filepath.Join(os.TempDir(), "nats") }

// startJetStream restores the streams under the store directory and
// starts the $JS.API layer (docs/design-jetstream.md).
func (s *Server) startJetStream() error {
	dir := s.opts.StoreDir
	if dir == "" {
		dir = defaultStoreDir()
		s.log.Warnf("JetStream store directory not set (-sd); using %s", dir)
	}
	tr := jsTransport{s}
	cfg := jetstream.Config{
		StoreDir:   dir,
		FS:         s.opts.JetStreamFS,
		ServerName: s.opts.ServerName,
		Version:    NATSVersion,
		APILevel:   jsapi.APILevel,
		Logf:       s.log.Warnf,
		Infof:      s.log.Noticef,
	}
	if d := s.opts.AckBeforeSyncInterval; d > 0 {
		cfg.AckBeforeSyncInterval = d
		s.log.Warnf("JetStream acknowledges file stream messages before they are synced (ack_before_sync_interval %v): a power loss can lose up to %v of acknowledged messages", d, d)
	}
	s.storageLimits(&cfg)
	js, err := jetstream.New(cfg, tr)
	if err != nil {
		return fmt.Errorf("server: start JetStream: %w", err)
	}
	api, err := jsapi.New(js, tr, jsapi.Options{Logf: s.log.Warnf})
	if err != nil {
		js.Shutdown()
		return fmt.Errorf("server: start the JetStream API: %w", err)
	}
	s.js, s.jsAPI = js, api
	mem, file := js.StorageLimits()
	s.log.Noticef("Starting JetStream")
	s.log.Noticef("  Max Memory:      %s", friendlyBytes(mem))
	s.log.Noticef("  Max Storage:     %s", friendlyBytes(file))
	s.log.Noticef("  Store Directory: %q", filepath.Join(dir, "jetstream"))
	return nil
}

// storageLimits sets the JetStream storage limits from the options: bytes
// and NoStorage are used as they are, 0 is sized from the machine
// (Options.MaxMemoryStore).
func (s *Server) storageLimits(cfg *jetstream.Config) {
	switch mem := s.opts.MaxMemoryStore; {
	case mem > 0:
		cfg.MaxMemory = mem
	case mem < 0:
		cfg.MaxMemory = jetstream.NoStorage
	default:
		cfg.MaxMemory = defaultMaxMemory()
	}
	switch file := s.opts.MaxFileStore; {
	case file > 0:
		cfg.MaxStore = file
	case file < 0:
		cfg.MaxStore = jetstream.NoStorage
	default:
		cfg.MaxStoreFromDisk = true
	}
}

// maxMemoryFallback is the memory limit when the machine's memory is
// unknown: nats-server v2.15.2 JetStreamMaxMemDefault (256 MiB).
const maxMemoryFallback = 256 << 20

// defaultMaxMemory returns the memory storage limit nats-server v2.15.2
// sets when max_memory_store is unset (dynJetStreamConfig): three
// quarters of the machine's memory, or of GOMEMLIMIT when that is lower;
// 256 MiB when the memory is unknown.
func defaultMaxMemory() int64 {
	mem := systemMemory()
	if mem <= 0 {
		return maxMemoryFallback
	}
	if gml := debug.SetMemoryLimit(-1); gml != math.MaxInt64 && gml < mem {
		mem = gml
	}
	return mem / 4 * 3
}

// friendlyBytes formats a byte count as nats-server v2.15.2 logs its
// JetStream limits (friendlyBytes: powers of 1024, two decimals);
// "unlimited" for -1.
func friendlyBytes(n int64) string {
	if n < 0 {
		return "unlimited"
	}
	f := float64(n)
	if f < 1024 {
		return fmt.Sprintf("%v B", f)
	}
	exp := int(math.Log(f) / math.Log(1024))
	return fmt.Sprintf("%.2f %sB", f/math.Pow(1024, float64(exp)), "KMGTPE"[exp-1:exp])
}

// stopJetStream stops the API, then the streams: publishes already queued
// are still stored and acknowledged while clients are connected.
func (s *Server) stopJetStream() {
	s.jsStop.Do(func() {
		if s.jsAPI != nil {
			s.jsAPI.Close()
		}
		if s.js != nil {
			s.js.Shutdown()
		}
	})
}

// JetStream returns the JetStream engine, or nil when JetStream is off or
// the server has not started.
func (s *Server) JetStream() *jetstream.JetStream { return s.js }

// JSAPIStats returns the counters of the $JS.API: the responses sent and
// the error responses among them (nats-server's api.total and
// api.errors); zeros when JetStream is off.
func (s *Server) JSAPIStats() (total, errors uint64) {
	if s.jsAPI == nil {
		return 0, 0
	}
	return s.jsAPI.Stats()
}

// Options returns the options the server was started with, defaults
// filled in; the limits a reload changed are in Limits.
func (s *Server) Options() Options { return s.opts }

// Limits returns the limits in force.
func (s *Server) Limits() Limits { return Limits(*s.limits()) }
