package faults

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"
)

// corruptGlobs are, for each corrupt-* fault, the files to damage,
// relative to a server's store directory: the stream's message blocks
// (cairn's file store keeps them in msgs/msgs, nats-server's in msgs), or
// the Raft log (cairn's one WAL for every group of the server,
// docs/cluster.md "The WAL"; nats-server's log of the stream's group
// alone, the S-* directory of its system account).
var corruptGlobs = map[string][]string{
	"corrupt-msgs": {"jetstream/$G/streams/" + streamName + "/msgs/msgs/*.blk", "jetstream/$G/streams/" + streamName + "/msgs/*.blk"},
	"corrupt-wal":  {"jetstream/$SYS/_js_/raft/*.wal", "jetstream/$SYS/_js_/S-*/msgs/*.blk"},
}

// corrupt flips bytes in every file under store matching one of globs:
// 8 bytes (each XORed with a random non-zero byte) at 4 places in the
// middle half of the file's data (the file without its trailing zeros: a
// cairn WAL segment's preallocated space holds none, docs/cluster.md
// "The WAL's preallocated space"), chosen by rng. It returns what it
// did, one line a file, and an error when no file matched.
func corrupt(store string, globs []string, rng *rand.Rand) ([]string, error) {
	var done []string
	for _, g := range globs {
		files, err := filepath.Glob(filepath.Join(store, g))
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			n := len(b)
			for n > 0 && b[n-1] == 0 {
				n--
			}
			if n < 64 {
				continue
			}
			var at []int
			for range 4 {
				off := n/4 + rng.IntN(n/2-8)
				for k := range 8 {
					b[off+k] ^= byte(1 + rng.IntN(255))
				}
				at = append(at, off)
			}
			if err := os.WriteFile(f, b, 0o644); err != nil {
				return nil, err
			}
			rel, _ := filepath.Rel(store, f)
			done = append(done, fmt.Sprintf("flipped 8 bytes at offsets %v of %s (%d B)", at, rel, len(b)))
		}
	}
	if len(done) == 0 {
		return nil, fmt.Errorf("no file in %s matches %v", store, globs)
	}
	return done, nil
}

// readEach reads every message of msgs through each server in peers with
// direct gets ($JS.API.DIRECT.GET; the stream allows them), that server
// made the stream's leader first (a step-down with it preferred), and
// compares what it serves with msgs (what the ordered consumer read,
// already checked against the history). The leader's replica answers a
// direct get on either server (nats-server's replicas answer too, the
// server's own first), so each server's own replica is read. A message
// served with other headers or bytes is a problem; a replica that cannot
// lead or does not answer is noted (a fenced replica must not).
func (r *runner) readEach(msgs []stored, peers []int) (problems, notes []string) {
	if len(msgs) == 0 {
		return nil, nil
	}
	for _, i := range peers {
		if !r.c.Running(i) {
			continue
		}
		if err := r.makeLeader(i); err != nil {
			notes = append(notes, fmt.Sprintf("%s never led, not read: %v", r.c.Servers[i].Name, err))
			continue
		}
		p, n := r.readThrough(i, msgs)
		problems = append(problems, p...)
		notes = append(notes, n...)
	}
	return problems, notes
}

// makeLeader makes server i the stream's leader: a step-down naming it
// preferred, repeated until stream info names it (15 s at most).
func (r *runner) makeLeader(i int) error {
	name := r.c.Servers[i].Name
	return Until(15*time.Second, func() error {
		si, err := r.info(nil)
		if err != nil {
			return err
		}
		if si.Cluster != nil && si.Cluster.Leader == name {
			return nil
		}
		nc, err := nats.Connect(r.c.Servers[i].URL, nats.Timeout(2*time.Second), nats.NoReconnect())
		if err != nil {
			return err
		}
		defer nc.Close()
		req, _ := json.Marshal(map[string]any{"placement": map[string]string{"preferred": name}})
		m, err := nc.Request("$JS.API.STREAM.LEADER.STEPDOWN."+streamName, req, 5*time.Second)
		if err != nil {
			return err
		}
		time.Sleep(500 * time.Millisecond)
		return fmt.Errorf("not the leader after a step-down: %s", m.Data)
	})
}

// readThrough reads msgs with direct gets through server i, the leader.
func (r *runner) readThrough(i int, msgs []stored) (problems, notes []string) {
	name := r.c.Servers[i].Name
	nc, err := nats.Connect(r.c.Servers[i].URL, nats.Timeout(2*time.Second), nats.NoReconnect())
	if err != nil {
		return nil, []string{fmt.Sprintf("%s: no connection for direct gets: %v", name, err)}
	}
	defer nc.Close()
	var bad, unanswered, answered int
	var firstErr error
	for _, m := range msgs {
		req, _ := json.Marshal(map[string]uint64{"seq": m.seq})
		resp, err := nc.Request("$JS.API.DIRECT.GET."+streamName, req, 2*time.Second)
		if err == nil && resp.Header.Get("Status") != "" {
			err = fmt.Errorf("status %s %s", resp.Header.Get("Status"), resp.Header.Get("Description"))
		}
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("seq %d: %w", m.seq, err)
			}
			unanswered++
			if unanswered == 20 && answered == 0 {
				unanswered = len(msgs) - answered // the replica does not serve: say so once
				break
			}
			continue
		}
		answered++
		k, ok := parse(resp.Header)
		if !ok || k != m.k || !bytes.Equal(resp.Data, m.data) || resp.Header.Get("Nats-Sequence") != fmt.Sprint(m.seq) {
			bad++
			if bad <= 5 {
				problems = append(problems, fmt.Sprintf("%s served seq %d as %s (Nats-Sequence %q, %d bytes), stored %s",
					name, m.seq, k, resp.Header.Get("Nats-Sequence"), len(resp.Data), m.k))
			}
		}
	}
	if bad > 5 {
		problems = append(problems, fmt.Sprintf("%s served %d messages wrong in all", name, bad))
	}
	if unanswered > 0 {
		notes = append(notes, fmt.Sprintf("%s, leading, did not answer %d direct gets (first: %v)", name, unanswered, firstErr))
	}
	return problems, notes
}
