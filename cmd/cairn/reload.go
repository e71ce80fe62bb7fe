package main

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/cairnmq/cairn/internal/config"
	"github.com/cairnmq/cairn/internal/route"
	"github.com/cairnmq/cairn/internal/server"
)

// A reload (SIGHUP) reads the configuration file again, applies the
// command line's flags over it, and compares the result with the settings
// in force, key by key (config.Changes). As in nats-server v2.15.2
// (server/reload.go), it is all or nothing: if any changed setting cannot
// change while the server runs, nothing is applied and the server logs
// "Failed to reload server configuration: config reload not supported for
// <key>: old=<value>, new=<value>". Otherwise each change is applied and
// logged as "Reloaded: <key> = <value>" ("(value not shown)" for keys
// that may hold secrets), then "Reloaded server configuration
// (<digest>)". The security settings (securityKey) are built and checked
// by server.PrepareSecurity before anything is applied, which refuses
// what cairn cannot change while it runs, and applied with the rest
// (docs/security.md, "Reloading"). With the MEMORY resolver every reload
// reloads the accounts, changed file or not, as in nats-server v2.15.2
// (reload.go reloadAuthorization configures the resolver again from the
// file: the preloaded JWTs replace those pushed since, and every account
// takes its JWT from them), and logs "Reloaded: accounts".

// reloadable are the settings a reload may change: those nats-server
// reloads that cairn has, and max_pending (a superset: nats-server does
// not reload it).
var reloadable = map[string]bool{
	"debug":            true,
	"trace":            true,
	"logtime":          true,
	"logtime_utc":      true,
	"log_format":       true,
	"log_file":         true,
	"pid_file":         true,
	"max_payload":      true,
	"max_control_line": true,
	"max_pending":      true,
	"max_connections":  true,
	"ping_interval":    true,
	"ping_max":         true,
	"write_deadline":   true,
	"client_advertise": true,
	// cairn's additions to nats-server's list: read when used.
	"logfile_size_limit":     true,
	"logfile_max_num":        true,
	"lame_duck_duration":     true,
	"lame_duck_grace_period": true,
	// cairn's own http_auth block: a new password or token applies to
	// the next monitoring request.
	"http_auth.user":            true,
	"http_auth.password":        true,
	"http_auth.token":           true,
	"http_auth.healthz_no_auth": true,
}

// startOnly says why cairn refuses to reload settings that nats-server
// reloads.
var startOnly = map[string]string{
	"jetstream":                "cairn starts or stops JetStream only at start",
	"max_memory_store":         "cairn applies JetStream's storage limits at start only",
	"max_file_store":           "cairn applies JetStream's storage limits at start only",
	"ack_before_sync_interval": "cairn applies the sync policy at start only",
	"cluster.name":             "the cluster's name is checked on every route and names the JetStream meta group; cairn sets it at start only",
	"default_max_consumers":    "cairn applies JetStream's limits block at start only",
	"cluster.tls":              "cairn applies the cluster's TLS at start only",
	"server_tags":              "a cluster's servers learn each other's tags when they connect; cairn sets them at start only",
}

// clusterReloadKey reports whether a setting is one of the cluster block
// that server.ReloadCluster applies (nats-server v2.15.2 reload.go
// clusterOption and routesOption apply them too).
func clusterReloadKey(key string) bool {
	switch key {
	case "cluster.routes", "cluster.advertise", "cluster.no_advertise", "cluster.connect_retries",
		"cluster.authorization.user", "cluster.authorization.password":
		return true
	}
	return false
}

// securityKey reports whether a setting is one of the security of the
// client listener, which server.PrepareSecurity applies or refuses with
// its own reason: the authorization block, no_auth_user, the accounts,
// operator mode and the tls block.
func securityKey(key string) bool {
	switch key {
	case "no_auth_user", "accounts", "no_system_account", "system_account",
		"operator", "resolver", "resolver_dir", "resolver_preload", "allow_non_tls":
		return true
	}
	return strings.HasPrefix(key, "authorization") || strings.HasPrefix(key, "tls.")
}

// secretKey reports whether a setting's values may hold a secret.
func secretKey(key string) bool {
	return strings.HasPrefix(key, "authorization") || key == "no_auth_user" || key == "accounts" ||
		strings.HasPrefix(key, "http_auth") || strings.HasPrefix(key, "cluster.authorization")
}

// errNoConfigFile is nats-server's text for a reload without -c.
var errNoConfigFile = errors.New("can only reload config when a file is provided using -c or --config")

// reload reloads the configuration and logs the outcome (SIGHUP).
func (in *instance) reload() { _ = in.requestReload() }

// requestReload reloads the configuration, logs the outcome and returns
// the error: SIGHUP and the system account's
// $SYS.REQ.SERVER.<id>.RELOAD (monitor Options.Reload), whose answer
// carries the error. reloadMu keeps two reloads from running at once.
func (in *instance) requestReload() error {
	in.reloadMu.Lock()
	defer in.reloadMu.Unlock()
	err := in.tryReload()
	if err != nil {
		in.log.Errorf("Failed to reload server configuration: %v", err)
	}
	return err
}

func (in *instance) tryReload() error {
	if in.cl.configFile == "" {
		return errNoConfigFile
	}
	next, warns, err := in.cl.settings()
	if err != nil {
		return err
	}
	changes := config.Changes(in.cfg, next)
	security := false
	for _, c := range changes {
		switch {
		case reloadable[c.Key], clusterReloadKey(c.Key):
		case securityKey(c.Key):
			security = true
		default:
			return refusal(c)
		}
	}
	// The MEMORY resolver's preloads replace the JWTs pushed since the
	// last reload: see the top of this file.
	memory := memoryResolver(next)
	security = security || memory
	// Certificates are re-read at every reload, as nats-server re-reads
	// them: rotating them in place is a reload with the same file names.
	newCerts := next.TLS.Enabled() && tlsFiles(&next.TLS) != in.tlsFiles
	var sec *server.SecurityReload
	var monTLS *tls.Config
	if security || newCerts {
		if sec, err = in.srv.PrepareSecurity(securityOptions(next)); err != nil {
			return err
		}
		defer sec.Release() // (after Apply, nothing)
		if in.monTLS.Load() != nil {
			if monTLS, err = monitorTLS(&next.TLS); err != nil {
				return err
			}
		}
	}
	if err := in.apply(next, changes, sec); err != nil {
		return err
	}
	if memory {
		in.log.Noticef("Reloaded: accounts")
	}
	if monTLS != nil {
		in.monTLS.Store(monTLS)
	}
	if newCerts {
		in.log.Noticef("Reloaded: tls (certificate files read again)")
	}
	in.tlsFiles = tlsFiles(&next.TLS)
	for _, w := range warns {
		in.log.Warnf("%v", w)
	}
	in.cfg = next
	if in.mon != nil {
		in.mon.SetConfig(next.Digest, time.Now())
	}
	in.log.Noticef("Reloaded server configuration (%s)", next.Digest)
	return nil
}

// memoryResolver reports whether the configuration is operator mode with
// the MEMORY resolver.
func memoryResolver(c *config.Config) bool {
	return c.Operator.Enabled() && c.Operator.Resolver == "MEMORY"
}

// securityOptions are the security settings of a configuration.
func securityOptions(c *config.Config) server.SecurityOptions {
	return server.SecurityOptions{Auth: c.Auth, Operator: c.Operator, TLS: c.TLS}
}

// tlsFiles is a digest of the contents of the tls block's certificate,
// key and CA files, "" without TLS or when one cannot be read (then the
// reload fails on it anyway).
func tlsFiles(t *config.TLS) string {
	if !t.Enabled() {
		return ""
	}
	h := sha256.New()
	for _, name := range []string{t.CertFile, t.KeyFile, t.CAFile} {
		data, err := os.ReadFile(name)
		if name != "" && err != nil {
			return ""
		}
		fmt.Fprintf(h, "%d:", len(data))
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// refusal is the error for a setting that cannot change while the server
// runs. The values of authentication settings are not printed: they hold
// passwords and tokens (nats-server advisory CVE-2026-33247 is about
// secrets leaking into monitoring).
func refusal(c config.Change) error {
	err := fmt.Errorf("config reload not supported for %s: old=%v, new=%v", c.Key, c.Old, c.New)
	if secretKey(c.Key) {
		err = fmt.Errorf("config reload not supported for %s (values not shown)", c.Key)
	}
	if why, ok := startOnly[c.Key]; ok {
		err = fmt.Errorf("%w (%s)", err, why)
	}
	return err
}

// apply makes the changes, all reloadable, take effect: first those that
// can fail (a new log file, the server's limits), then the rest, with
// the security settings prepared (sec, nil when they do not change).
func (in *instance) apply(next *config.Config, changes []config.Change, sec *server.SecurityReload) error {
	changed := map[string]bool{}
	clusterChanged := false
	for _, c := range changes {
		changed[c.Key] = true
		clusterChanged = clusterChanged || clusterReloadKey(c.Key)
	}
	// The cluster block first: what it could refuse, the file's parser
	// refused already.
	if clusterChanged {
		if err := in.srv.ReloadCluster(clusterOptions(next.Cluster)); err != nil {
			return err
		}
	}
	var newLog *logFileSwitch
	if changed["log_file"] {
		sw, err := openSwitch(next.Log.File)
		if err != nil {
			return err
		}
		newLog = sw
	}
	if serverLimits(next) != serverLimits(in.cfg) {
		if err := in.srv.SetLimits(serverLimits(next)); err != nil {
			newLog.abandon()
			return err
		}
	}
	if sec != nil {
		sec.Apply()
	}
	in.lf.setRotation(next.Log.SizeLimit, next.Log.MaxNum)
	if newLog != nil {
		in.lf.use(newLog.path, newLog.f)
	}
	in.log.SetDebug(next.Log.Debug)
	in.log.SetTrace(next.Log.Trace)
	in.log.SetTime(next.Log.Time, next.Log.TimeUTC)
	in.log.SetJSON(next.Log.JSON)
	if changed["pid_file"] {
		if err := writePidFile(next.Process.PidFile); err != nil {
			in.log.Errorf("Failed to write pidfile: %v", err) // as nats-server: the reload goes on
		}
	}
	if in.mon != nil && next.Monitor.Auth != in.cfg.Monitor.Auth {
		in.mon.SetAuth(next.Monitor.Auth)
	}
	for _, c := range changes {
		if secretKey(c.Key) {
			in.log.Noticef("Reloaded: %s (value not shown)", c.Key)
			continue
		}
		if c.Key == "cluster.routes" {
			in.log.Noticef("Reloaded: %s = %v", c.Key, redactedRoutes(next.Cluster.Routes))
			continue
		}
		in.log.Noticef("Reloaded: %s = %v", c.Key, c.New)
	}
	return nil
}

// logFileSwitch is a log file opened by a reload and not yet in use.
type logFileSwitch struct {
	path string
	f    *os.File
}

// openSwitch opens the log file a reload names; "" is stderr.
func openSwitch(path string) (*logFileSwitch, error) {
	if path == "" {
		return &logFileSwitch{}, nil
	}
	f, err := openLogFile(path)
	if err != nil {
		return nil, err
	}
	return &logFileSwitch{path: path, f: f}, nil
}

// abandon closes a log file that a failed reload opened.
func (s *logFileSwitch) abandon() {
	if s != nil && s.f != nil {
		_ = s.f.Close()
	}
}

// redactedRoutes is a routes setting with the URLs' passwords masked.
func redactedRoutes(routes string) string {
	urls, err := route.ParseURLs(routes)
	if err != nil {
		return "(value not shown)"
	}
	out := make([]string, len(urls))
	for i, u := range urls {
		out[i] = u.Redacted()
	}
	return strings.Join(out, ",")
}
