package jetstream

import (
	"encoding/json"
	"time"

	"github.com/nats-io/nuid"
)

// Stream actions, as nats-server v2.15.2 names them in advisories
// (jetstream_events.go ActionAdvisoryType).
const (
	actionCreate = "create"
	actionModify = "modify"
	actionDelete = "delete"
)

// streamActionAdvisory is nats-server's JSStreamActionAdvisory
// (nats-server v2.15.2's advisories, jetstream_events.go): type, id, timestamp, stream, action.
type streamActionAdvisory struct {
	Type   string    `json:"type"`
	ID     string    `json:"id"`
	Time   time.Time `json:"timestamp"`
	Stream string    `json:"stream"`
	Action string    `json:"action"`
}

// advisorySubjects maps an action to its subject prefix.
var advisorySubjects = map[string]string{
	actionCreate: "$JS.EVENT.ADVISORY.STREAM.CREATED.",
	actionModify: "$JS.EVENT.ADVISORY.STREAM.UPDATED.",
	actionDelete: "$JS.EVENT.ADVISORY.STREAM.DELETED.",
}

// adviseStream publishes the stream action advisory on
// $JS.EVENT.ADVISORY.STREAM.<CREATED|UPDATED|DELETED>.<stream>. Nobody
// has to listen.
func (js *JetStream) adviseStream(name, action string) {
	b, err := json.Marshal(streamActionAdvisory{
		Type:   "io.nats.jetstream.advisory.v1.stream_action",
		ID:     nuid.Next(),
		Time:   js.now().UTC(),
		Stream: name,
		Action: action,
	})
	if err != nil { // strings and a time always encode
		return
	}
	js.tr.Publish(advisorySubjects[action]+name, "", nil, b)
}

// consumerActionAdvisory is nats-server's JSConsumerActionAdvisory
// (nats-server v2.15.2's advisories, jetstream_events.go).
type consumerActionAdvisory struct {
	Type     string    `json:"type"`
	ID       string    `json:"id"`
	Time     time.Time `json:"timestamp"`
	Stream   string    `json:"stream"`
	Consumer string    `json:"consumer"`
	Action   string    `json:"action"`
}

var consumerAdvisorySubjects = map[string]string{
	actionCreate: "$JS.EVENT.ADVISORY.CONSUMER.CREATED.",
	actionModify: "$JS.EVENT.ADVISORY.CONSUMER.UPDATED.",
	actionDelete: "$JS.EVENT.ADVISORY.CONSUMER.DELETED.",
}

// adviseConsumer publishes the consumer action advisory on
// $JS.EVENT.ADVISORY.CONSUMER.<CREATED|UPDATED|DELETED>.<stream>.<consumer>.
func (js *JetStream) adviseConsumer(streamName, name, action string) {
	b, err := json.Marshal(consumerActionAdvisory{
		Type: "io.nats.jetstream.advisory.v1.consumer_action", ID: nuid.Next(), Time: js.now().UTC(),
		Stream: streamName, Consumer: name, Action: action,
	})
	if err == nil {
		js.tr.Publish(consumerAdvisorySubjects[action]+streamName+"."+name, "", nil, b)
	}
}
