package server

import (
	"errors"
	"net/url"
	"testing"
)

// TestReloadClusterRoutesAndAuth: ReloadCluster dials a route it adds,
// closes and stops dialing one it removes, closes an accepted route whose
// credentials new ones refuse, keeps a route this server dialed, and
// refuses a new cluster name, changing nothing, and gives the next route
// INFO and dial the new advertise, no_advertise and connect_retries
// (docs/routes.md).
func TestReloadClusterRoutesAndAuth(t *testing.T) {
	b := startClusterServer(t, "b", "C")
	a := startClusterServer(t, "a", "C")
	bURL, err := url.Parse(b.ClusterURL())
	if err != nil {
		t.Fatal(err)
	}
	ao := a.Options().Cluster
	ao.Routes = []*url.URL{bURL}
	if err := a.ReloadCluster(ao); err != nil {
		t.Fatal(err)
	}
	waitCond(t, "the added route", func() bool { return a.NumRoutes() == 1 && b.NumRoutes() == 1 })
	if got := a.Options().Cluster.Routes; len(got) != 1 || got[0].Host != bURL.Host {
		t.Errorf("Options().Cluster.Routes %v", got)
	}

	// b now requires credentials a's route did not carry: b closes the
	// route it accepted; a's dialer then fails with the old URL.
	bo := b.Options().Cluster
	bo.Username, bo.Password = "r", "pw"
	if err := b.ReloadCluster(bo); err != nil {
		t.Fatal(err)
	}
	waitCond(t, "the unauthorized route closed", func() bool { return a.NumRoutes() == 0 && b.NumRoutes() == 0 })
	if !b.ClusterAuthOK("r", "pw") || b.ClusterAuthOK("", "") {
		t.Error("b's Raft connections are not held to the new credentials")
	}

	// The route with the credentials.
	withCreds := *bURL
	withCreds.User = url.UserPassword("r", "pw")
	ao.Routes = []*url.URL{&withCreds}
	if err := a.ReloadCluster(ao); err != nil {
		t.Fatal(err)
	}
	waitCond(t, "the route with credentials", func() bool { return a.NumRoutes() == 1 && b.NumRoutes() == 1 })

	// A new name is refused and changes nothing.
	bad := ao
	bad.Routes, bad.Name = nil, "D"
	if err := a.ReloadCluster(bad); !errors.Is(err, ErrReloadUnsupported) {
		t.Errorf("a new cluster name: %v", err)
	}
	if a.NumRoutes() != 1 || len(a.Options().Cluster.Routes) != 1 {
		t.Error("a refused reload changed the routes")
	}

	// advertise, no_advertise and connect_retries reach the next route
	// INFO and dial.
	if in := a.routeInfo(false); len(in.ConnectURLs) == 0 {
		t.Fatal("the route INFO has no connect_urls before no_advertise")
	}
	adv := ao
	adv.NoAdvertise, adv.ConnectRetries, adv.Advertise = true, 3, "example.com:7000"
	if err := a.ReloadCluster(adv); err != nil {
		t.Fatal(err)
	}
	if in := a.routeInfo(false); len(in.ConnectURLs) != 0 || in.Host != "example.com" || in.Port != 7000 {
		t.Errorf("route INFO after the reload: connect_urls %v, %s:%d", in.ConnectURLs, in.Host, in.Port)
	}
	if a.clusterSet().connectRetries != 3 || a.Options().Cluster.ConnectRetries != 3 {
		t.Error("connect_retries not applied")
	}

	// Removed: closed, and not dialed again (the dialer stopped).
	ao.Routes = nil
	if err := a.ReloadCluster(ao); err != nil {
		t.Fatal(err)
	}
	waitCond(t, "the removed route closed", func() bool { return a.NumRoutes() == 0 && b.NumRoutes() == 0 })
	a.cl.mu.Lock()
	dialers := len(a.cl.dialers)
	a.cl.mu.Unlock()
	if dialers != 0 {
		t.Errorf("%d dialers after the route was removed", dialers)
	}
}
