package server

import (
	"fmt"
	"os"
	"path/filepath"

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

func (t jsTransport) PublishAs(route, subj, reply string, hdr, data []byte) bool {
	return t.s.PublishAs(route, subj, reply, hdr, data)
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
		MaxMemory:  s.opts.MaxMemoryStore,
		MaxStore:   s.opts.MaxFileStore,
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
	s.log.Noticef("Starting JetStream")
	s.log.Noticef("  Store Directory: %q", filepath.Join(dir, "jetstream"))
	return nil
}

// stopJetStream stops the API, then the streams: publishes already queued
// are still stored and acknowledged while clients are connected.
func (s *Server) stopJetStream() {
	if s.jsAPI != nil {
		s.jsAPI.Close()
	}
	if s.js != nil {
		s.js.Shutdown()
	}
}
