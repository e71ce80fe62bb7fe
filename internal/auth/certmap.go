package auth

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"slices"
	"strings"
)

// Mapping a client certificate to a user (tls { verify_and_map: true };
// nats-server v2.15.2 auth.go checkClientTLSCertSubject): the user whose
// name is one of the certificate's e-mail addresses, DNS names or URIs,
// in that order, or whose name is a distinguished name equal to the
// certificate's subject. Names are compared after parsing, attribute by
// attribute (nats-server's CVE-2026-33248 was a DN string comparison
// that some RDN shapes bypassed): the configured DN and the subject must
// hold the same attributes with the same values, in any order of their
// relative names. The certificate was verified by the TLS handshake.

// mapCert returns the user the certificate maps to, or nil.
func (d *Directory) mapCert(cert *x509.Certificate) *User {
	if cert == nil {
		return nil
	}
	var names []string
	names = append(names, cert.EmailAddresses...)
	names = append(names, cert.DNSNames...)
	for _, u := range cert.URIs {
		names = append(names, u.String())
	}
	for _, n := range names {
		if u := d.users[n]; u != nil {
			return u
		}
	}
	subject := attributes(cert.Subject.ToRDNSequence())
	if len(subject) == 0 {
		return nil
	}
	for name, u := range d.users {
		if dn, ok := parseDN(name); ok && slices.Equal(dn, subject) {
			return u
		}
	}
	return nil
}

// attribute is one type=value of a distinguished name, the type as an
// OID string.
type attribute struct{ oid, value string }

// attributes flattens a name into its sorted attributes.
func attributes(seq pkix.RDNSequence) []attribute {
	var out []attribute
	for _, rdn := range seq {
		for _, atv := range rdn {
			s, ok := atv.Value.(string)
			if !ok {
				return nil // a value cairn cannot compare: no match
			}
			out = append(out, attribute{atv.Type.String(), s})
		}
	}
	sortAttributes(out)
	return out
}

func sortAttributes(a []attribute) {
	slices.SortFunc(a, func(x, y attribute) int {
		if c := strings.Compare(x.oid, y.oid); c != 0 {
			return c
		}
		return strings.Compare(x.value, y.value)
	})
}

// dnTypes are the attribute type names RFC 4514 (and Go's pkix.Name
// String) writes, with their OIDs.
var dnTypes = map[string]asn1.ObjectIdentifier{
	"CN": {2, 5, 4, 3}, "SERIALNUMBER": {2, 5, 4, 5}, "C": {2, 5, 4, 6}, "L": {2, 5, 4, 7},
	"ST": {2, 5, 4, 8}, "STREET": {2, 5, 4, 9}, "O": {2, 5, 4, 10}, "OU": {2, 5, 4, 11},
	"POSTALCODE": {2, 5, 4, 17}, "DC": {0, 9, 2342, 19200300, 100, 1, 25},
	"UID": {0, 9, 2342, 19200300, 100, 1, 1}, "EMAILADDRESS": {1, 2, 840, 113549, 1, 9, 1},
}

// parseDN parses an RFC 4514 distinguished name ("CN=alice,O=Acme",
// with \-escapes and + for multi-valued names) into its sorted
// attributes; ok is false when it is not one.
func parseDN(s string) ([]attribute, bool) {
	if !strings.Contains(s, "=") {
		return nil, false
	}
	var out []attribute
	var typ, val strings.Builder
	inValue := false
	flush := func() bool {
		t := strings.ToUpper(strings.TrimSpace(typ.String()))
		oid, ok := dnTypes[t]
		if !ok {
			if o, err := parseOID(t); err == nil {
				oid, ok = o, true
			}
		}
		if !ok || !inValue {
			return false
		}
		out = append(out, attribute{oid.String(), strings.TrimSpace(val.String())})
		typ.Reset()
		val.Reset()
		inValue = false
		return true
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == '\\' && i+1 < len(s):
			i++
			if !inValue {
				return nil, false
			}
			val.WriteByte(s[i])
		case ch == '=' && !inValue:
			inValue = true
		case (ch == ',' || ch == '+') && inValue:
			if !flush() {
				return nil, false
			}
		case inValue:
			val.WriteByte(ch)
		default:
			typ.WriteByte(ch)
		}
	}
	if !flush() {
		return nil, false
	}
	sortAttributes(out)
	return out, true
}

// parseOID parses a dotted OID ("2.5.4.3").
func parseOID(s string) (asn1.ObjectIdentifier, error) {
	var oid asn1.ObjectIdentifier
	for _, p := range strings.Split(s, ".") {
		n := 0
		if p == "" {
			return nil, errBadOID
		}
		for _, r := range p {
			if r < '0' || r > '9' {
				return nil, errBadOID
			}
			n = n*10 + int(r-'0')
		}
		oid = append(oid, n)
	}
	if len(oid) < 2 {
		return nil, errBadOID
	}
	return oid, nil
}

type authError string

func (e authError) Error() string { return string(e) }

const errBadOID = authError("auth: not an OID")
