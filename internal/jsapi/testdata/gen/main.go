// Command gen records testdata/golden.txt from testdata/golden.in: it
// sends every req and pub line of the script to a NATS server with
// nats.go and writes the script back with each reply on a "<" line
// (replacing the old "<" lines, keeping comments and "=" lines).
//
// Run it against a fresh nats-server v2.15.2:
//
//	nats-server -js -n n1 -p 4333 -sd $(mktemp -d) &
//	go run ./internal/jsapi/testdata/gen nats://127.0.0.1:4333 \
//	    internal/jsapi/testdata/golden.in > internal/jsapi/testdata/golden.txt
package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: gen <server url> <script>")
		os.Exit(2)
	}
	nc, err := nats.Connect(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer nc.Close()
	in, err := os.Open(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	run(nc, bufio.NewScanner(in), out)
}

func run(nc *nats.Conn, sc *bufio.Scanner, out *bufio.Writer) {
	var hdr nats.Header
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "<") {
			continue
		}
		fmt.Fprintln(out, line)
		verb, rest, _ := strings.Cut(line, " ")
		switch verb {
		case "hdr":
			k, v, _ := strings.Cut(rest, ":")
			hdr = nats.Header{}
			hdr.Set(k, strings.TrimPrefix(v, " "))
		case "req", "pub":
			subj, body, _ := strings.Cut(rest, " ")
			m := &nats.Msg{Subject: subj, Data: []byte(body), Header: hdr}
			hdr = nil
			r, err := nc.RequestMsg(m, time.Second)
			if err != nil {
				fmt.Fprintf(out, "< (%v)\n", err)
				continue
			}
			fmt.Fprintf(out, "< %s\n", r.Data)
		}
	}
}
