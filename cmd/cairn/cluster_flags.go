package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/cairnmq/cairn/internal/config"
	"github.com/cairnmq/cairn/internal/route"
	"github.com/cairnmq/cairn/internal/server"
)

// clusterUsage is the "Cluster Options" part of the usage, as
// nats-server v2.15.2 main.go words it.
const clusterUsage = `
Cluster Options:
        --routes <rurl-1, rurl-2>    Routes to solicit and connect
        --cluster <cluster-url>      Cluster URL for solicited routes
        --cluster_name <string>      Cluster Name, if not set one will be dynamically generated
        --no_advertise <bool>        Do not advertise known cluster information to clients
        --cluster_advertise <string> Cluster URL to advertise to other servers
        --connect_retries <number>   For implicit routes, number of connect retries
        --cluster_listen <url>       Cluster url from which members can solicit routes
        --cluster_force_new          Recovery (cairn): this server, whose Raft WAL is intact, leads its
                                     meta, stream and consumer groups alone; give it to ONE server after
                                     a majority lost its WALs, once (see README, "Damaged WALs")
`

// bindClusterFlags defines nats-server's cluster flags on the fields of c
// (bindFlags' rule: the current values are the defaults).
func bindClusterFlags(fs *flag.FlagSet, c *config.Cluster) {
	for _, n := range []string{"cluster", "cluster_listen"} {
		fs.Var((*clusterURLFlag)(c), n, "")
	}
	fs.Var((*routesFlag)(&c.Routes), "routes", "")
	stringVar(fs, &c.Name, "cluster_name")
	stringVar(fs, &c.Advertise, "cluster_advertise")
	boolVar(fs, &c.NoAdvertise, "no_advertise")
	intVar(fs, &c.ConnectRetries, "connect_retries")
}

// clusterURLFlag is --cluster: the listen host and port of the URL (":-1"
// asks for a free port) and, with user:password, the credentials peers
// must send (nats-server v2.15.2 opts.go overrideCluster).
type clusterURLFlag config.Cluster

// errClusterPassword is nats-server's error for a --cluster URL with a
// user and no password.
var errClusterPassword = errors.New("expected cluster password to be set")

func (f *clusterURLFlag) String() string {
	if f == nil || f.Port == 0 {
		return ""
	}
	return "nats://" + net.JoinHostPort(f.Host, strconv.Itoa(f.Port))
}

func (f *clusterURLFlag) Set(s string) error {
	random := strings.HasSuffix(s, ":-1")
	if random {
		s = strings.TrimSuffix(s, ":-1") + ":0"
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("cluster URL %q: %v", s, err)
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		return fmt.Errorf("cluster URL %q: %v", s, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return fmt.Errorf("cluster URL %q: bad port %q", s, port)
	}
	if random || p == 0 {
		p = server.RandomPort
	}
	f.Host, f.Port = host, p
	f.Username, f.Password = "", ""
	if u.User != nil {
		pass, ok := u.User.Password()
		if !ok {
			return errClusterPassword
		}
		f.Username, f.Password = u.User.Username(), pass
	}
	return nil
}

// routesFlag is --routes: a comma-separated list of route URLs
// (route.ParseURLs), kept as text.
type routesFlag string

func (f *routesFlag) String() string {
	if f == nil {
		return ""
	}
	return string(*f)
}

func (f *routesFlag) Set(s string) error {
	urls, err := route.ParseURLs(s)
	if err != nil {
		return err
	}
	list := make([]string, len(urls))
	for i, u := range urls {
		list[i] = u.String()
	}
	*f = routesFlag(strings.Join(list, ","))
	return nil
}

// clusterOptions turns the cluster settings into the server's. The route
// URLs were checked when they were read (flags or file).
func clusterOptions(c config.Cluster) server.ClusterOptions {
	o := server.ClusterOptions{
		Host:           c.Host,
		Port:           c.Port,
		Name:           c.Name,
		Advertise:      c.Advertise,
		NoAdvertise:    c.NoAdvertise,
		ConnectRetries: c.ConnectRetries,
		Username:       c.Username,
		Password:       c.Password,
		TLS:            c.TLS,
	}
	if urls, err := route.ParseURLs(c.Routes); err == nil {
		o.Routes = urls
	}
	return o
}
