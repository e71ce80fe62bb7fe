package server

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"testing"
)

// startBenchServer starts a server on a random loopback port.
func startBenchServer(b *testing.B) *Server {
	b.Helper()
	s, err := New(Options{Host: "127.0.0.1", Port: RandomPort})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.Shutdown)
	return s
}

func dialBench(b *testing.B, s *Server) (net.Conn, *bufio.Reader) {
	b.Helper()
	nc, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { nc.Close() })
	r := bufio.NewReaderSize(nc, 1<<16)
	if _, err := r.ReadString('\n'); err != nil { // INFO
		b.Fatal(err)
	}
	fmt.Fprintf(nc, "CONNECT {\"verbose\":false,\"pedantic\":false,\"protocol\":1,\"headers\":true}\r\nPING\r\n")
	for line := ""; line != "PONG\r\n"; {
		if line, err = r.ReadString('\n'); err != nil {
			b.Fatal(err)
		}
	}
	return nc, r
}

// pubBatch returns n PUB operations of size-byte payloads on subject.
func pubBatch(subject string, size, n int) []byte {
	var buf bytes.Buffer
	payload := bytes.Repeat([]byte("x"), size)
	for i := 0; i < n; i++ {
		fmt.Fprintf(&buf, "PUB %s %d\r\n%s\r\n", subject, size, payload)
	}
	return buf.Bytes()
}

// BenchmarkPublishNoSubscribers measures the server's publish path over
// loopback with 128-byte messages and no subscribers, like
// `nats bench pub`. One op is one message.
func BenchmarkPublishNoSubscribers(b *testing.B) {
	s := startBenchServer(b)
	nc, r := dialBench(b, s)
	const perBatch = 1000
	batch := pubBatch("bench.foo", 128, perBatch)
	b.SetBytes(128)
	b.ResetTimer()
	for i := 0; i < b.N; i += perBatch {
		if _, err := nc.Write(batch); err != nil {
			b.Fatal(err)
		}
	}
	nc.Write([]byte("PING\r\n"))
	for line := ""; line != "PONG\r\n"; {
		var err error
		if line, err = r.ReadString('\n'); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPublishOneSubscriber measures one publisher feeding one
// subscriber on another connection; one op is one message delivered.
func BenchmarkPublishOneSubscriber(b *testing.B) {
	s := startBenchServer(b)
	sub, sr := dialBench(b, s)
	fmt.Fprintf(sub, "SUB bench.foo 1\r\nPING\r\n")
	for line := ""; line != "PONG\r\n"; {
		var err error
		if line, err = sr.ReadString('\n'); err != nil {
			b.Fatal(err)
		}
	}
	pub, _ := dialBench(b, s)
	const perBatch = 1000
	batch := pubBatch("bench.foo", 128, perBatch)
	frame := len("MSG bench.foo 1 128\r\n") + 128 + 2
	b.SetBytes(128)
	b.ResetTimer()
	done := make(chan error, 1)
	total := ((b.N + perBatch - 1) / perBatch) * perBatch
	go func() {
		_, err := sr.Discard(total * frame)
		done <- err
	}()
	for i := 0; i < total; i += perBatch {
		if _, err := pub.Write(batch); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}
