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
	Domain string    `json:"domain,omitempty"`
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
		Domain: js.cfg.Domain,
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
	Domain   string    `json:"domain,omitempty"`
}

var consumerAdvisorySubjects = map[string]string{
	actionCreate: "$JS.EVENT.ADVISORY.CONSUMER.CREATED.",
	actionModify: "$JS.EVENT.ADVISORY.CONSUMER.UPDATED.",
	actionDelete: "$JS.EVENT.ADVISORY.CONSUMER.DELETED.",
}

// adviseConsumer publishes the consumer action advisory on
// $JS.EVENT.ADVISORY.CONSUMER.<CREATED|UPDATED|DELETED>.<stream>.<consumer>.
// AdviseConsumer sends the consumer created (created true) or deleted
// advisory of consumer name of stream streamName (nats-server v2.15.2
// JSConsumerActionAdvisory): the cluster layer's meta leader sends one per
// consumer, as nats-server's consumer leader does, where each replica's
// engine would send its own (Config.ClusterAdvises).
func (js *JetStream) AdviseConsumer(streamName, name string, created bool) {
	action := actionDelete
	if created {
		action = actionCreate
	}
	js.adviseConsumer(streamName, name, action)
}

func (js *JetStream) adviseConsumer(streamName, name, action string) {
	b, err := json.Marshal(consumerActionAdvisory{
		Type: "io.nats.jetstream.advisory.v1.consumer_action", ID: nuid.Next(), Time: js.now().UTC(),
		Stream: streamName, Consumer: name, Action: action, Domain: js.cfg.Domain,
	})
	if err == nil {
		js.tr.Publish(consumerAdvisorySubjects[action]+streamName+"."+name, "", nil, b)
	}
}

// Snapshot and restore advisories, nats-server v2.15.2's
// JSSnapshotCreateAdvisory, JSSnapshotCompleteAdvisory,
// JSRestoreCreateAdvisory and JSRestoreCompleteAdvisory. "client" names
// the client that asked for the snapshot or restore, as the API audit
// advisory does (nats-server's ClientInfo without its JWT and
// alternates): the API takes it from the request's publisher and passes
// it in (SnapshotRequest.Client, BeginRestore); null when not known.
type snapshotCreateAdvisory struct {
	Type   string          `json:"type"`
	ID     string          `json:"id"`
	Time   time.Time       `json:"timestamp"`
	Stream string          `json:"stream"`
	State  StreamState     `json:"state"`
	Client json.RawMessage `json:"client"`
	Domain string          `json:"domain,omitempty"`
}

type snapshotCompleteAdvisory struct {
	Type   string          `json:"type"`
	ID     string          `json:"id"`
	Time   time.Time       `json:"timestamp"`
	Stream string          `json:"stream"`
	Start  time.Time       `json:"start"`
	End    time.Time       `json:"end"`
	Client json.RawMessage `json:"client"`
	Domain string          `json:"domain,omitempty"`
	Error  string          `json:"error,omitempty"`
}

type restoreCreateAdvisory struct {
	Type   string          `json:"type"`
	ID     string          `json:"id"`
	Time   time.Time       `json:"timestamp"`
	Stream string          `json:"stream"`
	Client json.RawMessage `json:"client"`
	Domain string          `json:"domain,omitempty"`
}

type restoreCompleteAdvisory struct {
	Type   string          `json:"type"`
	ID     string          `json:"id"`
	Time   time.Time       `json:"timestamp"`
	Stream string          `json:"stream"`
	Start  time.Time       `json:"start"`
	End    time.Time       `json:"end"`
	Bytes  int64           `json:"bytes"`
	Client json.RawMessage `json:"client"`
	Domain string          `json:"domain,omitempty"`
}

// advisoryClient returns client when it is a JSON object, else nil (the
// advisory then says "client":null rather than failing to encode).
func advisoryClient(client []byte) json.RawMessage {
	if len(client) == 0 || !json.Valid(client) {
		return nil
	}
	return client
}

// advise publishes advisory v on subj; nobody has to listen.
func (js *JetStream) advise(subj string, v any) {
	if b, err := json.Marshal(v); err == nil {
		js.tr.Publish(subj, "", nil, b)
	}
}

// adviseSnapshotCreate announces a snapshot that starts streaming, on
// $JS.EVENT.ADVISORY.STREAM.SNAPSHOT_CREATE.<stream>.
func (js *JetStream) adviseSnapshotCreate(name string, state StreamState, client json.RawMessage) {
	js.advise("$JS.EVENT.ADVISORY.STREAM.SNAPSHOT_CREATE."+name, snapshotCreateAdvisory{
		Type: "io.nats.jetstream.advisory.v1.snapshot_create", ID: nuid.Next(), Time: js.now().UTC(),
		Stream: name, State: state, Client: client, Domain: js.cfg.Domain,
	})
}

// adviseSnapshotComplete announces a snapshot that ended, with its error
// if it failed, on $JS.EVENT.ADVISORY.STREAM.SNAPSHOT_COMPLETE.<stream>.
func (js *JetStream) adviseSnapshotComplete(name string, start time.Time, client json.RawMessage, err error) {
	end := js.now().UTC()
	a := snapshotCompleteAdvisory{
		Type: "io.nats.jetstream.advisory.v1.snapshot_complete", ID: nuid.Next(), Time: end,
		Stream: name, Start: start, End: end, Client: client, Domain: js.cfg.Domain,
	}
	if err != nil {
		a.Error = err.Error()
	}
	js.advise("$JS.EVENT.ADVISORY.STREAM.SNAPSHOT_COMPLETE."+name, a)
}

// adviseRestoreCreate announces a restore that accepts chunks, on
// $JS.EVENT.ADVISORY.STREAM.RESTORE_CREATE.<stream>.
func (js *JetStream) adviseRestoreCreate(name string, start time.Time, client json.RawMessage) {
	js.advise("$JS.EVENT.ADVISORY.STREAM.RESTORE_CREATE."+name, restoreCreateAdvisory{
		Type: "io.nats.jetstream.advisory.v1.restore_create", ID: nuid.Next(), Time: start, Stream: name,
		Client: client, Domain: js.cfg.Domain,
	})
}

// adviseRestoreComplete announces a restore that ended (whether or not it
// succeeded, as nats-server) after bytes of chunks, on
// $JS.EVENT.ADVISORY.STREAM.RESTORE_COMPLETE.<stream>.
func (js *JetStream) adviseRestoreComplete(name string, start time.Time, bytes int64, client json.RawMessage) {
	end := js.now().UTC()
	js.advise("$JS.EVENT.ADVISORY.STREAM.RESTORE_COMPLETE."+name, restoreCompleteAdvisory{
		Type: "io.nats.jetstream.advisory.v1.restore_complete", ID: nuid.Next(), Time: end,
		Stream: name, Start: start, End: end, Bytes: bytes, Client: client, Domain: js.cfg.Domain,
	})
}
