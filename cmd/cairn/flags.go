package main

import (
	"flag"
	"fmt"
	"io"
	"strconv"

	"github.com/cairnmq/cairn/internal/config"
)

// commandLine is what the command line asks for besides settings.
type commandLine struct {
	args        []string // kept to apply the flags over the file again at each reload
	configFile  string   // -c
	check       bool     // -t: check the configuration and exit
	showVersion bool     // -v
	signal      string   // --signal <command>[=<pid or pid file>]
	// forceNew: --cluster_force_new, force a new cluster from this
	// server's Raft WAL (server.Options.ForceNewCluster); not a setting,
	// so a reload neither reads nor changes it.
	forceNew bool
	// ignored are the warnings about flags cairn accepts and ignores
	// (--syslog, --remote_syslog, --max_traced_msg_len), set by a parse.
	ignored []config.Problem
}

const usage = `Usage: cairn [options]

Server Options:
    -a, --addr, --net <host>         Bind to host address (default: 0.0.0.0)
    -p, --port <port>                Use port for clients (default: 4222; -1 for a random port)
    -n, --name, --server_name <name> Server name (default: the server id)
    -m, --http_port <port>           HTTP monitoring port (/varz, /connz, /jsz, /healthz, /metrics, ...; -1 for a random port)
    -ms,--https_port <port>          HTTPS monitoring port, with the tls block's certificate
        --client_advertise <host:port> Client URL to advertise in INFO
    -c, --config <file>              Configuration file (nats-server's format)
    -t                               Test the configuration file and exit
    -P, --pid <file>                 File to store the process ID
        --ports_file_dir <dir>       Write <executable>_<pid>.ports there with the listen URLs
    -sl, --signal <cmd>[=<pid>]      Send a signal to a cairn process: ldm, stop, quit, term, reopen, reload
                                     (<pid> is a PID or a PID file; default: the PID file of -c's pid_file)
        --profile <port>             Serve Go pprof profiles on 127.0.0.1:<port> (as nats-server's --profile)
        --max_payload <size>         Maximum message payload (bytes, or with K, M, G; default: 1MB)
        --max_pending <size>         Maximum bytes buffered per client before it is a slow consumer (default: 64MB)

JetStream Options:
    -js, --jetstream                 Enable JetStream
    -sd, --store_dir <dir>           Set the storage directory
        --max_memory_store <size>    Memory storage limit (bytes, or with K, M, G, T; 0: no memory streams; default: 75% of the memory)
        --max_file_store <size>      File storage limit (bytes, or with K, M, G, T; 0: no file streams; default: 75% of the free disk)
` + clusterUsage + `
TLS Options:
        --tls                        Enable TLS, do not verify clients (default: false)
        --tlscert <file>             Server certificate file
        --tlskey <file>              Private key for server certificate
        --tlsverify                  Enable TLS, verify client certificates
        --tlscacert <file>           Client certificate CA for verification

Authorization Options:
        --user <user>                User required for connections
        --pass <password>            Password required for connections
        --auth <token>               Authorization token required for connections

Logging Options:
    -l, --log <file>                 File to redirect log output (default: stderr)
        --log_size_limit <bytes>     Rotate the log file once it holds more (logfile_size_limit)
    -T, --logtime                    Timestamp log entries (default: true; -T=false for none)
        --logtime_utc                Timestamps in UTC instead of local time
    -D, --debug                      Enable debugging output
    -V, --trace                      Trace the raw protocol
    -VV                              Trace (nats-server also traces the system account; cairn's trace always does)
    -DV                              Debug and trace
    -DVV                             Debug and trace (as -VV)
        --log_format <text|json>     Log lines as nats-server (text) or as JSON objects
    -s, --syslog, -r, --remote_syslog <url>, --max_traced_msg_len <n>
                                     Accepted and ignored with a warning: cairn logs to stderr or --log

Common Options:
    -h, --help                       Show this message
    -v, --version                    Show version

Flags override the configuration file, also across reloads (SIGHUP).
`

// parseArgs reads the command line over the default settings, for what
// it asks besides settings (-c, -t, -v) and to report bad flags at once.
// Bad flags print the error and usage to stderr and return a non-nil
// error; -h prints the usage to stdout and returns flag.ErrHelp.
func parseArgs(args []string, stdout, stderr io.Writer) (*commandLine, error) {
	cl := &commandLine{args: args}
	if wantsHelp(args) {
		fmt.Fprint(stdout, usage) // nats-server prints -h to stdout
		return cl, flag.ErrHelp
	}
	fs, _ := bindFlags(config.Default(), cl, stderr)
	if err := fs.Parse(args); err != nil {
		return cl, err
	}
	if fs.NArg() > 0 {
		return cl, usageError(fs, fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	}
	return cl, nil
}

// settings returns the server's settings: the file given with -c, if any
// (config.Load), with the command line's flags applied over it, as
// nats-server does at start and at each reload. The warnings are the
// file's; the error is the file's problems, or a combination of settings
// that cannot work (Config.Validate).
func (cl *commandLine) settings() (*config.Config, []config.Problem, error) {
	cfg := config.Default()
	var warns []config.Problem
	if cl.configFile != "" {
		c, w, err := config.Load(cl.configFile)
		if err != nil {
			return nil, nil, err
		}
		cfg, warns = c, w
	}
	parsed := &commandLine{}
	fs, finish := bindFlags(cfg, parsed, io.Discard)
	if err := fs.Parse(cl.args); err != nil { // parseArgs accepted them
		return nil, warns, err
	}
	finish()
	return cfg, append(warns, parsed.ignored...), cfg.Validate()
}

// bindFlags defines nats-server's common flags (nats-server v2.15.2
// main.go usage) on the fields of cfg and cl, with their current values
// as defaults so that defining them changes nothing: a parse sets only
// the flags given. finish applies what a flag implies after the parse
// (-DV).
func bindFlags(cfg *config.Config, cl *commandLine, stderr io.Writer) (fs *flag.FlagSet, finish func()) {
	fs = flag.NewFlagSet("cairn", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	stringVar(fs, &cfg.Host, "a", "addr", "net")
	intVar(fs, &cfg.Port, "p", "port")
	stringVar(fs, &cfg.ServerName, "n", "name", "server_name")
	stringVar(fs, &cfg.ClientAdvertise, "client_advertise")
	intVar(fs, &cfg.Monitor.Port, "m", "http_port")
	intVar(fs, &cfg.Monitor.HTTPSPort, "ms", "https_port")
	intVar(fs, &cfg.Process.ProfPort, "profile")
	stringVar(fs, &cfg.Process.PidFile, "P", "pid")
	stringVar(fs, &cl.configFile, "c", "config")
	boolVar(fs, &cl.check, "t")
	stringVar(fs, &cl.signal, "sl", "signal")
	boolVar(fs, &cl.forceNew, "cluster_force_new")
	fs.Var((*intSizeFlag)(&cfg.Limits.MaxPayload), "max_payload", "")
	fs.Var((*sizeFlag)(&cfg.Limits.MaxPending), "max_pending", "")
	boolVar(fs, &cfg.JetStream.Enabled, "js", "jetstream")
	stringVar(fs, &cfg.JetStream.StoreDir, "sd", "store_dir")
	fs.Var((*sizeFlag)(&cfg.JetStream.MaxMemoryStore), "max_memory_store", "")
	fs.Var((*sizeFlag)(&cfg.JetStream.MaxFileStore), "max_file_store", "")
	stringVar(fs, &cfg.Log.File, "l", "log")
	boolVar(fs, &cfg.Log.Debug, "D", "debug")
	boolVar(fs, &cfg.Log.Trace, "V", "trace")
	fs.Var((*logFormatFlag)(&cfg.Log.JSON), "log_format", "")
	boolVar(fs, &cfg.Log.Time, "T", "logtime")
	boolVar(fs, &cfg.Log.TimeUTC, "logtime_utc")
	int64Var(fs, &cfg.Log.SizeLimit, "log_size_limit")
	stringVar(fs, &cfg.Process.PortsFileDir, "ports_file_dir")
	var dv, vv, dvv bool
	boolVar(fs, &dv, "DV")
	boolVar(fs, &vv, "VV")
	boolVar(fs, &dvv, "DVV")
	// Accepted as nats-server accepts them, and ignored with a warning at
	// start, as the file's keys of the same names are.
	var syslog bool
	var remoteSyslog string
	var tracedLen int
	boolVar(fs, &syslog, "s", "syslog")
	stringVar(fs, &remoteSyslog, "r", "remote_syslog")
	intVar(fs, &tracedLen, "max_traced_msg_len")
	boolVar(fs, &cl.showVersion, "v", "version")
	var tlsOn bool
	boolVar(fs, &tlsOn, "tls")
	stringVar(fs, &cfg.TLS.CertFile, "tlscert")
	stringVar(fs, &cfg.TLS.KeyFile, "tlskey")
	stringVar(fs, &cfg.TLS.CAFile, "tlscacert")
	boolVar(fs, &cfg.TLS.Verify, "tlsverify")
	stringVar(fs, &cfg.Auth.User, "user")
	stringVar(fs, &cfg.Auth.Password, "pass")
	stringVar(fs, &cfg.Auth.Token, "auth")
	bindClusterFlags(fs, &cfg.Cluster)
	return fs, func() {
		// -VV and -DVV also trace the system account in nats-server;
		// cairn's trace has no such exception.
		cfg.Log.Trace = cfg.Log.Trace || vv || dv || dvv
		cfg.Log.Debug = cfg.Log.Debug || dv || dvv
		ignore := func(set bool, flag, why string) {
			if set {
				cl.ignored = append(cl.ignored, config.Problem{File: "command line", Msg: fmt.Sprintf("flag %q is ignored: %s", flag, why)})
			}
		}
		ignore(syslog, "syslog", "cairn logs to stderr or to --log")
		ignore(remoteSyslog != "", "remote_syslog", "cairn logs to stderr or to --log")
		ignore(tracedLen != 0, "max_traced_msg_len", "cairn traces whole messages")
	}
}

func int64Var(fs *flag.FlagSet, p *int64, names ...string) {
	for _, n := range names {
		fs.Int64Var(p, n, *p, "")
	}
}

func usageError(fs *flag.FlagSet, err error) error {
	fmt.Fprintf(fs.Output(), "cairn: %v\n", err)
	return err
}

func stringVar(fs *flag.FlagSet, p *string, names ...string) {
	for _, n := range names {
		fs.StringVar(p, n, *p, "")
	}
}

func intVar(fs *flag.FlagSet, p *int, names ...string) {
	for _, n := range names {
		fs.IntVar(p, n, *p, "")
	}
}

func boolVar(fs *flag.FlagSet, p *bool, names ...string) {
	for _, n := range names {
		fs.BoolVar(p, n, *p, "")
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

// sizeFlag is a byte count with the size suffixes of the configuration
// file (config.ParseSize). It sets what the file's max_memory_store and
// max_file_store set, with the same meaning: 0 allows no stream of that
// storage type.
// logFormatFlag is --log_format: "text" or "json" (config.ParseLogFormat).
type logFormatFlag bool

func (f *logFormatFlag) String() string {
	if *f {
		return "json"
	}
	return "text"
}

// Set parses the format; it refuses anything but text and json.
func (f *logFormatFlag) Set(v string) error {
	json, err := config.ParseLogFormat(v)
	if err != nil {
		return err
	}
	*f = logFormatFlag(json)
	return nil
}

type sizeFlag int64

func (f *sizeFlag) String() string { return strconv.FormatInt(int64(*f), 10) }

// Set parses the size; it refuses negative and malformed values.
func (f *sizeFlag) Set(v string) error {
	n, err := config.ParseSize(v)
	if err != nil {
		return err
	}
	*f = sizeFlag(n)
	return nil
}

// intSizeFlag is a sizeFlag for an int setting that nats-server keeps in
// 32 bits (max_payload).
type intSizeFlag int

func (f *intSizeFlag) String() string { return strconv.Itoa(int(*f)) }

// Set parses the size; it refuses what does not fit 31 bits.
func (f *intSizeFlag) Set(v string) error {
	n, err := config.ParseSize(v)
	if err != nil {
		return err
	}
	if n > 1<<31-1 {
		return fmt.Errorf("size %q is too big", v)
	}
	*f = intSizeFlag(n)
	return nil
}
