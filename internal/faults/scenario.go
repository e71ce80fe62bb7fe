package faults

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// run carries out one run on a started cluster (Run's steps).
func (r *runner) run(res *Result) error {
	cfg, c := r.cfg, r.c
	if err := r.setup(); err != nil {
		return fmt.Errorf("create the stream: %w", err)
	}
	if _, _, err := r.leader(nil); err != nil {
		return fmt.Errorf("stream not ready: %w", err)
	}
	if cfg.Net != "" {
		c.Net.SetBase(Shapes[cfg.Net])
	}
	h := newHistory()
	stop, giveUp, stopCons := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	producers := []producerConfig{
		{id: 1, interval: 5 * time.Millisecond, timeout: 2 * time.Second},
		{id: 2, interval: 5 * time.Millisecond, timeout: 2 * time.Second},
		{id: 3, async: true, interval: 10 * time.Millisecond, timeout: time.Second},
	}
	async := map[int]bool{}
	for i, p := range producers {
		nc, err := r.connect(i)
		if err != nil {
			return err
		}
		opts := []jetstream.JetStreamOpt{}
		if p.async {
			async[p.id] = true
			opts = append(opts, jetstream.WithPublishAsyncMaxPending(4096), jetstream.WithPublishAsyncTimeout(p.timeout))
		}
		js, err := jetstream.New(nc, opts...)
		if err != nil {
			return err
		}
		wg.Add(1)
		go func(p producerConfig) {
			defer wg.Done()
			if p.async {
				runAsync(js, subject, h, p, stop, giveUp)
			} else {
				runSync(js, subject, h, p, stop, giveUp)
			}
		}(p)
	}
	cnc, err := r.connect(1)
	if err != nil {
		return err
	}
	cjs, err := jetstream.New(cnc)
	if err != nil {
		return err
	}
	clog := &consumerLog{got: map[key]bool{}}
	var cwg sync.WaitGroup
	cwg.Add(1)
	go func() { defer cwg.Done(); runConsumer(cjs, streamName, durable, clog, stopCons) }()
	var once sync.Once
	stopAll := func() {
		once.Do(func() {
			close(stop)
			time.AfterFunc(cfg.Wait, func() { close(giveUp) })
		})
		wg.Wait()
	}
	defer func() {
		stopAll()
		select {
		case <-stopCons:
		default:
			close(stopCons)
		}
		cwg.Wait()
	}()

	time.Sleep(cfg.Warm)
	if err := Until(cfg.Wait, func() error {
		if h.ackCount() == 0 {
			return fmt.Errorf("no PubAck")
		}
		return nil
	}); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	lead, peers, err := r.leader(nil)
	if err != nil {
		return err
	}
	cfg.Logf("%s: leader %s, %d acks before the fault", cfg.Fault, c.Servers[lead].Name, h.ackCount())
	f, err := r.inject(cfg.Fault, lead, peers)
	if err != nil {
		return err
	}
	heal, avoid := f.heal, f.avoid
	t0 := f.start // the fault is in effect: processes gone, stopped, or bytes held
	if t0.IsZero() {
		t0 = time.Now()
	}
	cfg.Logf("%s: in effect on %s", cfg.Fault, f.target)
	res.Target = f.target
	res.Notes = append(res.Notes, f.notes...)
	hold := time.Now().Add(cfg.MinHold)
	if !stalls[cfg.Fault] {
		_ = Until(cfg.MaxHold, func() error {
			if h.firstAckAfter(t0) < 0 {
				return fmt.Errorf("no ack")
			}
			return nil
		})
	}
	time.Sleep(time.Until(hold))
	if err := heal(); err != nil {
		return fmt.Errorf("heal: %w", err)
	}
	th := time.Now()
	cfg.Logf("%s: healed after %v", cfg.Fault, th.Sub(t0).Round(time.Millisecond))
	_ = Until(cfg.Wait, func() error {
		if h.firstAckAfter(th) < 0 {
			return fmt.Errorf("no ack")
		}
		return nil
	})
	rep := &Report{}
	var current time.Duration = -1
	var after *jetstream.StreamInfo
	var samples, oneBehind int // stream infos read; those with exactly one replica not current
	if err := Until(cfg.Wait, func() error {
		si, err := r.info(avoid)
		if err != nil {
			return err
		}
		after = si
		samples++
		if !allCurrent(si, cfg.Replicas, r.gone) {
			if behind(si) == 1 {
				oneBehind++
			}
			return fmt.Errorf("not current: %s", describe(si))
		}
		current = time.Since(th)
		return nil
	}); err != nil {
		msg := fmt.Sprintf("replicas not all current %v after the heal: %v", cfg.Wait, err)
		if after != nil && !strings.HasPrefix(err.Error(), "not current:") {
			msg += " (last stream info read: " + describe(after) + ")"
		}
		rep.Problems = append(rep.Problems, fmt.Sprintf("%s; %d of %d stream infos had exactly one replica not current", msg, oneBehind, samples))
	}
	if after != nil && after.Cluster != nil && after.Cluster.Leader != c.Servers[lead].Name {
		note := fmt.Sprintf("leader %s → %s", c.Servers[lead].Name, after.Cluster.Leader)
		if cfg.Fault == "pause-follower" {
			rep.Problems = append(rep.Problems, note+": a follower's pause changed the leader")
		} else {
			res.Notes = append(res.Notes, note)
		}
	} else if cfg.Fault == "pause-follower" {
		res.Notes = append(res.Notes, "leader kept")
	}
	time.Sleep(cfg.After)
	stopAll()
	res.ToAck, res.Healed, res.Current = h.firstAckAfter(t0), h.firstAckAfter(th), current
	cfg.Logf("%s: first ack %v after the fault, %v after the heal; all current %v after the heal",
		cfg.Fault, res.ToAck, res.Healed, current)
	res.Errors = h.errs.Load()

	if n := c.Net.Resets(); n > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("%d connections reset", n))
	}

	// Read the stream back and check the history.
	if _, p, err := r.leader(nil); err != nil {
		rep.Problems = append(rep.Problems, "stream not ready after the run: "+err.Error())
		if after != nil {
			peers = r.peers(after)
		}
	} else {
		peers = p
	}
	js, done, err := r.admin(nil)
	if err != nil {
		return err
	}
	defer done()
	var msgs []stored
	err = Until(cfg.Wait, func() error {
		var err error
		msgs, err = readStream(js, streamName, cfg.Wait/2)
		return err
	})
	if err != nil {
		return fmt.Errorf("read the stream: %w", err)
	}
	full := check(h, msgs, async)
	full.Problems = append(full.Problems, rep.Problems...)
	if err := r.replicasAgree(msgs, peers); err != nil {
		full.Problems = append(full.Problems, err.Error())
	}
	problems, notes := r.readEach(msgs, peers)
	full.Problems = append(full.Problems, problems...)
	res.Notes = append(res.Notes, notes...)
	if err := Until(cfg.Wait, func() error {
		for _, m := range msgs {
			if m.ok && !clog.has(m.k) {
				return fmt.Errorf("missing")
			}
		}
		return nil
	}); err != nil {
		for _, m := range msgs {
			if m.ok && !clog.has(m.k) {
				full.ConsumerMissing = append(full.ConsumerMissing, fmt.Sprintf("%s at %d", m.k, m.seq))
			}
		}
	}
	if n := c.Net.Unknown(); n > 0 && strings.HasPrefix(cfg.Fault, "partition") {
		full.Problems = append(full.Problems, fmt.Sprintf("%d cluster connections of unknown origin (not held)", n))
	}
	res.Report = full
	return nil
}

// fault is an injected fault: how to heal it, the servers not to ask for
// stream info until the heal, the servers hit, when it took effect (zero
// for when inject returned) and what to note about it.
type fault struct {
	heal   func() error
	avoid  map[int]bool
	target string
	start  time.Time
	notes  []string
}

// inject starts the fault on the cluster whose stream leader is lead and
// whose replicas are on peers (the leader first).
func (r *runner) inject(name string, lead int, peers []int) (*fault, error) {
	c := r.c
	n := len(c.Servers)
	followers := peers[1:]
	follower := func() int { return followers[r.rng.IntN(len(followers))] }
	names := func(idx ...int) string {
		s := ""
		for i, x := range idx {
			if i > 0 {
				s += ","
			}
			s += c.Servers[x].Name
			if x == lead && len(idx) < n {
				s += " (leader)"
			}
		}
		return s
	}
	restart := func(idx ...int) func() error {
		return func() error { return c.Start(idx...) }
	}
	heal := func() error { c.Net.Heal(); return nil }
	switch name {
	case "kill-leader":
		c.Kill(lead)
		return &fault{heal: restart(lead), target: names(lead)}, nil
	case "kill-random":
		i := r.rng.IntN(n)
		c.Kill(i)
		return &fault{heal: restart(i), target: names(i)}, nil
	case "kill-majority":
		// The leader and enough other replicas that a majority of the
		// stream's replicas is down.
		idx := []int{lead}
		for _, i := range r.rng.Perm(len(followers))[:len(peers)/2] {
			idx = append(idx, followers[i])
		}
		c.Kill(idx...)
		return &fault{heal: restart(idx...), target: names(idx...)}, nil
	case "pause-leader":
		c.Pause(lead)
		return &fault{heal: func() error { c.Resume(lead); return nil }, target: names(lead)}, nil
	case "pause-follower":
		i := follower()
		c.Pause(i)
		return &fault{heal: func() error { c.Resume(i); return nil }, avoid: map[int]bool{i: true}, target: names(i)}, nil
	case "restart-all":
		all := c.all()
		c.Kill(all...)
		return &fault{heal: restart(all...), target: "all"}, nil
	case "partition-leader-out", "partition-leader-in", "partition-leader", "partition-random":
		cut := lead
		if name == "partition-random" {
			cut = r.rng.IntN(n)
		}
		r.cut(cut, name != "partition-leader-in", name != "partition-leader-out")
		return &fault{heal: heal, avoid: map[int]bool{cut: true}, target: names(cut)}, nil
	case "flap-leader":
		return r.flap(lead)
	case "net-delay", "net-loss", "net-slow":
		c.Net.Shape(Shapes[strings.TrimPrefix(name, "net-")])
		return &fault{heal: heal, target: "all"}, nil
	case "wipe-random":
		i := r.rng.IntN(n)
		c.Kill(i)
		if err := c.Wipe(i); err != nil {
			return nil, err
		}
		return &fault{heal: restart(i), target: names(i)}, nil
	case "corrupt-msgs", "corrupt-wal":
		i := follower()
		c.Kill(i)
		hit, err := corrupt(c.Servers[i].store, corruptGlobs[name], r.rng)
		if err != nil {
			return nil, err
		}
		return &fault{heal: restart(i), target: names(i), notes: hit}, nil
	case "peer-remove":
		i := follower()
		if err := r.peerRemove(c.Servers[i].Name); err != nil {
			return nil, err
		}
		r.gone[c.Servers[i].Name] = true
		return &fault{heal: func() error { return nil }, target: names(i)}, nil
	}
	return nil, fmt.Errorf("unknown fault %q (known: %v)", name, Faults)
}

// cut holds the bytes server i sends to every other server (out) and
// those it receives from them (in).
func (r *runner) cut(i int, out, in bool) {
	me := r.c.Servers[i].Name
	for _, s := range r.c.Servers {
		if s.Name == me {
			continue
		}
		if out {
			r.c.Net.Hold(me, s.Name)
		}
		if in {
			r.c.Net.Hold(s.Name, me)
		}
	}
}

// flap cuts the stream's leader off (both directions) cfg.Flaps times,
// each time for 0.5 to 3 s (around an election timeout) with 0.3 to 1.5 s
// healed between; the leader is looked up again before each cut, through
// a server not cut off. The last cut is left for the heal. The fault
// takes effect at the first cut.
func (r *runner) flap(lead int) (*fault, error) {
	f := &fault{avoid: map[int]bool{}, heal: func() error { r.c.Net.Heal(); return nil }}
	var targets []string
	for round := 1; ; round++ {
		if round > 1 {
			if si, err := r.info(map[int]bool{lead: true}); err == nil && si.Cluster != nil {
				if i := r.c.Index(si.Cluster.Leader); i >= 0 {
					lead = i
				}
			}
		}
		r.cut(lead, true, true)
		if f.start.IsZero() {
			f.start = time.Now()
		}
		targets = append(targets, r.c.Servers[lead].Name)
		if round == r.cfg.Flaps {
			f.avoid[lead] = true
			break
		}
		time.Sleep(500*time.Millisecond + time.Duration(r.rng.Int64N(int64(2500*time.Millisecond))))
		r.c.Net.Heal()
		time.Sleep(300*time.Millisecond + time.Duration(r.rng.Int64N(int64(1200*time.Millisecond))))
	}
	f.target = strings.Join(targets, ",")
	return f, nil
}

// peerRemove asks for the stream's replica on server name to be moved
// elsewhere ($JS.API.STREAM.PEER.REMOVE, nats stream cluster
// peer-remove), through the first server that answers.
func (r *runner) peerRemove(name string) error {
	var last error
	for i := range r.c.Servers {
		nc, err := nats.Connect(r.c.Servers[i].URL, nats.Timeout(2*time.Second), nats.NoReconnect())
		if err != nil {
			last = err
			continue
		}
		req, _ := json.Marshal(map[string]string{"peer": name})
		m, err := nc.Request("$JS.API.STREAM.PEER.REMOVE."+streamName, req, 5*time.Second)
		nc.Close()
		if err != nil {
			last = err
			continue
		}
		var resp struct {
			Success bool `json:"success"`
			Error   *struct {
				Code        int    `json:"err_code"`
				Description string `json:"description"`
			} `json:"error"`
		}
		if err := json.Unmarshal(m.Data, &resp); err != nil {
			return fmt.Errorf("peer remove: %w", err)
		}
		if resp.Error != nil {
			return fmt.Errorf("peer remove: %d %s", resp.Error.Code, resp.Error.Description)
		}
		if !resp.Success {
			return fmt.Errorf("peer remove: %s", m.Data)
		}
		return nil
	}
	return fmt.Errorf("peer remove: %w", last)
}

// replicasAgree waits (cfg.Wait at most) until the own replica of the
// stream (its /jsz) of every server in peers holds what was read from the
// stream: the same count, first and last sequence on all, and the same
// bytes.
func (r *runner) replicasAgree(msgs []stored, peers []int) error {
	var want replicaState
	if len(msgs) > 0 {
		want = replicaState{Messages: uint64(len(msgs)), FirstSeq: msgs[0].seq, LastSeq: msgs[len(msgs)-1].seq}
	}
	return Until(r.cfg.Wait, func() error {
		var first *replicaState
		for _, i := range peers {
			s := r.c.Servers[i]
			st, err := localState(s.Mon, streamName)
			if err != nil {
				return err
			}
			if st.Messages != want.Messages || st.LastSeq != want.LastSeq || (want.Messages > 0 && st.FirstSeq != want.FirstSeq) {
				return fmt.Errorf("replica on %s holds %+v, the stream read %+v", s.Name, *st, want)
			}
			if first != nil && st.Bytes != first.Bytes {
				return fmt.Errorf("replica on %s holds %d bytes, another %d", s.Name, st.Bytes, first.Bytes)
			}
			first = st
		}
		return nil
	})
}
