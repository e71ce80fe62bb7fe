package faults

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// TestProxyHoldsAndHeals: a held direction delivers nothing until the
// heal, then everything in order; the other direction keeps flowing; the
// dialer is found as the process holding the socket (this one).
func TestProxyHoldsAndHeals(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan string, 16)
	go func() { // the server "b": says hello, then reports each line
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = c.Write([]byte("hello\n"))
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			got <- line
		}
	}()
	n := newNet(func() map[int]string { return map[int]string{os.Getpid(): "a"} })
	p, err := n.addProxy("b", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	n.Hold("a", "b")
	c, err := net.Dial("tcp", p.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || line != "hello\n" {
		t.Fatalf("b → a while a → b is held: %q %v", line, err)
	}
	for _, s := range []string{"one\n", "two\n"} {
		if _, err := c.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case line := <-got:
		t.Fatalf("b got %q while a → b is held", line)
	case <-time.After(200 * time.Millisecond):
	}
	n.Heal()
	for _, want := range []string{"one\n", "two\n"} {
		select {
		case line := <-got:
			if line != want {
				t.Fatalf("after the heal b got %q, want %q", line, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("after the heal b never got %q", want)
		}
	}
	if u := n.Unknown(); u != 0 {
		t.Fatalf("%d connections of unknown origin", u)
	}
}

// TestProxyShapes: a Shape's delay holds every read back by at least the
// delay, in order; its rate limits throughput; its resets close
// connections and are counted; Heal makes the network good again.
func TestProxyShapes(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // an echo server
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	n := newNet(func() map[int]string { return map[int]string{os.Getpid(): "a"} })
	p, err := n.addProxy("b", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", p.addr())
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		return c
	}
	roundTrip := func(c net.Conn, b []byte) time.Duration {
		start := time.Now()
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(b))
		if _, err := io.ReadFull(c, got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, b) {
			t.Fatal("echo differs")
		}
		return time.Since(start)
	}

	n.Shape(Shape{Delay: 100 * time.Millisecond})
	c := dial()
	if d := roundTrip(c, []byte("ping\n")); d < 200*time.Millisecond {
		t.Fatalf("round trip %v with 100 ms each way", d)
	}
	c.Close()

	n.Shape(Shape{Rate: 256 << 10})
	c = dial()
	if d := roundTrip(c, bytes.Repeat([]byte("x"), 256<<10)); d < 900*time.Millisecond {
		t.Fatalf("256 KiB through a 256 KiB/s link in %v", d)
	}
	c.Close()

	n.Shape(Shape{ResetMean: time.Millisecond})
	c = dial()
	deadline := time.Now().Add(10 * time.Second)
	for n.Resets() == 0 && time.Now().Before(deadline) {
		if _, err := c.Write([]byte("a")); err != nil {
			break
		}
		time.Sleep(time.Millisecond) // pacing: each write is a read of the proxy
	}
	c.Close()
	if n.Resets() == 0 {
		t.Fatal("no connection reset in 10 s")
	}

	n.Heal()
	c = dial()
	defer c.Close()
	if d := roundTrip(c, []byte("ping\n")); d > 5*time.Second {
		t.Fatalf("round trip %v after the heal", d)
	}
}
