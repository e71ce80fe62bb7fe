package consumerrun

import (
	"encoding/json"
	"time"

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
