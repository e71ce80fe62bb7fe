package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/cairnmq/cairn/internal/config"
)

// signalsByCommand are the commands of --signal and the signals they send
// (nats-server v2.15.2 server/signal.go ProcessSignal).
var signalsByCommand = map[string]syscall.Signal{
	"stop":   syscall.SIGKILL,
	"quit":   syscall.SIGINT,
	"term":   syscall.SIGTERM,
	"reopen": syscall.SIGUSR1,
	"reload": syscall.SIGHUP,
	"ldm":    syscall.SIGUSR2,
}

// sendSignal carries out --signal <command>[=<pid>]: it sends the
// command's signal to the process whose PID is given, or read from the
// given PID file, or else from the pid_file of the configuration (-c or
// -P). nats-server also finds a running nats-server by name when no PID
// is given; cairn needs one. It returns the exit code: 0 once the signal
// is sent, 1 otherwise, with the reason on stderr.
func sendSignal(arg string, cfg *config.Config, stderr io.Writer) int {
	cmd, target, _ := strings.Cut(arg, "=")
	sig, ok := signalsByCommand[cmd]
	if !ok {
		fmt.Fprintf(stderr, "cairn: unknown signal %q\n", cmd)
		return 1
	}
	if target == "" && cfg != nil {
		target = cfg.Process.PidFile
	}
	if target == "" {
		fmt.Fprintf(stderr, "cairn: --signal needs a PID or a PID file: --signal %s=<pid or pid file>\n", cmd)
		return 1
	}
	pid, err := resolvePid(target)
	if err == nil {
		err = syscall.Kill(pid, sig)
	}
	if err != nil {
		fmt.Fprintf(stderr, "cairn: %v\n", err)
		return 1
	}
	return 0
}

// resolvePid reads target as a PID, or else as a file holding one.
func resolvePid(target string) (int, error) {
	if pid, err := strconv.Atoi(target); err == nil {
		if pid <= 0 { // kill(2) would signal a process group, or every process
			return 0, fmt.Errorf("invalid pid: %s", target)
		}
		return pid, nil
	}
	data, err := os.ReadFile(target)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("invalid pid: %s", strings.TrimSpace(string(data)))
	}
	return pid, nil
}
