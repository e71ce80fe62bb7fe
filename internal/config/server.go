package config

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
)

// serverKeys are the client listener and identity keys of nats-server
// v2.15.2 (server/opts.go processConfigFileLine).
var serverKeys = keyTable{
	"listen":           listenKey,
	"host":             hostKey,
	"net":              hostKey,
	"port":             portKey,
	"server_name":      serverNameKey,
	"client_advertise": clientAdvertiseKey,
	"server_tags":      serverTagsKey,
}

// listenKey reads "host:port", or a port alone (nats-server parseListen).
func listenKey(c *Config, it item, r *report) {
	switch v := it.val.(type) {
	case int64:
		if port, ok := checkPort(it, v, r); ok {
			c.Port = port
		}
	case string:
		host, p, err := net.SplitHostPort(v)
		if err != nil {
			r.errorf(it, "could not parse address string %q", v)
			return
		}
		n, err := strconv.Atoi(p)
		if err != nil {
			r.errorf(it, "could not parse port %q", p)
			return
		}
		if port, ok := checkPort(it, int64(n), r); ok {
			c.Host, c.Port = host, port
		}
	default:
		r.errorf(it, "expected port or host:port, got %T", v)
	}
}

func hostKey(c *Config, it item, r *report) {
	if s, ok := r.stringOf(it); ok {
		c.Host = s
	}
}

func portKey(c *Config, it item, r *report) {
	if n, ok := r.int64Of(it); ok {
		if port, ok := checkPort(it, n, r); ok {
			c.Port = port
		}
	}
}

// checkPort accepts -1 (a free port) to 65535. nats-server leaves a bad
// port to fail when it listens; cairn says so at the key.
func checkPort(it item, n int64, r *report) (int, bool) {
	if n < -1 || n > 65535 {
		r.errorf(it, "port %d out of range", n)
		return 0, false
	}
	return int(n), true
}

func serverNameKey(c *Config, it item, r *report) {
	s, ok := r.stringOf(it)
	if !ok {
		return
	}
	if strings.Contains(s, " ") {
		r.errorf(it, "server name cannot contain spaces") // nats-server ErrServerNameHasSpaces
		return
	}
	c.ServerName = s
}

func clientAdvertiseKey(c *Config, it item, r *report) {
	s, ok := r.stringOf(it)
	if !ok {
		return
	}
	if _, _, err := AdvertiseHostPort(s, 4222); err != nil {
		r.errorf(it, "client_advertise %q: %v", s, err)
		return
	}
	c.ClientAdvertise = s
}

// AdvertiseHostPort splits a client_advertise value into the host and
// port INFO should carry: "host" or "host:port"; a missing, 0 or -1 port
// is port, the port the server listens on (nats-server server/util.go
// parseHostPort).
func AdvertiseHostPort(s string, port int) (string, int, error) {
	if s == "" {
		return "", 0, fmt.Errorf("no hostport specified")
	}
	host, p, err := net.SplitHostPort(s)
	var ae *net.AddrError
	if errors.As(err, &ae) && strings.Contains(ae.Err, "missing port") {
		host, p, err = net.SplitHostPort(s + ":" + strconv.Itoa(port))
	}
	if err != nil {
		return "", 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(p))
	if err != nil {
		return "", 0, err
	}
	if n == 0 || n == -1 {
		n = port
	}
	return strings.TrimSpace(host), n, nil
}

// serverTagsKey reads server_tags as nats-server v2.15.2 does (opts.go):
// one string or a list of strings, each added lowercased and trimmed
// unless empty or already there (AddTags); any other value is "error
// parsing tags: unsupported type <T>".
func serverTagsKey(c *Config, it item, r *report) {
	switch v := it.val.(type) {
	case string:
		c.Tags = AddTags(nil, v)
	case []any:
		var tags []string
		for _, e := range v {
			s, ok := unwrap(it.key, e, it).val.(string)
			if !ok {
				// nats-server names the wrapped element's type.
				r.errorf(it, "error parsing tags: unsupported type %T where string is expected", e)
				return
			}
			tags = AddTags(tags, s)
		}
		c.Tags = tags
	default:
		r.errorf(it, "error parsing tags: unsupported type %T", it.val)
	}
}

// AddTags appends each tag lowercased and trimmed to list, skipping
// empty ones and those list already holds (nats-server v2.15.2's
// jwt.TagList.Add, the form server_tags and placement compare in).
func AddTags(list []string, tags ...string) []string {
	for _, t := range tags {
		t = strings.ToLower(strings.TrimSpace(t))
		if t != "" && !slices.Contains(list, t) {
			list = append(list, t)
		}
	}
	return list
}
