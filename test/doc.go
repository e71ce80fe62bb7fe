// Package test holds cairn's integration tests. They start a real server on
// loopback and drive it with raw TCP (exact protocol bytes), the nats.go
// client and the nats CLI.
//
// Every test is differential: with CAIRN_TEST_TARGET=nats-server the same
// tests run against the nats-server binary (v2.15.2, from PATH or
// ~/go/bin), which proves that what they assert is nats-server's real
// behaviour:
//
//	go test ./test/                                  # against cairn
//	CAIRN_TEST_TARGET=nats-server go test ./test/    # against nats-server
//
// The CLI tests need the nats binary (natscli v0.5.0). Without it they are
// skipped, unless CAIRN_REQUIRE_CLI=1, which CI sets.
package test
