package server

import (
	"bufio"
	"fmt"
	"strings"
	"testing"

	"github.com/cairnmq/cairn/internal/jsapi"
)

// BenchmarkJSAPIRequest measures the JetStream API's request path over
// loopback: pipelined $JS.API.STREAM.INFO requests of one connection,
// each answered; one op is one request answered. "nobody listening" is
// the path every server runs (the audit advisory costs one interest
// lookup); "audit listener" adds a subscriber to $JS.EVENT.ADVISORY.API,
// so that each request also builds and sends its audit.
func BenchmarkJSAPIRequest(b *testing.B) {
	for _, listen := range []bool{false, true} {
		name := "nobody listening"
		if listen {
			name = "audit listener"
		}
		b.Run(name, func(b *testing.B) {
			s, err := New(Options{Host: "127.0.0.1", Port: RandomPort, JetStream: true, StoreDir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			if err := s.Start(); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(s.Shutdown)
			if listen {
				ln, lr := dialBench(b, s)
				fmt.Fprintf(ln, "SUB $JS.EVENT.ADVISORY.API 1\r\nPING\r\n")
				readUntilPong(b, lr)
				go func() { // drain the audits
					buf := make([]byte, 1<<16)
					for {
						if _, err := lr.Read(buf); err != nil {
							return
						}
					}
				}()
			}
			nc, r := dialBench(b, s)
			fmt.Fprintf(nc, "SUB _R.> 1\r\n")
			body := `{"name":"B","subjects":["b"],"storage":"memory"}`
			fmt.Fprintf(nc, "PUB $JS.API.STREAM.CREATE.B _R.0 %d\r\n%s\r\n", len(body), body)
			readMsgs(b, r, 1)
			const perBatch = 100
			var batch strings.Builder
			for range perBatch {
				batch.WriteString("PUB $JS.API.STREAM.INFO.B _R.1 0\r\n\r\n")
			}
			b.ResetTimer()
			for i := 0; i < b.N; i += perBatch {
				if _, err := nc.Write([]byte(batch.String())); err != nil {
					b.Fatal(err)
				}
				readMsgs(b, r, perBatch)
			}
		})
	}
}

// readMsgs reads n MSG frames (line and payload) from r.
func readMsgs(b *testing.B, r *bufio.Reader, n int) {
	b.Helper()
	for got := 0; got < n; {
		line, err := r.ReadString('\n')
		if err != nil {
			b.Fatal(err)
		}
		if !strings.HasPrefix(line, "MSG ") {
			continue
		}
		var size int
		f := strings.Fields(line)
		fmt.Sscan(f[len(f)-1], &size)
		if _, err := r.Discard(size + 2); err != nil {
			b.Fatal(err)
		}
		got++
	}
}

func readUntilPong(b *testing.B, r *bufio.Reader) {
	b.Helper()
	for line := ""; line != "PONG\r\n"; {
		var err error
		if line, err = r.ReadString('\n'); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAuditInterestLookup measures what the audit advisory adds to
// each API request while nobody listens: the interest lookup of
// $JS.EVENT.ADVISORY.API in the account (the API's auditor.note).
func BenchmarkAuditInterestLookup(b *testing.B) {
	s := startBenchServer(b)
	for b.Loop() {
		if s.hasInterestIn(s.gacc, jsapi.AuditSubject) {
			b.Fatal("interest")
		}
	}
}
