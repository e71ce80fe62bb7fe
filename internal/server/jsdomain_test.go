package server

import "testing"

// The mapping table of nats-server v2.15.2's generateJSMappingTable.
func TestMapJSDomain(t *testing.T) {
	prefix := jsDomainPrefix("HUB")
	for in, want := range map[string]string{
		"$JS.HUB.API.INFO":                  "$JS.API.INFO",
		"$JS.HUB.API.STREAM.CREATE.S":       "$JS.API.STREAM.CREATE.S",
		"$JS.HUB.API.CONSUMER.MSG.NEXT.S.C": "$JS.API.CONSUMER.MSG.NEXT.S.C",
		"$JS.HUB.API.DIRECT.GET.S":          "$JS.API.DIRECT.GET.S",
		"$JS.HUB.API.META.LEADER.STEPDOWN":  "$JS.API.META.LEADER.STEPDOWN",
		"$JS.HUB.API.SERVER.REMOVE":         "$JS.API.SERVER.REMOVE",
		"$JS.HUB.API.ACCOUNT.PURGE.A":       "$JS.API.ACCOUNT.PURGE.A",
		"$JS.HUB.API.$KV.bucket.key":        "$KV.bucket.key",
		"$JS.HUB.API.$OBJ.bucket.x":         "$OBJ.bucket.x",
		"$JS.HUB.API.STREAM":                "$JS.HUB.API.STREAM", // no token after the family
		"$JS.HUB.API.INFO.X":                "$JS.HUB.API.INFO.X",
		"$JS.HUB.API.FOO":                   "$JS.HUB.API.FOO",
		"$JS.OTHER.API.INFO":                "$JS.OTHER.API.INFO",
		"$JS.API.INFO":                      "$JS.API.INFO",
		"orders.new":                        "orders.new",
	} {
		got, mapped := mapJSDomain(prefix, []byte(in))
		if string(got) != want || mapped != (in != want) {
			t.Errorf("%s: %s (mapped %v), want %s", in, got, mapped, want)
		}
	}
	if got, mapped := mapJSDomain(nil, []byte("$JS.HUB.API.INFO")); mapped || string(got) != "$JS.HUB.API.INFO" {
		t.Errorf("without a domain: %s mapped", got)
	}
}
