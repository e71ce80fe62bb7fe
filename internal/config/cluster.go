package config

import (
	"net/url"
	"strings"
)

// Cluster is the cluster block (docs/configuration.md, "The cluster block";
// docs/routes.md): the cluster listener and the routes to the other
// servers, as nats-server v2.15.2 reads them (server/opts.go parseCluster),
// and the flags --cluster, --routes, --cluster_name, --cluster_advertise,
// --no_advertise and --connect_retries. docs/routes.md says what each does.
// A reload may not change them.
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
	// TLS is the cluster's tls block: every connection of the cluster
	// port, routes and the Raft transport's, starts with a TLS handshake
	// using it, each side verifying the other's certificate
	// (TLS.RouteConfig; docs/routes.md, "TLS"). Off when TLS.CertFile is
	// "". Its fields' key tags name the client listener's keys: Changes
	// reports the whole block as cluster.tls.
	TLS TLS `key:"cluster.tls"`
}

// clusterKeys is the top-level cluster key.
var clusterKeys = keyTable{"cluster": clusterKey}

// clusterBlockKeys are the keys of the cluster block (nats-server v2.15.2
// parseCluster).
var clusterBlockKeys = keyTable{
	"name":              func(c *Config, it item, r *report) { setString(&c.Cluster.Name, it, r) },
	"host":              func(c *Config, it item, r *report) { setString(&c.Cluster.Host, it, r) },
	"net":               func(c *Config, it item, r *report) { setString(&c.Cluster.Host, it, r) },
	"port":              clusterPortKey,
	"listen":            clusterListen,
	"routes":            routesKey,
	"advertise":         func(c *Config, it item, r *report) { setString(&c.Cluster.Advertise, it, r) },
	"cluster_advertise": func(c *Config, it item, r *report) { setString(&c.Cluster.Advertise, it, r) },
	"no_advertise":      func(c *Config, it item, r *report) { setBool(&c.Cluster.NoAdvertise, it, r) },
	"connect_retries":   connectRetriesKey,
	"authorization":     clusterAuthKey,
	"tls":               clusterTLSKey,
	"permissions":       unsupportedYet,
	"pool_size":         ignoredKey("cairn keeps one route connection per peer, carrying every subject (nats-server's pool_size: -1)"),
	"accounts":          ignoredKey("cairn has one account, carried by its one route connection per peer"),
	"compression":       ignoredKey("cairn does not compress routes; its peers see that it does not support compression"),
	"connect_backoff":   ignoredKey("cairn dials a missing route every second"),
	"ping_interval":     ignoredKey("routes use the server's ping_interval, at most 30 s"),
	"ping_max":          ignoredKey("routes use the server's ping_max"),
	"write_deadline":    ignoredKey("routes use the server's write_deadline"),
	"write_timeout":     ignoredKey("routes close a stalled peer as a client's slow consumer is closed"),
}

func clusterKey(c *Config, it item, r *report) {
	m, ok := r.mapOf(it, "cluster")
	if !ok {
		return
	}
	block(c, m, it, clusterBlockKeys, r)
}

func clusterPortKey(c *Config, it item, r *report) {
	if n, ok := r.int64Of(it); ok {
		c.Cluster.Port = int(n)
	}
}

// clusterListen reads the cluster's "host:port" or port.
func clusterListen(c *Config, it item, r *report) {
	var tmp Config
	listenKey(&tmp, it, r)
	c.Cluster.Host, c.Cluster.Port = tmp.Host, tmp.Port
}

// connectRetriesKey reads connect_retries; a negative value is kept and
// means 0 (one dial), as in nats-server v2.15.2 (parseCluster takes any
// integer; connectToRoute stops after the first failed dial when it is 0
// or less).
func connectRetriesKey(c *Config, it item, r *report) {
	if n, ok := r.int64Of(it); ok {
		c.Cluster.ConnectRetries = int(n)
	}
}

// routesKey reads the route URLs: an array of URLs or one URL (nats-server
// parseURLs: "error parsing route url [%q]").
func routesKey(c *Config, it item, r *report) {
	var texts []item
	switch v := it.val.(type) {
	case string:
		texts = []item{it}
	case []any:
		for _, e := range v {
			texts = append(texts, unwrap(it.key, e, it))
		}
	default:
		r.typeError(it, "[]interface {}") // nats-server's text; a string is taken (docs/compatibility.md)
		return
	}
	var urls []string
	for _, t := range texts {
		s, ok := r.stringOf(t)
		if !ok {
			continue
		}
		u, err := url.Parse(strings.TrimSpace(s))
		if err != nil || u.Hostname() == "" {
			r.errorf(t, "error parsing route url [%q]", s)
			continue
		}
		urls = append(urls, u.String())
	}
	c.Cluster.Routes = strings.Join(urls, ",")
}

// clusterAuthKey reads the cluster's authorization block: the user and
// password peers must send. Its timeout is accepted and ignored (cairn
// gives a peer 2 s for its first line, docs/routes.md); users, tokens and
// permissions are not supported yet.
func clusterAuthKey(c *Config, it item, r *report) {
	m, ok := r.mapOf(it, "authorization")
	if !ok {
		return
	}
	block(c, m, it, keyTable{
		"user":     func(c *Config, it item, r *report) { setString(&c.Cluster.Username, it, r) },
		"username": func(c *Config, it item, r *report) { setString(&c.Cluster.Username, it, r) },
		"password": func(c *Config, it item, r *report) { setString(&c.Cluster.Password, it, r) },
		"pass":     func(c *Config, it item, r *report) { setString(&c.Cluster.Password, it, r) },
		"timeout":  ignoredKey("cairn gives a peer 2 s to send its first line"),
		"token":    unsupportedYet,
		"users":    unsupportedYet,
	}, r)
}

// clusterTLSKey reads the cluster's tls block (nats-server v2.15.2
// parseCluster "tls"): the keys of the client listener's, with insecure
// (skip the verification of the servers dialed), and without those that
// only concern clients: handshake_first is ignored (a route always starts
// with the handshake), verify is accepted and changes nothing (a route's
// certificate is always verified), verify_and_map and
// verify_cert_and_check_known_urls are not supported yet. A block without
// cert_file and key_file is refused: a route must present a certificate.
func clusterTLSKey(c *Config, it item, r *report) {
	t := &c.Cluster.TLS
	firstIgnored := ignoredKey("a route always starts with the TLS handshake")
	if !tlsBlock(t, it, r, keyTable{
		"insecure":        tlsFlag(&t.Insecure, "insecure"),
		"handshake_first": firstIgnored,
		"first":           firstIgnored,
		"immediate":       firstIgnored,
		"verify_and_map":  unsupportedYet,
	}) {
		return
	}
	t.HandshakeFirst, t.HandshakeFirstFallback = false, 0
	if !t.Enabled() {
		r.errorf(it, "missing 'cert_file' in TLS configuration")
		return
	}
	if _, err := t.RouteConfig(); err != nil {
		r.errorf(it, "%v", err)
	}
}

// setString stores a string value in dst.
func setString(dst *string, it item, r *report) {
	if s, ok := r.stringOf(it); ok {
		*dst = s
	}
}
