// Command cairn runs the cairn messaging server. It accepts nats-server's
// common command-line flags with the same meaning (DESIGN.md section 1),
// so a harness that starts one can start the other.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/cairnmq/cairn/internal/logger"
	"github.com/cairnmq/cairn/internal/server"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, waitForSignal))
}

// waitForSignal blocks until SIGINT or SIGTERM.
func waitForSignal() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	<-ch
	signal.Stop(ch)
}

// run parses args, starts the server, waits for wait to return, then shuts
// down. It returns the process exit code: 0 after a clean shutdown, 1 when
// the server cannot start, 2 for bad flags.
func run(args []string, stdout, stderr io.Writer, wait func()) int {
	cfg, err := parseFlags(args, stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case err != nil:
		return 2
	case cfg.showVersion:
		fmt.Fprintf(stdout, "cairn v%s (NATS protocol compatible with nats-server %s)\n", server.Version, server.NATSVersion)
		return 0
	}
	log, closeLog, err := openLog(cfg, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "cairn: %v\n", err)
		return 1
	}
	defer closeLog()
	return serve(cfg, log, wait)
}

func serve(cfg config, log *logger.Logger, wait func()) int {
	cfg.opts.Logger = log
	srv, err := server.New(cfg.opts)
	if err != nil {
		log.Fatalf("%v", err)
		return 1
	}
	log.Noticef("Starting cairn v%s (nats-server %s protocol)", server.Version, server.NATSVersion)
	warnUnimplemented(cfg, log)
	if cfg.profPort > 0 {
		stop, err := startProfiler(cfg.profPort, log)
		if err != nil {
			log.Fatalf("profiling port: %v", err)
			return 1
		}
		defer stop()
	}
	if err := srv.Start(); err != nil {
		log.Fatalf("%v", err)
		return 1
	}
	wait()
	srv.Shutdown()
	return 0
}

func warnUnimplemented(cfg config, log *logger.Logger) {
	if cfg.opts.JetStream {
		log.Warnf("JetStream is not implemented yet; -js is accepted and ignored (store directory %q)", cfg.opts.StoreDir)
	}
	if cfg.httpPort != 0 {
		log.Warnf("Monitoring is not implemented yet; -m %d is accepted and ignored", cfg.httpPort)
	}
}

func openLog(cfg config, stderr io.Writer) (*logger.Logger, func(), error) {
	if cfg.logFile == "" {
		return logger.New(stderr, cfg.debug, cfg.trace), func() {}, nil
	}
	f, err := os.OpenFile(cfg.logFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return nil, nil, fmt.Errorf("open log file: %w", err)
	}
	return logger.New(f, cfg.debug, cfg.trace), func() { _ = f.Close() }, nil
}
