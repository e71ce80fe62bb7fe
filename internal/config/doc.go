// Package config holds cairn's settings: what a configuration file (-c) and
// the command-line flags set, with their defaults and validation. Every
// other part of cairn reads its settings from a Config; cmd/cairn turns it
// into the options of each component.
//
// # The file format
//
// The file is nats-server's configuration format, parsed by nats-server's
// own parser, github.com/nats-io/nats-server/v2/conf v2.15.2 (the one
// nats-server package cairn imports, docs/architecture.md section 1), in
// its pedantic mode so that every value carries its file, line and column.
// So the grammar is exactly nats-server's: `=`, `:` or blank separators;
// `#` and `//` comments; nested blocks and arrays; quoted and bare strings;
// sizes (`1GB` is 2^30 bytes, `1G` 10^9); `$VAR` variables, block-scoped,
// then the environment; `include` (relative to the including file); a whole
// file wrapped in braces, so a JSON file is a configuration file, including
// the JSON with bare `$VAR`, `10Gi` and `include x;` that the official Helm
// chart writes. docs/configuration.md describes it with examples.
//
// What each key means is this package's own code: one file per block
// (server.go for the listener, limits.go, logging.go, process.go,
// monitoring.go, jetstream.go, cluster.go), each with a table of its keys
// and their aliases, joined in load.go. Keys are matched without regard to
// case, as nats-server matches them. To add a block, write its file with
// its struct, its key table and its checks, add the struct to Config and
// the table to topLevelTables, and give every field a `key` tag (Changes
// uses it for reloads; a test checks that no field lacks one).
//
// # Keys cairn does not implement
//
// A key of a feature cairn lacks is never dropped silently (unsupported.go):
//
//   - an error when ignoring it would change what a client sees:
//     "not supported by cairn" for features cairn will not have (leafnodes,
//     gateway, websocket, mqtt), "not supported by cairn yet" for those it
//     will (authorization, accounts, tls, a cluster with routes, ...);
//   - a warning when ignoring it changes nothing a client sees (monitoring
//     ports, lame duck timings, syslog, ...).
//
// A key cairn does not know at all is an error, `unknown field "x"`, as in
// nats-server, unless it is a variable that a value refers to.
//
// # Errors
//
// Load collects every problem of a file before it returns, as nats-server
// does, as Problems of the form `<file>:<line>:<col>: <text>` with
// nats-server's texts (unknown field, type mismatches, out-of-range values),
// sorted by position. Columns are 1-based; nats-server's parser reports
// 0-based columns on the first line only, which Load corrects. A syntax
// error comes from the parser as `Parse error on line N: '...'` (its text
// has the line, not the column), prefixed with the file name.
//
// # Flags and reloads
//
// cmd/cairn binds its flags to the fields of a Config: it loads the file
// into a fresh Config, then parses the command line again over it, so that
// a flag given on the command line overrides the file, at start and at
// every reload (nats-server's rule). Changes lists what differs between two
// Configs by key name, which is how a reload decides what it may apply.
package config
