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

// waitForSignal blocks until SIGINT or SIGTERM, logging the signal as
// nats-server does. SIGHUP (nats-server: reload the config) is logged and
// ignored, since cairn has no config file yet; SIGUSR1 reopens the log
// file (nats-server: log rotation).
func waitForSignal(log *logger.Logger, reopen func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGUSR1)
	defer signal.Stop(ch)
	for sig := range ch {
		switch sig {
		case syscall.SIGHUP:
			log.Warnf("Trapped %q signal: configuration reload is not supported yet; ignored", sig)
		case syscall.SIGUSR1:
			reopen()
			log.Noticef("Trapped %q signal: log file reopened", sig)
		default:
			log.Noticef("Trapped %q signal", sig)
			return
		}
	}
}

// run parses args, starts the server, waits for wait to return, then shuts
// down. It returns the process exit code: 0 after a clean shutdown, 1 when
// the server cannot start, 2 for bad flags.
func run(args []string, stdout, stderr io.Writer, wait waitFunc) int {
	cfg, err := parseFlags(args, stdout, stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case err != nil:
		return 2
	case cfg.showVersion:
		fmt.Fprintf(stdout, "cairn v%s (NATS protocol compatible with nats-server %s)\n", server.Version, server.NATSVersion)
		return 0
	}
	lf, err := openLog(cfg, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "cairn: %v\n", err)
		return 1
	}
	defer lf.close()
	return serve(cfg, lf, wait)
}

// waitFunc blocks until the server should stop; reopen reopens the log.
type waitFunc func(log *logger.Logger, reopen func())

func serve(cfg config, lf *logFile, wait waitFunc) int {
	log := lf.log
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
	wait(log, lf.reopen)
	srv.Shutdown()
	return 0
}

func warnUnimplemented(cfg config, log *logger.Logger) {
	if cfg.httpPort != 0 {
		log.Warnf("Monitoring is not implemented yet; -m %d is accepted and ignored", cfg.httpPort)
	}
}

// logFile is the server's log destination: stderr, or a file that
// SIGUSR1 reopens (for log rotation).
type logFile struct {
	log  *logger.Logger
	path string
	f    *os.File
}

func openLog(cfg config, stderr io.Writer) (*logFile, error) {
	if cfg.logFile == "" {
		return &logFile{log: logger.New(stderr, cfg.debug, cfg.trace)}, nil
	}
	f, err := openLogFile(cfg.logFile)
	if err != nil {
		return nil, err
	}
	return &logFile{log: logger.New(f, cfg.debug, cfg.trace), path: cfg.logFile, f: f}, nil
}

func openLogFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("open log file: %w", err)
	}
	return f, nil
}

// reopen switches to a freshly opened file at the same path; on error it
// keeps the old one and says so.
func (l *logFile) reopen() {
	if l.f == nil {
		return
	}
	f, err := openLogFile(l.path)
	if err != nil {
		l.log.Errorf("%v", err)
		return
	}
	old := l.f
	l.f = f
	l.log.SetOutput(f)
	_ = old.Close()
}

func (l *logFile) close() {
	if l.f != nil {
		_ = l.f.Close()
	}
}
