package memstore

import (
	"fmt"
	"math"

	"github.com/cairnmq/cairn/internal/store"
)

// SkipTo makes seq the sequence the next Append assigns
// (store.Store.SkipTo): an empty store starts at seq, a store with
// messages gets the gap LastSeq+1..seq-1, which costs one run however
// long it is. seq = LastSeq+1 changes nothing; seq <= LastSeq or seq =
// math.MaxUint64 is store.ErrBadRequest.
func (s *Store) SkipTo(seq uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return store.ErrClosed
	}
	l := &s.mu.log
	switch {
	case seq <= l.last || seq == math.MaxUint64:
		return fmt.Errorf("%w: skip to sequence %d with last sequence %d", store.ErrBadRequest, seq, l.last)
	case seq > l.last+1:
		l.skipTo(seq)
	}
	return nil
}
