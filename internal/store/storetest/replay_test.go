package storetest_test

import (
	"sync"
	"testing"

	"github.com/cairnmq/cairn/internal/store"
	"github.com/cairnmq/cairn/internal/store/memstore"
	"github.com/cairnmq/cairn/internal/store/storetest"
)

// TestReplayEngine runs the suite, reopen checks included, against a
// memstore that "persists" by replaying every mutation on reopen. It
// checks the suite's own reopen machinery and expectations.
func TestReplayEngine(t *testing.T) {
	storetest.Run(t, storetest.Engine{
		Name: "replay",
		New: func(t *testing.T, cfg store.Config) store.Store {
			r := &replay{cfg: cfg}
			r.Store = memstore.New(cfg)
			return r
		},
		Reopen: func(t *testing.T, s store.Store, cfg store.Config) store.Store {
			r := s.(*replay)
			if err := r.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			return r.reopen(t)
		},
	})
}

// replay is a memstore with a log of every mutation.
type replay struct {
	store.Store
	mu       sync.Mutex
	cfg      store.Config              // the configuration at creation
	ops      []func(store.Store) error // mutations, in order
	replayed uint64                    // removals made by the replay on reopen
}

// reopen returns a fresh memstore with the log replayed.
func (r *replay) reopen(t *testing.T) *replay {
	n := &replay{cfg: r.cfg, ops: r.ops, Store: memstore.New(r.cfg)}
	for _, op := range r.ops {
		op(n.Store)
	}
	n.replayed = n.Store.Removals()
	return n
}

// Removals counts from the reopen, as a persistent engine does.
func (r *replay) Removals() uint64 { return r.Store.Removals() - r.replayed }

// do runs op now and logs it.
func (r *replay) do(op func(store.Store) error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	err := op(r.Store)
	if err == nil {
		r.ops = append(r.ops, op)
	}
	return err
}

func (r *replay) Append(m store.Msg) (seq uint64, err error) {
	m = store.Msg{Subject: m.Subject, Header: clone(m.Header), Data: clone(m.Data), Time: m.Time}
	err = r.do(func(s store.Store) error { seq, err = s.Append(m); return err })
	return seq, err
}

func (r *replay) SkipTo(seq uint64) error {
	return r.do(func(s store.Store) error { return s.SkipTo(seq) })
}

func (r *replay) Delete(seq uint64) error {
	return r.do(func(s store.Store) error { return s.Delete(seq) })
}

func (r *replay) DeleteMany(seqs []uint64) (n uint64, err error) {
	seqs = append([]uint64(nil), seqs...)
	err = r.do(func(s store.Store) error { n, err = s.DeleteMany(seqs); return err })
	return n, err
}

func (r *replay) Purge(req store.PurgeRequest) (n uint64, err error) {
	err = r.do(func(s store.Store) error { n, err = s.Purge(req); return err })
	return n, err
}

func (r *replay) Compact(seq uint64) (n uint64, err error) {
	err = r.do(func(s store.Store) error { n, err = s.Compact(seq); return err })
	return n, err
}

func (r *replay) ExpireUpTo(now int64) (x store.Expiry, err error) {
	err = r.do(func(s store.Store) error { x, err = s.ExpireUpTo(now); return err })
	return x, err
}

func (r *replay) UpdateConfig(cfg store.Config) error {
	return r.do(func(s store.Store) error { return s.UpdateConfig(cfg) })
}

func (r *replay) ConsumerStore(name string) (store.ConsumerStore, error) {
	cs, err := r.Store.ConsumerStore(name)
	if err != nil {
		return nil, err
	}
	r.do(func(s store.Store) error { _, err := s.ConsumerStore(name); return err })
	return &replayConsumer{ConsumerStore: cs, r: r, name: name}, nil
}

// replayConsumer logs consumer updates and deletes.
type replayConsumer struct {
	store.ConsumerStore
	r    *replay
	name string
}

func (c *replayConsumer) Update(st *store.ConsumerState) error {
	if err := c.ConsumerStore.Update(st); err != nil {
		return err
	}
	st = store.CloneConsumerState(st)
	return c.r.do(func(s store.Store) error {
		return c.apply(s, func(cs store.ConsumerStore) error { return cs.Update(st) })
	})
}

func (c *replayConsumer) Delete() error {
	if err := c.ConsumerStore.Delete(); err != nil {
		return err
	}
	return c.r.do(func(s store.Store) error { return c.apply(s, store.ConsumerStore.Delete) })
}

// apply runs f on the named consumer of s, except on the live store,
// where the embedded handle already did it.
func (c *replayConsumer) apply(s store.Store, f func(store.ConsumerStore) error) error {
	if s == c.r.Store {
		return nil
	}
	cs, err := s.ConsumerStore(c.name)
	if err != nil {
		return err
	}
	return f(cs)
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }
