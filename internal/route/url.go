package route

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// DefaultPort is the cluster port when a route URL names none (nats-server
// v2.15.2 DEFAULT_ROUTE_PORT).
const DefaultPort = 6222

// ErrBadURL wraps every error of ParseURL and ParseURLs.
var ErrBadURL = errors.New("route: bad route URL")

// ParseURL parses one route URL: "nats://host:port", "nats-route://host:port"
// or any other scheme, optionally with "user:password@" (the credentials
// the dialing server sends in CONNECT), as nats-server's --routes accepts.
// A URL without a port gets DefaultPort. It returns an error wrapping
// ErrBadURL for text url.Parse rejects or a URL without a host.
func ParseURL(s string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("%w %q: %v", ErrBadURL, s, err)
	}
	if u.Hostname() == "" {
		return nil, fmt.Errorf("%w %q: no host", ErrBadURL, s)
	}
	if u.Port() == "" {
		u.Host = net.JoinHostPort(u.Hostname(), fmt.Sprint(DefaultPort))
	}
	return u, nil
}

// ParseURLs parses a comma-separated list of route URLs (nats-server's
// --routes): each with ParseURL, empty entries skipped.
func ParseURLs(list string) ([]*url.URL, error) {
	var urls []*url.URL
	for _, s := range strings.Split(list, ",") {
		if strings.TrimSpace(s) == "" {
			continue
		}
		u, err := ParseURL(s)
		if err != nil {
			return nil, err
		}
		urls = append(urls, u)
	}
	return urls, nil
}
