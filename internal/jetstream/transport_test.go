package jetstream

import (
	"sync"

	"github.com/cairnmq/cairn/internal/subject"
)

// memTransport is an in-memory Transport: subscriptions are matched with
// subject.Match and handlers run on the publisher's goroutine, as the
// server runs them.
type memTransport struct {
	mu   sync.Mutex
	subs map[*memSub]struct{}
}

type memSub struct {
	t       *memTransport
	subject string
	h       MsgHandler
}

func newMemTransport() *memTransport { return &memTransport{subs: map[*memSub]struct{}{}} }

func (t *memTransport) Subscribe(subj, _ string, h MsgHandler) (Subscription, error) {
	s := &memSub{t: t, subject: subj, h: h}
	t.mu.Lock()
	t.subs[s] = struct{}{}
	t.mu.Unlock()
	return s, nil
}

func (s *memSub) Unsubscribe() {
	s.t.mu.Lock()
	delete(s.t.subs, s)
	s.t.mu.Unlock()
}

func (t *memTransport) Publish(subj, reply string, hdr, data []byte) bool {
	return t.PublishAs(subj, subj, reply, hdr, data)
}

func (t *memTransport) HasInterest(subj string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for s := range t.subs {
		if subject.Match(subj, s.subject) {
			return true
		}
	}
	return false
}

func (t *memTransport) PublishAs(route, subj, reply string, hdr, data []byte) bool {
	t.mu.Lock()
	var hs []MsgHandler
	for s := range t.subs {
		if subject.Match(route, s.subject) {
			hs = append(hs, s.h)
		}
	}
	t.mu.Unlock()
	for _, h := range hs {
		h(subj, reply, hdr, data)
	}
	return len(hs) > 0
}

// inbox collects replies published to one subject.
type inbox struct {
	ch chan []byte
}

func (t *memTransport) inbox(subj string) *inbox {
	in := &inbox{ch: make(chan []byte, 1024)}
	_, _ = t.Subscribe(subj, "", func(_, _ string, _, data []byte) {
		in.ch <- append([]byte(nil), data...)
	})
	return in
}
