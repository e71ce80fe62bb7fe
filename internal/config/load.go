package config

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"unicode"

	"github.com/nats-io/nats-server/v2/conf"
)

// keyFunc applies the value of one key to c, recording problems in r.
type keyFunc func(c *Config, it item, r *report)

// keyTable maps lower-case key names, aliases included, to what they do.
type keyTable map[string]keyFunc

// topLevelTables are the tables of the keys a file may have at its top
// level, one per file of this package (see the package comment).
var topLevelTables = []keyTable{
	serverKeys,
	limitKeys,
	loggingKeys,
	processKeys,
	monitoringKeys,
	jetstreamKeys,
	clusterKeys,
	authKeys,
	accountKeys,
	tlsKeys,
	operatorKeys,
	unsupportedKeys,
}

// topLevel is topLevelTables joined. A key in two tables is a bug that
// the first load of any file reports by panicking (every test loads).
var topLevel = join(topLevelTables...)

func join(tables ...keyTable) keyTable {
	all := keyTable{}
	for _, t := range tables {
		for k, f := range t {
			if _, dup := all[k]; dup {
				panic("config: key " + k + " is in two tables")
			}
			all[k] = f
		}
	}
	return all
}

// Load reads the configuration file at path with nats-server's parser and
// returns the Config it describes, starting from Default, and the warnings
// found. The error is a *Error listing every problem of the file (sorted,
// with warnings), or, when the file cannot be parsed at all, the parser's
// error (syntax error, include or variable not found, integer out of
// range) prefixed with path, or the error opening path.
func Load(path string) (*Config, []Problem, error) {
	m, digest, err := conf.ParseFileWithChecksDigest(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) && pe.Path == path {
			return nil, nil, err // "open <path>: no such file or directory", as nats-server says
		}
		return nil, nil, Problem{File: path, Msg: printable(err.Error())}
	}
	c, warns, err := fromMap(m, path)
	if err != nil {
		return nil, nil, err
	}
	c.File, c.Digest = path, digest
	return c, warns, nil
}

// printable escapes the control characters of a parser error as \xNN
// (its lexer quotes the end of the input as a NUL byte).
func printable(s string) string {
	var b strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) {
			fmt.Fprintf(&b, "\\x%02x", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// fromMap applies a parsed file to a Default Config.
func fromMap(m map[string]any, path string) (*Config, []Problem, error) {
	c := Default()
	r := &report{}
	if len(m) == 0 {
		r.warns = append(r.warns, Problem{File: path, Msg: "config has no values or is empty"})
	}
	for _, it := range entries(m, item{file: path}) {
		f, ok := topLevel[strings.ToLower(it.key)]
		switch {
		case ok:
			f(c, it, r)
		case !it.usedVar:
			r.unknown(it)
		}
	}
	if len(r.errs) > 0 {
		return nil, nil, &Error{Errors: sorted(r.errs), Warnings: sorted(r.warns)}
	}
	return c, sorted(r.warns), nil
}

// unknown records nats-server's error for a key it does not know
// (server/errors.go unknownConfigFieldErr).
func (r *report) unknown(it item) {
	r.errorf(it, "unknown field %q", it.key)
}

// block applies the entries of a block to c with its own key table;
// unknown keys are errors unless they are variables in use.
func block(c *Config, m map[string]any, parent item, keys keyTable, r *report) {
	for _, it := range entries(m, parent) {
		f, ok := keys[strings.ToLower(it.key)]
		switch {
		case ok:
			f(c, it, r)
		case !it.usedVar:
			r.unknown(it)
		}
	}
}

// Validate checks what no single key can: combinations of settings, with
// the defaults of those not set. Call it once flags are applied over the
// file. The error texts are nats-server's (server/server.go
// validateOptions); they carry no position.
func (c *Config) Validate() error {
	var errs []error
	for _, check := range []func() error{c.validateNames, c.validateJetStreamCluster, c.Limits.validate, c.Process.validate, c.Auth.validate, func() error { return c.Operator.validate(&c.Auth) }, c.validateSystemAccount, func() error { return c.Monitor.validate(&c.TLS) }} {
		if err := check(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// validateJetStreamCluster refuses JetStream with a cluster listener
// (cluster.port, --cluster) on a server without a server_name (-n) or a
// cluster name (--cluster_name), with nats-server v2.15.2's texts
// (server/jetstream.go validateJetStreamOptions). Without a name a server
// would take its random server id, a new one at each start, and after a
// restart find itself outside its own meta group; without a cluster name
// each server would make up its own.
func (c *Config) validateJetStreamCluster() error {
	if !c.JetStream.Enabled || c.Cluster.Port == 0 {
		return nil
	}
	if c.ServerName == "" {
		return errors.New("jetstream cluster requires `server_name` to be set")
	}
	if c.Cluster.Name == "" {
		return errors.New("jetstream cluster requires `cluster.name` to be set")
	}
	return nil
}

// validateNames refuses a server or cluster name with a space, from a
// flag or the file, with nats-server v2.15.2's texts
// (ErrServerNameHasSpaces, ErrClusterNameHasSpaces).
func (c *Config) validateNames() error {
	if strings.Contains(c.ServerName, " ") {
		return errors.New("server name cannot contain spaces")
	}
	if strings.Contains(c.Cluster.Name, " ") {
		return errors.New("cluster name cannot contain spaces")
	}
	return nil
}
