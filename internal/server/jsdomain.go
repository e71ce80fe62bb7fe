package server

import "bytes"

// The JetStream domain (Options.JetStreamDomain): nats-server v2.15.2
// adds account subject mappings so that local clients reach JetStream
// under $JS.<domain>.API as well as $JS.API (jetstream_api.go
// generateJSMappingTable). cairn applies the same table to every client
// publish, before it is matched; subscribers see the mapped subject:
//
//	$JS.<domain>.API.INFO           -> $JS.API.INFO
//	$JS.<domain>.API.STREAM.>       -> $JS.API.STREAM.>
//	$JS.<domain>.API.CONSUMER.>     -> $JS.API.CONSUMER.>
//	$JS.<domain>.API.DIRECT.>       -> $JS.API.DIRECT.>
//	$JS.<domain>.API.META.>         -> $JS.API.META.>
//	$JS.<domain>.API.SERVER.>       -> $JS.API.SERVER.>
//	$JS.<domain>.API.ACCOUNT.>      -> $JS.API.ACCOUNT.>
//	$JS.<domain>.API.$KV.>          -> $KV.>
//	$JS.<domain>.API.$OBJ.>         -> $OBJ.>
//
// Anything else under the prefix is left as it is. A message from a
// route was mapped by the server its publisher is connected to.

// jsDomainFamilies are the suffixes mapped into $JS.API. with at least
// one token after them.
var jsDomainFamilies = [][]byte{[]byte("STREAM."), []byte("CONSUMER."), []byte("DIRECT."),
	[]byte("META."), []byte("SERVER."), []byte("ACCOUNT.")}

// mapJSDomain returns the subject subj maps to under the domain prefix
// ("$JS.<domain>.API.") and true, or subj and false when it maps to
// nothing.
func mapJSDomain(prefix, subj []byte) ([]byte, bool) {
	if len(prefix) == 0 || len(subj) <= len(prefix) || subj[0] != '$' || !bytes.HasPrefix(subj, prefix) {
		return subj, false
	}
	rest := subj[len(prefix):]
	if string(rest) == "INFO" {
		return []byte("$JS.API.INFO"), true
	}
	for _, f := range jsDomainFamilies {
		if len(rest) > len(f) && bytes.HasPrefix(rest, f) {
			return append([]byte("$JS.API."), rest...), true
		}
	}
	for _, kv := range [][]byte{[]byte("$KV."), []byte("$OBJ.")} {
		if len(rest) > len(kv) && bytes.HasPrefix(rest, kv) {
			return append([]byte(nil), rest...), true
		}
	}
	return subj, false
}

// jsDomainPrefix returns "$JS.<domain>.API." for a domain, nil for none.
func jsDomainPrefix(domain string) []byte {
	if domain == "" {
		return nil
	}
	return []byte("$JS." + domain + ".API.")
}
