package consumerrun

import (
	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/store"
)

// What a consumer's runtime shows of itself beyond its info: for the
// engine's tests, and for checks that compare replicas.

// Snapshot returns the consumer's delivery state as it would be stored
// (consumer.State.Snapshot).
func (c *Consumer) Snapshot() *store.ConsumerState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.st.Snapshot()
}

// ConfigAndState returns, taken together under the consumer's lock, its
// config (with its name, also when generated) and its delivery state as
// it would be stored: what a stream snapshot holds of a consumer.
func (c *Consumer) ConfigAndState() (consumer.Config, *store.ConsumerState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cfg := c.cfg.Clone()
	cfg.Name = c.name
	return cfg, c.st.Snapshot()
}

// StoredDelivered returns the delivered stream sequence of the last
// snapshot the saver stored (0 for a consumer that is not persisted).
func (c *Consumer) StoredDelivered() uint64 { return c.durDelivered.Load() }

// StoredState reads the consumer's stored state from its store; an
// error for a consumer that is not persisted.
func (c *Consumer) StoredState() (*store.ConsumerState, error) {
	if c.cstore == nil {
		return nil, store.ErrNotFound
	}
	return c.cstore.State()
}

// NumMoves returns the number of dead-letter moves in progress.
func (c *Consumer) NumMoves() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.moves)
}

// MoveTries returns how many attempts of the dead-letter move of sseq
// failed since one was last answered, and whether it is moving.
func (c *Consumer) MoveTries(sseq uint64) (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if mv := c.moves[sseq]; mv != nil {
		return mv.tries, true
	}
	return 0, false
}

// Hold locks the consumer, so that its state does not change, and
// returns its delivery state with the function that unlocks it.
func (c *Consumer) Hold() (*consumer.State, func()) {
	c.mu.Lock()
	return c.st, c.mu.Unlock
}

// StateLocked returns the delivery state and the config; the caller
// holds the consumer's lock (a consumer Log's Propose runs with it held).
func (c *Consumer) StateLocked() (*consumer.State, *consumer.Config) { return c.st, &c.cfg }

// Prefix returns the subject prefix of the router's reply subjects.
func (d *DeadLetterAcks) Prefix() string { return d.prefix }
