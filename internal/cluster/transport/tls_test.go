package transport_test

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/cairnmq/cairn/internal/cluster/transport"
	"github.com/cairnmq/cairn/internal/config"
	"github.com/cairnmq/cairn/internal/server"
)

// TestTLS: with the cluster block's tls, the transport's connections pass
// the cluster port's TLS handshake (Host.SecureClusterConn when dialing),
// so frames flow both ways inside TLS; a peer speaking the wire format in
// clear gets nothing, not even the INFO, and is closed; one with a
// certificate of the cluster's CA gets the INFO inside TLS and is
// admitted by the hello rules (package comment, "Wire format").
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	ca, caKey, caFile := testCA(t, dir)
	tlsOf := func(name string) config.TLS {
		c, k := testCert(t, dir, name, ca, caKey)
		return config.TLS{CertFile: c, KeyFile: k, CAFile: caFile}
	}
	withTLS := func(name string) func(o *server.ClusterOptions) {
		return func(o *server.ClusterOptions) { o.TLS = tlsOf(name) }
	}
	a := startMemberWith(t, "a", withTLS("a"), &Config{})
	b := startMemberWith(t, "b", withTLS("b"), &Config{}, a.routeURL(cred{}))
	waitRoutes(t, a, b)
	var ra, rb recorder
	a.tr.Attach(&ra)
	b.tr.Attach(&rb)
	sendUntilQueued(t, a.tr, "b", []byte("to b"))
	sendUntilQueued(t, b.tr, "a", []byte("to a"))
	waitFor(t, "frames both ways", func() bool { return len(ra.got()) == 1 && len(rb.got()) == 1 })

	nc, err := net.Dial("tcp", a.srv.ClusterAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = nc.Write(AppendHello(nil, &Hello{V: Version, Name: "b", Cluster: "C"}))
	r := bufio.NewReader(nc)
	if line, err := r.ReadString('\n'); err == nil || line != "" {
		t.Fatalf("a plain connection got %q (%v)", line, err)
	}

	peer := tlsOf("b")
	cert, err := tls.LoadX509KeyPair(peer.CertFile, peer.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	raw, err := net.Dial("tcp", a.srv.ClusterAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	tc := tls.Client(raw, &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, ServerName: "127.0.0.1"})
	_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
	r = bufio.NewReader(tc)
	if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "INFO {") || !strings.Contains(line, `"tls_required":true`) {
		t.Fatalf("INFO inside TLS: %q %v", line, err)
	}
	if got := sayHello(t, tc, r, &Hello{V: Version, Name: "b", Cluster: "C"}); got != "+OK\r\n" {
		t.Fatalf("hello inside TLS: %q", got)
	}
}

// testCA writes a CA certificate to dir.
func testCA(t *testing.T, dir string) (*x509.Certificate, *ecdsa.PrivateKey, string) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "transport test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	return ca, key, writePEM(t, dir, "ca.pem", "CERTIFICATE", der)
}

// testCert writes a certificate for 127.0.0.1 signed by ca, good for both
// ends of a TLS connection, and its key.
func testCert(t *testing.T, dir, name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey) (certFile, keyFile string) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	return writePEM(t, dir, name+".pem", "CERTIFICATE", der), writePEM(t, dir, name+".key", "EC PRIVATE KEY", kder)
}

func writePEM(t *testing.T, dir, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
