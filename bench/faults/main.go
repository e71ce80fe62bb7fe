// Command faults runs the process-level fault suite (internal/faults,
// docs/cluster.md "The process-level fault suite") against cairn and
// nats-server in the same run and prints one table: per fault and
// server, the history check and the recovery times.
//
// Usage:
//
//	go build -o bin/cairn ./cmd/cairn
//	go run ./bench/faults -rounds 1 -seed 1
//	go run ./bench/faults -faults kill-leader,pause-leader -servers cairn
//	go run ./bench/faults -faults kill-leader -net delay   # under a bad network
//	go run ./bench/faults -n 5 -replicas 5                 # five servers
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/cairnmq/cairn/internal/faults"
)

func main() {
	cairn := flag.String("cairn", "bin/cairn", "cairn binary")
	natsServer := flag.String("nats-server", "", "nats-server binary (default: on PATH or ~/go/bin)")
	servers := flag.String("servers", "cairn,nats-server", "which servers to run, comma-separated")
	list := flag.String("faults", strings.Join(faults.Faults, ","), "faults to inject, comma-separated")
	rounds := flag.Int("rounds", 1, "rounds of every fault")
	seed := flag.Uint64("seed", 1, "seed of the random choices (round r uses seed+r-1)")
	dir := flag.String("dir", "", "directory for stores and logs (default: the system's temporary directory)")
	keep := flag.Bool("keep", false, "keep every run's directory (failed runs are always kept)")
	verbose := flag.Bool("v", false, "log each run's steps")
	hold := flag.Duration("hold", 2*time.Second, "how long a fault lasts at least")
	maxHold := flag.Duration("maxhold", 20*time.Second, "how long a fault that leaves a majority lasts at most while no publish is acknowledged")
	count := flag.Int("n", 3, "server processes in each cluster")
	replicas := flag.Int("replicas", 0, "the stream's replicas (default 3, or n if fewer)")
	network := flag.String("net", "", "a bad network for the whole run: delay, loss or slow (docs/cluster.md)")
	flaps := flag.Int("flaps", 5, "partitions of flap-leader")
	warm := flag.Duration("warm", 2*time.Second, "publishing before the fault (past 10 s, cairn has checkpointed its streams)")
	flag.Parse()
	bins := faults.Binaries(*cairn, *natsServer)
	row := func(cols ...any) { fmt.Printf("%-21s %5v %-11s %-12s %6v %6v %13v %13v %16v %8v  %v\n", cols...) }
	row("fault", "round", "server", "target", "acked", "stored", "fault→1st ack", "heal→writable", "heal→all current", "failures", "check")
	failed := false
	for _, fault := range strings.Split(*list, ",") {
		for r := 1; r <= *rounds; r++ {
			for _, srv := range strings.Split(*servers, ",") {
				cfg := faults.Config{Bin: bins[srv], Dir: *dir, Fault: fault, Seed: *seed + uint64(r-1), Keep: *keep,
					MinHold: *hold, MaxHold: *maxHold, Servers: *count, Replicas: *replicas, Net: *network, Flaps: *flaps, Warm: *warm}
				if *verbose {
					cfg.Logf = func(f string, a ...any) { fmt.Fprintf(os.Stderr, srv+": "+f+"\n", a...) }
				}
				res, err := faults.Run(cfg)
				if err != nil {
					failed = true
					row(fault, r, srv, "", "", "", "", "", "", "", "error: "+err.Error())
					continue
				}
				check := res.Report.String()
				if !res.Report.OK() {
					failed = true
					check += " (kept " + res.Dir + ")"
				}
				if len(res.Notes) > 0 {
					check += "; " + strings.Join(res.Notes, "; ")
				}
				row(fault, r, srv, res.Target, res.Report.Acked, res.Report.Stored, dur(res.ToAck), dur(res.Healed),
					dur(res.Current), res.Errors, check)
			}
		}
	}
	if failed {
		os.Exit(1)
	}
}

// dur prints a duration in seconds with milliseconds, "–" for -1.
func dur(d time.Duration) string {
	if d < 0 {
		return "–"
	}
	return fmt.Sprintf("%.3f s", d.Seconds())
}
