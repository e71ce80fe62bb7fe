package auth

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"net/url"
	"testing"

	"github.com/cairnmq/cairn/internal/config"
)

// A certificate maps to the user its e-mail, DNS name or URI names, or
// whose DN has exactly the subject's attributes. String tricks (an
// escaped separator, an extra or missing attribute, another attribute
// type with the same value) never map (nats-server CVE-2026-33248).
func TestMapCert(t *testing.T) {
	d := NewDirectory(&config.Auth{Users: []config.User{
		{Name: "alice@example.com"},
		{Name: "svc.example.com"},
		{Name: "spiffe://example.com/worker"},
		{Name: "CN=bob,O=Acme"},
		{Name: `CN=carol\,O=Acme`},
		{Name: "cn=dave, ou=Ops, o=Acme"},
	}}, true)
	u, _ := url.Parse("spiffe://example.com/worker")
	cases := []struct {
		cert *x509.Certificate
		want string
	}{
		{&x509.Certificate{EmailAddresses: []string{"alice@example.com"}, Subject: pkix.Name{CommonName: "x"}}, "alice@example.com"},
		{&x509.Certificate{DNSNames: []string{"svc.example.com"}}, "svc.example.com"},
		{&x509.Certificate{URIs: []*url.URL{u}}, "spiffe://example.com/worker"},
		{&x509.Certificate{Subject: pkix.Name{CommonName: "bob", Organization: []string{"Acme"}}}, "CN=bob,O=Acme"},
		{&x509.Certificate{Subject: pkix.Name{CommonName: "dave", OrganizationalUnit: []string{"Ops"}, Organization: []string{"Acme"}}}, "cn=dave, ou=Ops, o=Acme"},
		{&x509.Certificate{Subject: pkix.Name{CommonName: "bob", Organization: []string{"Acme"}, OrganizationalUnit: []string{"x"}}}, ""},
		{&x509.Certificate{Subject: pkix.Name{CommonName: "bob"}}, ""},
		{&x509.Certificate{Subject: pkix.Name{CommonName: "carol", Organization: []string{"Acme"}}}, ""},
		{&x509.Certificate{Subject: pkix.Name{CommonName: "carol,O=Acme"}}, `CN=carol\,O=Acme`},
		{&x509.Certificate{Subject: pkix.Name{CommonName: "Acme", Organization: []string{"bob"}}}, ""},
		{nil, ""},
	}
	for i, tc := range cases {
		got := ""
		if u, ok := d.Authenticate(&Credentials{Cert: tc.cert}); ok {
			got = u.Name
		}
		if got != tc.want {
			t.Errorf("case %d: mapped to %q, want %q", i, got, tc.want)
		}
	}
}

func FuzzParseDN(f *testing.F) {
	f.Add(`CN=a\,b+O=c,OU=d`)
	f.Add(`2.5.4.3=x`)
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = parseDN(s)
	})
}
