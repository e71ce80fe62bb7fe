package config

import "strings"

// Cluster is the cluster block (operations.md section 1.8). cairn runs as
// a single server: a block without routes (a server alone in its cluster,
// as the nats Docker image's default configuration has) is accepted with
// a warning, since a client sees nothing of it; a block with routes is an
// error, since servers that each believed they were alone would give
// their clients different streams. Name, Host and Port are kept so that a
// reload refuses to change them, as nats-server does.
type Cluster struct {
	Name string `key:"cluster.name"`
	Host string `key:"cluster.host"`
	Port int    `key:"cluster.port"` // 0: no cluster listener; -1: a free port
	// Routes are the route URLs to dial ("nats://[user:pass@]host:port"),
	// comma-separated: a string keeps Config a plain value (Clone, ==).
	Routes         string `key:"cluster.routes"`
	Advertise      string `key:"cluster.advertise"` // "host[:port]" peers should dial
	NoAdvertise    bool   `key:"cluster.no_advertise"`
	ConnectRetries int    `key:"cluster.connect_retries"`
	// Username and Password are the credentials peers must send (the
	// cluster's authorization, or user:password in --cluster's URL).
	Username string `key:"cluster.authorization.user"`
	Password string `key:"cluster.authorization.password"`
}

// clusterKeys is the top-level cluster key.
var clusterKeys = keyTable{"cluster": clusterKey}

func clusterKey(c *Config, it item, r *report) {
	m, ok := r.mapOf(it, "cluster")
	if !ok {
		return
	}
	before := len(r.errs)
	for _, e := range entries(m, it) {
		switch strings.ToLower(e.key) {
		case "name":
			if s, ok := r.stringOf(e); ok {
				c.Cluster.Name = s
			}
		case "host", "net":
			if s, ok := r.stringOf(e); ok {
				c.Cluster.Host = s
			}
		case "port":
			if n, ok := r.int64Of(e); ok {
				c.Cluster.Port = int(n)
			}
		case "listen":
			clusterListen(c, e, r)
		case "routes":
			if hasRoutes(e.val) {
				r.errorf(e, "field %q is not supported by cairn yet: cairn runs as a single server, "+
					"and servers that each believed they were alone would give clients different streams", "cluster")
			}
		}
	}
	if len(r.errs) == before {
		r.ignored(it, "it has no routes, so the server is alone in its cluster, as cairn always is")
	}
}

// clusterListen reads the cluster's "host:port" or port.
func clusterListen(c *Config, it item, r *report) {
	var tmp Config
	listenKey(&tmp, it, r)
	c.Cluster.Host, c.Cluster.Port = tmp.Host, tmp.Port
}

// hasRoutes reports whether a routes value names any route.
func hasRoutes(v any) bool {
	switch v := v.(type) {
	case []any:
		return len(v) > 0
	case string:
		return v != ""
	}
	return v != nil
}
