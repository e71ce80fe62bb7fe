// Command scrape GETs monitoring endpoints every interval, as Prometheus
// and a dashboard polling a server would, until it is killed; it writes
// one line per round with each answer's HTTP status (0 when the request
// failed). bench/compare.sh runs it with SCRAPE=1. One process with
// keep-alive connections, so that the scraper itself costs the machine
// little next to the server it measures.
//
// Usage: go run ./bench/scrape -every 100ms http://127.0.0.1:8222/metrics 'http://127.0.0.1:8222/jsz?streams=true&consumers=true'
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

func main() {
	every := flag.Duration("every", 100*time.Millisecond, "pause between rounds")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "scrape: no URL")
		os.Exit(2)
	}
	c := &http.Client{Timeout: 5 * time.Second}
	w := bufio.NewWriter(os.Stdout)
	for {
		for i, u := range flag.Args() {
			if i > 0 {
				fmt.Fprint(w, " ")
			}
			fmt.Fprint(w, get(c, u))
		}
		fmt.Fprintln(w)
		_ = w.Flush()
		time.Sleep(*every)
	}
}

// get fetches u, reading the whole body, and returns the status or 0.
func get(c *http.Client, u string) int {
	resp, err := c.Get(u)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0
	}
	return resp.StatusCode
}
