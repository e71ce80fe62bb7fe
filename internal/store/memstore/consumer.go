package memstore

import "github.com/cairnmq/cairn/internal/store"

// consumerRec is the stored state of one consumer, shared by every handle
// opened on its name. It is guarded by the store's mutex.
type consumerRec struct {
	state   *store.ConsumerState
	deleted bool
}

// consumer is a handle on a consumer's state, returned by ConsumerStore.
// Its fields other than s are guarded by s.mu.
type consumer struct {
	s      *Store
	name   string
	rec    *consumerRec
	closed bool
}

// ConsumerStore opens the named consumer's state, creating an empty one.
// Handles on the same name share the state.
func (s *Store) ConsumerStore(name string) (store.ConsumerStore, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return nil, store.ErrClosed
	}
	rec := s.mu.consumers[name]
	if rec == nil {
		rec = &consumerRec{state: &store.ConsumerState{}}
		s.mu.consumers[name] = rec
	}
	return &consumer{s: s, name: name, rec: rec}, nil
}

// usableLocked returns store.ErrClosed when the handle, its state or the
// store is gone.
func (c *consumer) usableLocked() error {
	if c.closed || c.rec.deleted || c.s.mu.closed {
		return store.ErrClosed
	}
	return nil
}

// Update replaces the stored state with a copy of st after
// store.CheckConsumerState.
func (c *consumer) Update(st *store.ConsumerState) error {
	if err := store.CheckConsumerState(st); err != nil {
		return err
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if err := c.usableLocked(); err != nil {
		return err
	}
	c.rec.state = store.CloneConsumerState(st)
	return nil
}

// State returns a copy of the stored state.
func (c *consumer) State() (*store.ConsumerState, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if err := c.usableLocked(); err != nil {
		return nil, err
	}
	return store.CloneConsumerState(c.rec.state), nil
}

// Delete removes the consumer's state and closes the handle.
func (c *consumer) Delete() error {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if err := c.usableLocked(); err != nil {
		return err
	}
	c.rec.deleted = true
	c.closed = true
	delete(c.s.mu.consumers, c.name)
	return nil
}

// Close releases the handle; the state stays in the store.
func (c *consumer) Close() error {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if c.closed {
		return store.ErrClosed
	}
	c.closed = true
	return nil
}
