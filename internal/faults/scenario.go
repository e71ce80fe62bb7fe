package faults

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// run carries out one run on a started cluster (Run's steps).
func (r *runner) run(res *Result) error {
	cfg, c := r.cfg, r.c
	if err := r.setup(); err != nil {
		return fmt.Errorf("create the stream: %w", err)
	}
	if _, err := r.leader(nil); err != nil {
		return fmt.Errorf("stream not ready: %w", err)
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
	lead, err := r.leader(nil)
	if err != nil {
		return err
	}
	cfg.Logf("%s: leader %s, %d acks before the fault", cfg.Fault, c.Servers[lead].Name, h.ackCount())
	heal, avoid, target, err := r.inject(cfg.Fault, lead)
	if err != nil {
		return err
	}
	t0 := time.Now() // the fault is in effect: processes gone, stopped, or bytes held
	cfg.Logf("%s: in effect on %s", cfg.Fault, target)
	res.Target = target
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
	if err := Until(cfg.Wait, func() error {
		si, err := r.info(avoid)
		if err != nil {
			return err
		}
		if !allCurrent(si, len(c.Servers)) {
			return fmt.Errorf("not current")
		}
		current = time.Since(th)
		return nil
	}); err != nil {
		rep.Problems = append(rep.Problems, fmt.Sprintf("replicas not all current %v after the heal: %v", cfg.Wait, err))
	}
	time.Sleep(cfg.After)
	stopAll()
	res.ToAck, res.Healed, res.Current = h.firstAckAfter(t0), h.firstAckAfter(th), current
	cfg.Logf("%s: first ack %v after the fault, %v after the heal; all current %v after the heal",
		cfg.Fault, res.ToAck, res.Healed, current)
	res.Errors = h.errs.Load()

	// Read the stream back and check the history.
	if _, err := r.leader(nil); err != nil {
		rep.Problems = append(rep.Problems, "stream not ready after the run: "+err.Error())
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
	if err := r.replicasAgree(msgs); err != nil {
		full.Problems = append(full.Problems, err.Error())
	}
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

// inject starts the fault on the cluster whose stream leader is lead. It
// returns the heal, the servers not to ask for stream info until the
// heal, and the servers hit.
func (r *runner) inject(fault string, lead int) (func() error, map[int]bool, string, error) {
	c := r.c
	n := len(c.Servers)
	other := func(not int) int {
		for {
			if i := r.rng.IntN(n); i != not {
				return i
			}
		}
	}
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
	switch fault {
	case "kill-leader":
		c.Kill(lead)
		return restart(lead), nil, names(lead), nil
	case "kill-random":
		i := r.rng.IntN(n)
		c.Kill(i)
		return restart(i), nil, names(i), nil
	case "kill-majority":
		o := other(lead)
		c.Kill(lead, o)
		return restart(lead, o), nil, names(lead, o), nil
	case "pause-leader":
		c.Pause(lead)
		return func() error { c.Resume(lead); return nil }, nil, names(lead), nil
	case "restart-all":
		all := c.all()
		c.Kill(all...)
		return restart(all...), nil, "all", nil
	case "partition-leader-out", "partition-leader-in", "partition-leader", "partition-random":
		cut := lead
		if fault == "partition-random" {
			cut = r.rng.IntN(n)
		}
		me := c.Servers[cut].Name
		for _, s := range c.Servers {
			if s.Name == me {
				continue
			}
			if fault != "partition-leader-in" {
				c.Net.Hold(me, s.Name)
			}
			if fault != "partition-leader-out" {
				c.Net.Hold(s.Name, me)
			}
		}
		heal := func() error { c.Net.Heal(); return nil }
		return heal, map[int]bool{cut: true}, names(cut), nil
	case "wipe-random":
		i := r.rng.IntN(n)
		c.Kill(i)
		if err := c.Wipe(i); err != nil {
			return nil, nil, "", err
		}
		return restart(i), nil, names(i), nil
	}
	return nil, nil, "", fmt.Errorf("unknown fault %q (known: %v)", fault, Faults)
}

// replicasAgree waits (cfg.Wait at most) until every server's own replica
// of the stream (its /jsz) holds what was read from the stream: the same
// count, first and last sequence on all three, and the same bytes.
func (r *runner) replicasAgree(msgs []stored) error {
	var want replicaState
	if len(msgs) > 0 {
		want = replicaState{Messages: uint64(len(msgs)), FirstSeq: msgs[0].seq, LastSeq: msgs[len(msgs)-1].seq}
	}
	return Until(r.cfg.Wait, func() error {
		var first *replicaState
		for _, s := range r.c.Servers {
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
