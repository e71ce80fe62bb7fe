package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/server"
)

// The cluster flags mean what nats-server v2.15.2's mean (opts.go
// overrideCluster, RoutesFromStr; docs/routes.md), and reach the
// server's options.
func TestClusterFlags(t *testing.T) {
	c := settingsOf(t,
		"--cluster", "nats://ruser:rpass@127.0.0.1:6333", "--cluster_name", "C1",
		"--routes", "nats://127.0.0.1:6333, nats-route://u:p@10.0.0.2:6222,nats://host3",
		"--cluster_advertise", "example.com:7000", "--no_advertise", "--connect_retries", "3")
	o := clusterOptions(c.Cluster)
	if o.Host != "127.0.0.1" || o.Port != 6333 || o.Username != "ruser" || o.Password != "rpass" || o.Name != "C1" ||
		o.Advertise != "example.com:7000" || !o.NoAdvertise || o.ConnectRetries != 3 {
		t.Fatalf("cluster options: %+v", o)
	}
	var routes []string
	for _, u := range o.Routes {
		routes = append(routes, u.String())
	}
	if got := strings.Join(routes, " "); got != "nats://127.0.0.1:6333 nats-route://u:p@10.0.0.2:6222 nats://host3:6222" {
		t.Fatalf("routes %q", got)
	}

	random := settingsOf(t, "--cluster_listen", "nats://0.0.0.0:-1")
	if random.Cluster.Port != server.RandomPort || random.Cluster.Host != "0.0.0.0" {
		t.Fatalf("random cluster port: %+v", random.Cluster)
	}

	for args, want := range map[string]string{
		"--cluster nats://user@127.0.0.1:6222": "expected cluster password to be set",
		"--cluster nats://127.0.0.1":           "missing port",
		"--routes nats://:6222":                "bad route URL",
	} {
		var errOut bytes.Buffer
		_, err := parseArgs(strings.Fields(args), &bytes.Buffer{}, &errOut)
		if err == nil || !strings.Contains(errOut.String(), want) {
			t.Errorf("%s: %v, stderr %q, want %q", args, err, errOut.String(), want)
		}
	}
}

// --routes without --cluster is refused at start, as nats-server refuses
// it.
func TestRoutesNeedCluster(t *testing.T) {
	var errOut bytes.Buffer
	code := run([]string{"-a", "127.0.0.1", "-p", "-1", "--routes", "nats://127.0.0.1:6222"}, &bytes.Buffer{}, &errOut, noWait)
	if code != 1 || !strings.Contains(errOut.String(), "solicited routes require cluster capabilities") {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
}

// The cluster block of a configuration file reaches the server's options,
// and flags override it (docs/configuration.md).
func TestClusterBlock(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "c.conf")
	conf := `cluster {
  name: c1
  listen: 127.0.0.1:6444
  routes: [nats://127.0.0.1:6444, "nats://u:p@127.0.0.1:6445"]
  advertise: example.com:7000
  no_advertise: true
  connect_retries: 2
  authorization { user: ruser, password: s3cret }
}
`
	if err := os.WriteFile(file, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	o := clusterOptions(settingsOf(t, "-c", file).Cluster)
	if o.Name != "c1" || o.Host != "127.0.0.1" || o.Port != 6444 || len(o.Routes) != 2 || o.Routes[1].User.Username() != "u" ||
		o.Advertise != "example.com:7000" || !o.NoAdvertise || o.ConnectRetries != 2 || o.Username != "ruser" || o.Password != "s3cret" {
		t.Fatalf("from the file: %+v", o)
	}
	o = clusterOptions(settingsOf(t, "-c", file, "--cluster_name", "c2", "--routes", "nats://h:1").Cluster)
	if o.Name != "c2" || len(o.Routes) != 1 || o.Routes[0].Host != "h:1" || o.Port != 6444 {
		t.Fatalf("flags over the file: %+v", o)
	}
}

// The cluster block's tls reaches the server's cluster options: dropping
// it on the way would leave the routes in clear.
func TestClusterTLSBlock(t *testing.T) {
	dir := t.TempDir()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	_ = os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	_ = os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
	file := filepath.Join(dir, "c.conf")
	conf := fmt.Sprintf("cluster {\n  listen: 127.0.0.1:6444\n  tls { cert_file: %q, key_file: %q, ca_file: %q, timeout: 5 }\n}\n", certFile, keyFile, certFile)
	if err := os.WriteFile(file, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	o := clusterOptions(settingsOf(t, "-c", file).Cluster)
	if o.TLS.CertFile != certFile || o.TLS.KeyFile != keyFile || o.TLS.CAFile != certFile || o.TLS.Timeout != 5*time.Second {
		t.Fatalf("cluster TLS %+v", o.TLS)
	}
}

// --cluster_force_new is a command-line flag only (docs/cluster.md,
// "Forcing a new cluster"): it is read by parseArgs, off without it,
// and not a setting a reload could carry.
func TestClusterForceNewFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{{nil, false}, {[]string{"--cluster_force_new"}, true}, {[]string{"-cluster_force_new=false"}, false}} {
		cl, err := parseArgs(tc.args, io.Discard, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if cl.forceNew != tc.want {
			t.Fatalf("%v: forceNew %v, want %v", tc.args, cl.forceNew, tc.want)
		}
	}
}
