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
// The tests that start a JetStream cluster (jsClusterMod) run in parallel,
// as many at once as go test's -parallel (GOMAXPROCS by default): they
// mostly wait. One that asserts how long something takes, or fails on a
// busier machine, calls serialTest first. A new test waits on conditions,
// never on a whole request timeout it could avoid: ask again after 2 s
// (ctx2) inside eventually.
//
// The CLI tests need the nats binary (natscli v0.5.0). Without it they are
// skipped, unless CAIRN_REQUIRE_CLI=1, which CI sets.
package test
