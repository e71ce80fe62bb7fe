package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/cairnmq/cairn/internal/server"
)

// config is what the command line asked for.
type config struct {
	opts        server.Options
	httpPort    int
	profPort    int
	configFile  string
	logFile     string
	debug       bool
	trace       bool
	showVersion bool
}

const usage = `Usage: cairn [options]

Server Options:
    -a, --addr, --net <host>         Bind to host address (default: 0.0.0.0)
    -p, --port <port>                Use port for clients (default: 4222; -1 for a random port)
    -n, --name, --server_name <name> Server name (default: the server id)
    -m, --http_port <port>           HTTP monitoring port (accepted; monitoring is not implemented yet)
        --profile <port>             Serve Go pprof profiles on 127.0.0.1:<port> (as nats-server's --profile)
    -c, --config <file>              Configuration file (not supported yet: cairn exits with an error)
        --max_payload <bytes>        Maximum message payload (default: 1048576)
        --max_pending <bytes>        Maximum bytes buffered per client before it is a slow consumer (default: 67108864)

JetStream Options:
    -js, --jetstream                 Enable JetStream
    -sd, --store_dir <dir>           Set the storage directory
        --max_memory_store <size>    Memory storage limit (bytes, or with K, M, G, T; default: unlimited)
        --max_file_store <size>      File storage limit (bytes, or with K, M, G, T; default: unlimited)

Logging Options:
    -l, --log <file>                 File to redirect log output (default: stderr)
    -D, --debug                      Enable debugging output
    -V, --trace                      Trace the raw protocol
    -DV                              Debug and trace

Common Options:
    -h, --help                       Show this message
    -v, --version                    Show version
`

// errConfigUnsupported is returned for -c until configuration files land.
var errConfigUnsupported = errors.New("configuration files (-c) are not supported yet; use command-line flags")

// parseFlags reads nats-server's common flags (nats-server v2.15.2
// main.go usage) into a config. Bad flags print the error and usage to
// stderr and return a non-nil error; -h prints the usage to stdout and
// returns flag.ErrHelp.
func parseFlags(args []string, stdout, stderr io.Writer) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("cairn", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	if wantsHelp(args) {
		fmt.Fprint(stdout, usage) // nats-server prints -h to stdout
		return cfg, flag.ErrHelp
	}
	o := &cfg.opts
	stringVar(fs, &o.Host, "", "a", "addr", "net")
	intVar(fs, &o.Port, 0, "p", "port")
	stringVar(fs, &o.ServerName, "", "n", "name", "server_name")
	intVar(fs, &cfg.httpPort, 0, "m", "http_port")
	intVar(fs, &cfg.profPort, 0, "profile")
	stringVar(fs, &cfg.configFile, "", "c", "config")
	intVar(fs, &o.MaxPayload, 0, "max_payload")
	fs.Int64Var(&o.MaxPending, "max_pending", 0, "")
	boolVar(fs, &o.JetStream, "js", "jetstream")
	stringVar(fs, &o.StoreDir, "", "sd", "store_dir")
	fs.Var((*sizeFlag)(&o.MaxMemoryStore), "max_memory_store", "")
	fs.Var((*sizeFlag)(&o.MaxFileStore), "max_file_store", "")
	stringVar(fs, &cfg.logFile, "", "l", "log")
	boolVar(fs, &cfg.debug, "D", "debug")
	boolVar(fs, &cfg.trace, "V", "trace")
	var dv bool
	boolVar(fs, &dv, "DV")
	boolVar(fs, &cfg.showVersion, "v", "version")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	return cfg, finishFlags(fs, &cfg, dv)
}

func finishFlags(fs *flag.FlagSet, cfg *config, dv bool) error {
	if fs.NArg() > 0 {
		return usageError(fs, fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	}
	if dv {
		cfg.debug, cfg.trace = true, true
	}
	if cfg.configFile != "" {
		return usageError(fs, errConfigUnsupported)
	}
	return nil
}

func usageError(fs *flag.FlagSet, err error) error {
	fmt.Fprintf(fs.Output(), "cairn: %v\n", err)
	return err
}

func stringVar(fs *flag.FlagSet, p *string, def string, names ...string) {
	for _, n := range names {
		fs.StringVar(p, n, def, "")
	}
}

func intVar(fs *flag.FlagSet, p *int, def int, names ...string) {
	for _, n := range names {
		fs.IntVar(p, n, def, "")
	}
}

func boolVar(fs *flag.FlagSet, p *bool, names ...string) {
	for _, n := range names {
		fs.BoolVar(p, n, false, "")
	}
}

func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "-h", "--h", "-help", "--help":
			return true
		}
	}
	return false
}

// sizeFlag is a byte count: digits with an optional suffix, read as
// nats-server v2.15.2 reads max_memory_store and max_file_store in a
// configuration file (conf/parse.go), case-insensitively: k, m, g, t, p
// are powers of 1000; kb, mb, gb, tb, pb and ki/kib, mi/mib and so on are
// powers of 1024.
type sizeFlag int64

func (f *sizeFlag) String() string { return strconv.FormatInt(int64(*f), 10) }

// sizeUnits are the prefixes of the size suffixes, in increasing powers.
const sizeUnits = "kmgtp"

// Set parses the size; it refuses negative and malformed values.
func (f *sizeFlag) Set(v string) error {
	s := strings.ToLower(strings.TrimSpace(v))
	digits := strings.TrimRightFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	mult, ok := sizeMultiplier(s[len(digits):])
	n, err := strconv.ParseInt(digits, 10, 64)
	if !ok || err != nil || n < 0 || n > math.MaxInt64/mult {
		return fmt.Errorf("invalid size %q", v)
	}
	*f = sizeFlag(n * mult)
	return nil
}

// sizeMultiplier returns the bytes one unit of suffix stands for.
func sizeMultiplier(suffix string) (int64, bool) {
	if suffix == "" {
		return 1, true
	}
	i := strings.IndexByte(sizeUnits, suffix[0])
	if i < 0 {
		return 0, false
	}
	base := int64(1000)
	switch suffix[1:] {
	case "":
	case "b", "i", "ib":
		base = 1024
	default:
		return 0, false
	}
	mult := int64(1)
	for range i + 1 {
		mult *= base
	}
	return mult, true
}
