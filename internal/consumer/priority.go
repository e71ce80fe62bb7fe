package consumer

import (
	"slices"
	"time"

	"github.com/nats-io/nuid"
)

// Priority groups of pull consumers (ADR-42; nats-server v2.15.2
// consumer.go processNextMsgRequest, nextWaiting, assignNewPinId and the
// wait queue). A consumer with a priority_policy takes pull requests of
// its priority_groups only, and serves them by its policy:
//
//   - overflow: a request with min_pending or min_ack_pending is served
//     only while num_pending or num_ack_pending reaches one of them;
//     the others wait as if there were no message.
//   - pinned_client: one client gets every message. The first request
//     without an id served once no client is pinned is pinned: its
//     deliveries carry "Nats-Pin-Id: <id>" (a NUID), which its later
//     requests must send as "id"; requests without an id wait, and one
//     with another id is refused (423 "Nats-Pin-Id mismatch" when it
//     arrives, 423 "Nats-Wrong-Pin-Id" when a new pin is being chosen
//     or it is served). The pin ends when no request with it arrives
//     within priority_timeout, or on $JS.API.CONSUMER.UNPIN; both
//     publish an UNPINNED advisory, a new pin a PINNED one.
//   - prioritized: requests are served by priority, 0 first, in arrival
//     order within a priority.
//
// The pin is the delivering node's: it is not part of the consumer's
// state and a restart forgets it, as in nats-server.

// Priority group status frames (nats-server v2.15.2).
var (
	hdrNotOverflow    = statusHeader(400, "Bad Request - Not a Overflow Priority consumer")
	hdrNotPinned      = statusHeader(400, "Bad Request - Not a Pinned Client Priority consumer")
	hdrBadPriority    = statusHeader(400, "Bad Request - Priority must be between 0 and 9")
	hdrGroupMissing   = statusHeader(400, "Bad Request - Priority Group missing")
	hdrInvalidGroup   = statusHeader(400, "Bad Request - Invalid Priority Group")
	hdrPinIDMismatch  = statusHeader(423, "Nats-Pin-Id mismatch")
	hdrPinIDHeaderKey = "Nats-Pin-Id"
)

// PriorityGroupState is a consumer info's view of a priority group
// (nats-server v2.15.2 PriorityGroupState): the pinned client's id and
// since when, for the pinned_client policy. PinnedTS is always encoded
// (the zero time when none is pinned), as nats-server encodes it.
type PriorityGroupState struct {
	Group          string    `json:"group"`
	PinnedClientID string    `json:"pinned_client_id,omitempty"`
	PinnedTS       time.Time `json:"pinned_ts,omitempty"`
}

// PinEvent is a change of the pinned client, for the runtime to advise
// (TakePinEvents): Pinned with the new ID, or an unpin with its Reason,
// "timeout" or "admin".
type PinEvent struct {
	Pinned bool
	Group  string
	ID     string
	Reason string
}

// pinState is the pinned client of a pinned_client consumer.
type pinState struct {
	id       string
	group    string
	ts       time.Time // when it was pinned
	deadline time.Time // when it ends without a new request (priority_timeout)
	fresh    bool      // pinned by the pull target being served
	events   []PinEvent
	newID    func() string
}

// SetPinIDs makes newID the source of pin ids (nuid.Next by default);
// tests give a predictable one.
func (d *Deliverer) SetPinIDs(newID func() string) { d.pin.newID = newID }

// checkGroup runs nats-server v2.15.2's priority group checks of a pull
// request arriving at now, in its order, and returns the status to
// answer, nil when the request may wait. Only a JSON body is checked:
// min_pending or min_ack_pending without the overflow policy, an id
// without pinned_client, a priority outside 0 to 9 (400); with a policy,
// a missing or unknown group (400), and an id other than the pinned
// client's (423). A request of the pinned client renews the pin.
func (d *Deliverer) checkGroup(req *pullRequest, now time.Time) []byte {
	if !req.isJSON {
		return nil
	}
	pg, policy := &req.PriorityGroup, d.cfg.PriorityPolicy
	switch {
	case (pg.MinPending != 0 || pg.MinAckPending != 0) && policy != PriorityOverflow:
		return hdrNotOverflow
	case pg.Id != "" && policy != PriorityPinnedClient:
		return hdrNotPinned
	case pg.Priority < 0 || pg.Priority > 9:
		return hdrBadPriority
	case policy == PriorityNone:
		return nil
	case pg.Group == "":
		return hdrGroupMissing
	case !slices.Contains(d.cfg.PriorityGroups, pg.Group):
		return hdrInvalidGroup
	}
	if d.pin.id != "" {
		if pg.Id == d.pin.id {
			d.pin.deadline = now.Add(d.cfg.PinnedTTL)
		} else if pg.Id != "" {
			return hdrPinIDMismatch
		}
	}
	return nil
}

// insertByPriority queues w behind every request of its priority or a
// smaller one (a request without JSON last), as nats-server's
// insertAtPosition does.
func (d *Deliverer) insertByPriority(w *waiting) {
	i := 0
	for i < len(d.waiting) && requestPriority(d.waiting[i]) <= requestPriority(w) {
		i++
	}
	d.waiting = slices.Insert(d.waiting, i, w)
}

func requestPriority(w *waiting) int {
	if w.pg == nil {
		return 1<<31 - 1
	}
	return w.pg.Priority
}

// pullTarget returns the pull request the next message goes to, at now,
// as nats-server v2.15.2 nextWaiting chooses it: expired requests end
// (408), a new pin goes to the first request without an id when none is
// pinned, requests with a wrong id end (423 Nats-Wrong-Pin-Id), requests
// of other clients and overflow requests whose thresholds are not met
// go behind the others (until each was looked at once), requests nobody
// listens to any more are dropped.
func (d *Deliverer) pullTarget(now time.Time) (string, *waiting) {
	needPin := d.pin.id == "" && d.cfg.PriorityPolicy == PriorityPinnedClient
	ns := now.UnixNano()
	cycled := 0
	for len(d.waiting) > 0 {
		w := d.waiting[0]
		if w.expires > 0 && ns >= w.expires {
			d.endPull(w, pendingHeader(408, "Request Timeout", w.n, max(w.bytes, 0)))
			continue
		}
		d.pin.fresh = false
		switch {
		case needPin && (w.pg == nil || w.pg.Id == ""):
			d.assignPin(w, now)
		case needPin, d.pin.id != "" && w.pg != nil && w.pg.Id != "" && w.pg.Id != d.pin.id:
			d.endPull(w, pendingHeader(423, "Nats-Wrong-Pin-Id", w.n, max(w.bytes, 0)))
			continue
		case d.pin.id != "" && (w.pg == nil || w.pg.Id == ""):
			if cycled++; !d.cycle(cycled) {
				return "", nil
			}
			continue
		}
		if d.cfg.PriorityPolicy == PriorityOverflow && !d.overflowDue(w) {
			if cycled++; !d.cycle(cycled) {
				return "", nil
			}
			continue
		}
		if d.out.HasInterest(w.reply) {
			return w.reply, w
		}
		d.waiting = d.waiting[1:]
	}
	return "", nil
}

// cycle moves the first request behind the others, after the cycled-th
// such move of a pullTarget; false when every request was looked at.
func (d *Deliverer) cycle(cycled int) bool {
	if len(d.waiting) > 1 {
		w := d.waiting[0]
		d.waiting = append(d.waiting[:0], d.waiting[1:]...)
		d.waiting = append(d.waiting, w)
	}
	return cycled < len(d.waiting)
}

// overflowDue reports whether an overflow request may be served: it set
// no threshold, or num_pending (the message at hand included) reaches
// min_pending, or num_ack_pending reaches min_ack_pending.
func (d *Deliverer) overflowDue(w *waiting) bool {
	if w.pg == nil || (w.pg.MinPending <= 0 && w.pg.MinAckPending <= 0) {
		return true
	}
	return w.pg.MinPending > 0 && uint64(w.pg.MinPending) <= d.NumPending(d.end) ||
		w.pg.MinAckPending > 0 && w.pg.MinAckPending <= int64(d.st.NumAckPending())
}

// assignPin pins the client of w at now, with a new id that w's
// deliveries carry.
func (d *Deliverer) assignPin(w *waiting, now time.Time) {
	if w.pg == nil || w.pg.Group == "" {
		return
	}
	newID := d.pin.newID
	if newID == nil {
		newID = nuid.Next
	}
	d.pin.id, d.pin.group, d.pin.ts, d.pin.fresh = newID(), w.pg.Group, now.UTC(), true
	d.pin.deadline = now.Add(d.cfg.PinnedTTL)
	w.pg.Id = d.pin.id
	d.pin.events = append(d.pin.events, PinEvent{Pinned: true, Group: w.pg.Group, ID: d.pin.id})
}

// unpin forgets the pin, without an advisory.
func (d *Deliverer) unpin() {
	d.pin.id, d.pin.ts, d.pin.deadline, d.pin.fresh = "", time.Time{}, time.Time{}, false
}

// expirePin ends the pin whose priority_timeout ran out at now.
func (d *Deliverer) expirePin(now time.Time) {
	if d.pin.id == "" || d.pin.deadline.IsZero() || now.Before(d.pin.deadline) {
		return
	}
	group := d.pin.group
	d.unpin()
	d.pin.events = append(d.pin.events, PinEvent{Group: group, Reason: "timeout"})
}

// Unpin ends the pin of group ($JS.API.CONSUMER.UNPIN): false when the
// consumer has no such priority group (10160). It advises an unpin
// ("admin") also when no client was pinned, as nats-server v2.15.2 does.
func (d *Deliverer) Unpin(group string) bool {
	if !slices.Contains(d.cfg.PriorityGroups, group) {
		return false
	}
	d.unpin()
	d.pin.events = append(d.pin.events, PinEvent{Group: group, Reason: "admin"})
	return true
}

// TakePinEvents returns, and forgets, the pin changes since the last
// call, for the runtime's advisories.
func (d *Deliverer) TakePinEvents() []PinEvent {
	ev := d.pin.events
	d.pin.events = nil
	return ev
}

// PriorityGroups returns the consumer info's priority_groups: the first
// group with the pinned client (nats-server v2.15.2 reports only it), nil
// without groups.
func (d *Deliverer) PriorityGroups() []PriorityGroupState {
	if len(d.cfg.PriorityGroups) == 0 {
		return nil
	}
	return []PriorityGroupState{{Group: d.cfg.PriorityGroups[0], PinnedClientID: d.pin.id, PinnedTS: d.pin.ts}}
}

// pinHeader returns hdr with "Nats-Pin-Id: <pin>" appended for a
// delivery of a pinned_client consumer (nats-server genHeader); other
// consumers' headers are returned as they are.
func (d *Deliverer) pinHeader(hdr []byte) []byte {
	if d.cfg.PriorityPolicy != PriorityPinnedClient {
		return hdr
	}
	out := make([]byte, 0, len(hdr)+len(hdrPinIDHeaderKey)+len(d.pin.id)+16)
	if len(hdr) > 2 {
		out = append(out, hdr[:len(hdr)-2]...)
	} else {
		out = append(out, "NATS/1.0\r\n"...)
	}
	out = append(append(append(append(out, hdrPinIDHeaderKey...), ": "...), d.pin.id...), "\r\n\r\n"...)
	return out
}
