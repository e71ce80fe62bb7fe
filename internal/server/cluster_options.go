package server

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/cairnmq/cairn/internal/config"
)

// Cluster defaults, from nats-server v2.15.2 (const.go, route.go).
const (
	// DefaultClusterPort is the cluster port of nats-server's configuration
	// files (DEFAULT_ROUTE_PORT). The --cluster flag always names a port.
	DefaultClusterPort = 6222
	// routeConnectDelay is the pause between two dials of a route
	// (DEFAULT_ROUTE_CONNECT) and before redialing a route that closed
	// (DEFAULT_ROUTE_RECONNECT); up to routeJitter is added at random.
	routeConnectDelay = time.Second
	routeJitter       = 100 * time.Millisecond
	// routeDialTimeout bounds one TCP dial of a route (DEFAULT_ROUTE_DIAL).
	routeDialTimeout = time.Second
	// routeMaxPingInterval caps the keep-alive interval of routes
	// (defaultRouteMaxPingInterval); the first PING goes out within
	// routeFirstPing (firstPingInterval), plus up to a fifth at random.
	routeMaxPingInterval = 30 * time.Second
	routeFirstPing       = time.Second
	// clusterHandshakeTimeout bounds how long an accepted cluster-port
	// connection may take to send its first line (nats-server's route
	// auth timeout default, 2 s; cairn applies it with or without auth).
	clusterHandshakeTimeout = 2 * time.Second
)

// ClusterOptions configure the cluster listener and the routes to other
// servers: nats-server's --cluster, --cluster_name, --routes,
// --cluster_advertise, --no_advertise and --connect_retries flags and the
// same keys of its cluster {} block, with its tls block (docs/routes.md).
// The zero value means no clustering. Zero fields mean the default named
// next to each.
type ClusterOptions struct {
	// Host is the cluster listener's address, default "0.0.0.0".
	Host string
	// Port is the cluster port: 0 means no cluster listener and no routes;
	// RandomPort (-1) asks the kernel for a free port.
	Port int
	// Name is the cluster name every server of the cluster must share. When
	// empty, a name is generated and the server adopts the name of the
	// first peer whose name is configured, or larger (nats-server's dynamic
	// cluster name).
	Name string
	// Routes are the URLs of the servers to dial (explicit routes), dialed
	// again every second for as long as the server runs. A URL may carry
	// user:password, sent in CONNECT. A URL of this server itself is
	// recognised and dropped.
	Routes []*url.URL
	// Advertise, "host:port" or "host", is the address peers are told to
	// dial instead of Host:Port (NAT, containers).
	Advertise string
	// NoAdvertise stops this server from telling its clients about the
	// other servers' client URLs, and peers from telling theirs about it.
	NoAdvertise bool
	// ConnectRetries is how many times a route learned from a peer
	// (implicit) is dialed again after a failed dial; 0 or less dials it
	// once (nats-server v2.15.2 connectToRoute).
	ConnectRetries int
	// Username and Password, when Username is set, are the credentials a
	// peer's CONNECT must carry; INFO then says auth_required.
	Username string
	Password string
	// TLS is the cluster block's tls (docs/routes.md, "TLS"): when its
	// CertFile is set, every connection of the cluster port (routes and
	// the Raft transport's) starts with a TLS handshake in which each
	// side verifies the other's certificate (config.TLS.RouteConfig);
	// INFO then says tls_required and tls_verify. New returns an error
	// wrapping ErrInvalidOptions when its files cannot be loaded.
	TLS config.TLS
}

// enabled reports whether the server runs a cluster listener.
func (o *ClusterOptions) enabled() bool { return o.Port != 0 }

// validate fills defaults and rejects impossible combinations with the
// texts of nats-server v2.15.2 (opts.go, server.go validateCluster). It
// returns an error wrapping ErrInvalidOptions.
func (o *ClusterOptions) validate() error {
	if !o.enabled() {
		if len(o.Routes) > 0 {
			return fmt.Errorf("%w: solicited routes require cluster capabilities, e.g. --cluster", ErrInvalidOptions)
		}
		return nil
	}
	if o.Host == "" {
		o.Host = DefaultHost
	}
	if o.Port < RandomPort || o.Port > 65535 {
		return fmt.Errorf("%w: cluster port %d out of range", ErrInvalidOptions, o.Port)
	}
	if strings.ContainsAny(o.Name, " \t\r\n") {
		return fmt.Errorf("%w: cluster name cannot contain spaces or new lines", ErrInvalidOptions)
	}
	if o.Advertise != "" {
		if _, _, err := advertiseHostPort(o.Advertise, 1); err != nil {
			return fmt.Errorf("%w: cluster advertise %q: %v", ErrInvalidOptions, o.Advertise, err)
		}
	}
	for _, u := range o.Routes {
		if u == nil || u.Hostname() == "" || u.Port() == "" {
			return fmt.Errorf("%w: route URL %v needs a host and a port", ErrInvalidOptions, u)
		}
	}
	return nil
}

// advertiseHostPort splits "host:port" or "host" (port then defaults to
// port), as nats-server's parseHostPort does for advertise settings.
func advertiseHostPort(hp string, port int) (string, int, error) {
	return config.AdvertiseHostPort(hp, port)
}
