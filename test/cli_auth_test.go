package test

import (
	"strings"
	"testing"
	"time"
)

// The nats CLI with credentials and TLS (natscli v0.5.0 --user,
// --password, --tlsca, --tlscert, --tlskey), against cairn and
// nats-server with the same file.
func TestCLIAuthAndTLS(t *testing.T) {
	natsCLI(t)
	p := newPKI(t)
	certFile, keyFile, _, _ := p.issue(t, "clicert", clientTemplate("cli"))
	conf := tlsConf(p, t, "  verify: true\n") + `
authorization { users = [ { user: shop, password: s3cr3t, permissions: { publish: "orders.>", subscribe: "_INBOX.>" } } ] }`
	forEach(t, secTargets(t, conf, nil), func(t *testing.T, tg secTarget) {
		tlsArgs := []string{"--tlsca", p.caFile, "--tlscert", certFile, "--tlskey", keyFile}
		out, errOut := runCLI(t, tg.url, append(tlsArgs, "--user", "shop", "--password", "s3cr3t", "pub", "orders.new", "hello")...)
		if !strings.Contains(out+errOut, "Published 5 bytes") {
			t.Fatalf("pub: %q %q", out, errOut)
		}
		bad := startCLI(t, tg.url, append(tlsArgs, "--user", "shop", "--password", "wrong", "pub", "orders.new", "x")...)
		select {
		case <-bad.done:
		case <-time.After(cliTimeout):
			t.Fatal("nats with a wrong password did not exit")
		}
		if bad.err == nil || !strings.Contains(strings.ToLower(bad.output()), "authorization violation") {
			t.Fatalf("wrong password: %v %q", bad.err, bad.output())
		}
		noTLS := startCLI(t, strings.Replace(tg.url, "nats://", "nats://shop:s3cr3t@", 1), "pub", "orders.new", "x")
		<-noTLS.done
		if noTLS.err == nil {
			t.Fatalf("without TLS: %q", noTLS.output())
		}
	})
}
