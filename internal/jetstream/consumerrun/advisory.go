package consumerrun

import (
	"encoding/json"
	"time"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/nats-io/nuid"
)

// consumerPauseAdvisory is nats-server's JSConsumerPauseAdvisory.
type consumerPauseAdvisory struct {
	Type       string    `json:"type"`
	ID         string    `json:"id"`
	Time       time.Time `json:"timestamp"`
	Stream     string    `json:"stream"`
	Consumer   string    `json:"consumer"`
	Paused     bool      `json:"paused"`
	PauseUntil time.Time `json:"pause_until,omitempty"`
	Domain     string    `json:"domain,omitempty"`
}

// AdvisePause publishes the consumer's pause advisory on
// $JS.EVENT.ADVISORY.CONSUMER.PAUSE.<S>.<C> (paused false when a pause
// ended or was lifted; until is the pause's end, the zero time for none).
func (c *Consumer) AdvisePause(paused bool, until time.Time) {
	b, err := json.Marshal(consumerPauseAdvisory{
		Type: "io.nats.jetstream.advisory.v1.consumer_pause", ID: nuid.Next(), Time: c.now().UTC(),
		Stream: c.sr.Name(), Consumer: c.name, Paused: paused, PauseUntil: until,
		Domain: c.env.Domain,
	})
	if err == nil {
		c.env.Transport.Publish("$JS.EVENT.ADVISORY.CONSUMER.PAUSE."+c.sr.Name()+"."+c.name, "", nil, b)
	}
}

// consumerPinnedAdvisory is nats-server's JSConsumerGroupPinnedAdvisory
// (ADR-42): a priority group pinned a new client.
type consumerPinnedAdvisory struct {
	Type     string    `json:"type"`
	ID       string    `json:"id"`
	Time     time.Time `json:"timestamp"`
	Account  string    `json:"account,omitempty"`
	Stream   string    `json:"stream"`
	Consumer string    `json:"consumer"`
	Domain   string    `json:"domain,omitempty"`
	Group    string    `json:"group"`
	PinnedID string    `json:"pinned_id"`
}

// consumerUnpinnedAdvisory is nats-server's
// JSConsumerGroupUnpinnedAdvisory: a pin ended, for "timeout" or
// "admin" (an UNPIN request).
type consumerUnpinnedAdvisory struct {
	Type     string    `json:"type"`
	ID       string    `json:"id"`
	Time     time.Time `json:"timestamp"`
	Account  string    `json:"account,omitempty"`
	Stream   string    `json:"stream"`
	Consumer string    `json:"consumer"`
	Domain   string    `json:"domain,omitempty"`
	Group    string    `json:"group"`
	Reason   string    `json:"reason"`
}

// advisePins publishes the advisories of the delivery logic's pin
// changes on $JS.EVENT.ADVISORY.CONSUMER.PINNED.<S>.<C> and
// UNPINNED.<S>.<C> (nats-server v2.15.2 sendPinnedAdvisoryLocked,
// sendUnpinnedAdvisoryLocked).
func (c *Consumer) advisePins(evs []consumer.PinEvent) {
	for _, ev := range evs {
		if ev.Pinned {
			c.publishAdvisory("PINNED", consumerPinnedAdvisory{
				Type: "io.nats.jetstream.advisory.v1.consumer_group_pinned", ID: nuid.Next(), Time: c.now().UTC(),
				Account: c.env.Account, Stream: c.sr.Name(), Consumer: c.name, Domain: c.env.Domain,
				Group: ev.Group, PinnedID: ev.ID,
			})
			continue
		}
		c.publishAdvisory("UNPINNED", consumerUnpinnedAdvisory{
			Type: "io.nats.jetstream.advisory.v1.consumer_group_unpinned", ID: nuid.Next(), Time: c.now().UTC(),
			Account: c.env.Account, Stream: c.sr.Name(), Consumer: c.name, Domain: c.env.Domain,
			Group: ev.Group, Reason: ev.Reason,
		})
	}
}
