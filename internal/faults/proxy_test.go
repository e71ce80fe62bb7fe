package faults

import (
	"bufio"
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
