package consumer

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/stream"
)

// oracleStreams are the streams the cases below ran against, as created
// on nats-server v2.15.2.
var oracleStreams = map[string]string{
	"S":  `{"name":"S","subjects":["s.>"]}`,
	"W":  `{"name":"W","subjects":["w.>"],"retention":"workqueue"}`,
	"I":  `{"name":"I","subjects":["i.>"],"retention":"interest"}`,
	"L":  `{"name":"L","subjects":["l.>"],"consumer_limits":{"max_ack_pending":50,"inactive_threshold":10000000000}}`,
	"U":  `{"name":"U","subjects":["u.>"]}`,
	"E":  `{"name":"E","subjects":["e.>"]}`,
	"W2": `{"name":"W2","subjects":["x.>"],"retention":"workqueue"}`,
}

// streamConfig returns the defaulted stream config of a JSON body.
func streamConfig(t *testing.T, body string) *stream.Config {
	t.Helper()
	var s stream.Config
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatalf("stream %s: %v", body, err)
	}
	s.SetDefaults()
	if err := s.Validate(); err != nil {
		t.Fatalf("stream %s: %v", body, err)
	}
	return &s
}

// decodeConfig decodes a ConsumerConfig JSON body.
func decodeConfig(t *testing.T, body string) *Config {
	t.Helper()
	var c Config
	if err := json.Unmarshal([]byte(body), &c); err != nil {
		t.Fatalf("config %s: %v", body, err)
	}
	return &c
}

// mustJSON encodes v as the API does.
func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The server version and API level nats-server v2.15.2 advertises.
const (
	oracleVersion  = "2.15.2"
	oracleAPILevel = 5
)

// createConfig runs what a create request does to a new consumer's config
// (the API layer's name from durable_name, SetStaticMetadata, SetDefaults,
// Validate, then the ephemeral default) and returns the config as the
// response shows it (WithServerMetadata), or the error, as JSON.
func createConfig(t *testing.T, s *stream.Config, in string, pedantic bool) string {
	t.Helper()
	c := decodeConfig(t, in)
	if c.Durable != "" {
		c.Name = c.Durable
	}
	c.SetStaticMetadata()
	err := c.SetDefaults(s, pedantic)
	if err == nil {
		err = c.Validate(s, false)
	}
	if err != nil {
		return mustJSON(t, err)
	}
	c.SetEphemeralThreshold()
	out := c.WithServerMetadata(oracleVersion, oracleAPILevel)
	return mustJSON(t, &out)
}

// createCases are consumer configs sent to $JS.API.CONSUMER.CREATE.<S>
// (or DURABLE.CREATE.<S>.<D> for durables) of nats-server v2.15.2 and
// what it answered, byte for byte: the "config" of the
// consumer_create_response, or the error object (nats-server v2.15.2 consumer create, jsConsumerCreateRequest; nats-server v2.15.2 ConsumerConfig; nats-server v2.15.2 defaults, setStreamConfigDefaults and setConsumerConfigDefaults; nats-server v2.15.2 validation, checkStreamCfg and checkConsumerCfg).
// pedantic is the request's "pedantic" key. cairnAnswers lists where
// cairn deliberately answers differently.
var createCases = []struct {
	name, stream string
	pedantic     bool
	in, want     string
}{
	{"pull explicit", "S", false, `{"name":"c1","ack_policy":"explicit"}`, `{"name":"c1","deliver_policy":"all","ack_policy":"explicit","ack_wait":30000000000,"max_deliver":-1,"replay_policy":"instant","max_waiting":512,"max_ack_pending":1000,"inactive_threshold":5000000000,"num_replicas":0,"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.2"}}`},
	{"pull ack none", "S", false, `{"name":"c2"}`, `{"name":"c2","deliver_policy":"all","ack_policy":"none","max_deliver":-1,"replay_policy":"instant","max_waiting":512,"inactive_threshold":5000000000,"num_replicas":0,"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.2"}}`},
	{"push ack none", "S", false, `{"name":"c3","deliver_subject":"dlv"}`, `{"name":"c3","deliver_policy":"all","ack_policy":"none","max_deliver":-1,"replay_policy":"instant","deliver_subject":"dlv","inactive_threshold":5000000000,"num_replicas":0,"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.2"}}`},
	{"push explicit", "S", false, `{"name":"c4","deliver_subject":"dlv","ack_policy":"explicit"}`, `{"name":"c4","deliver_policy":"all","ack_policy":"explicit","ack_wait":30000000000,"max_deliver":-1,"replay_policy":"instant","max_ack_pending":1000,"deliver_subject":"dlv","inactive_threshold":5000000000,"num_replicas":0,"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.2"}}`},
	{"pull ack all", "S", false, `{"name":"c5","ack_policy":"all"}`, `{"name":"c5","deliver_policy":"all","ack_policy":"all","ack_wait":30000000000,"max_deliver":-1,"replay_policy":"instant","max_waiting":512,"max_ack_pending":1000,"inactive_threshold":5000000000,"num_replicas":0,"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.2"}}`},
	{"negatives clamped", "S", false, `{"name":"c6","ack_policy":"explicit","max_deliver":-5,"max_waiting":-3,"max_ack_pending":-7,"max_batch":-1,"max_expires":-1,"max_bytes":-1,"idle_heartbeat":-1,"inactive_threshold":-1,"priority_timeout":-1}`, `{"name":"c6","deliver_policy":"all","ack_policy":"explicit","ack_wait":30000000000,"max_deliver":-1,"replay_policy":"instant","max_waiting":512,"max_ack_pending":-1,"inactive_threshold":5000000000,"num_replicas":0,"metadata":{"_nats.level":"5","_nats.req.level":"1","_nats.ver":"2.15.2"}}`},
	{"max_deliver 0", "S", false, `{"name":"c7","max_deliver":0}`, `{"name":"c7","deliver_policy":"all","ack_policy":"none","max_deliver":-1,"replay_policy":"instant","max_waiting":512,"inactive_threshold":5000000000,"num_replicas":0,"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.2"}}`},
	{"backoff sets ack_wait", "S", false, `{"name":"c8","ack_policy":"explicit","backoff":[1000000000,2000000000],"max_deliver":3}`, `{"name":"c8","deliver_policy":"all","ack_policy":"explicit","ack_wait":1000000000,"max_deliver":3,"backoff":[1000000000,2000000000],"replay_policy":"instant","max_waiting":512,"max_ack_pending":1000,"inactive_threshold":5000000000,"num_replicas":0,"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.2"}}`},
	{"backoff with ack none", "S", false, `{"name":"c9","backoff":[3000000000]}`, `{"name":"c9","deliver_policy":"all","ack_policy":"none","ack_wait":3000000000,"max_deliver":-1,"backoff":[3000000000],"replay_policy":"instant","max_waiting":512,"inactive_threshold":5000000000,"num_replicas":0,"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.2"}}`},
	{"backoff with ack_wait", "S", false, `{"name":"c10","ack_policy":"explicit","ack_wait":5000000000,"backoff":[1000000000]}`, `{"name":"c10","deliver_policy":"all","ack_policy":"explicit","ack_wait":1000000000,"max_deliver":-1,"backoff":[1000000000],"replay_policy":"instant","max_waiting":512,"max_ack_pending":1000,"inactive_threshold":5000000000,"num_replicas":0,"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.2"}}`},
	{"stream limits explicit", "L", false, `{"name":"c11","ack_policy":"explicit"}`, `{"name":"c11","deliver_policy":"all","ack_policy":"explicit","ack_wait":30000000000,"max_deliver":-1,"replay_policy":"instant","max_waiting":512,"max_ack_pending":50,"inactive_threshold":10000000000,"num_replicas":0,"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.2"}}`},
	{"stream limits none", "L", false, `{"name":"c12"}`, `{"name":"c12","deliver_policy":"all","ack_policy":"none","max_deliver":-1,"replay_policy":"instant","max_waiting":512,"max_ack_pending":50,"inactive_threshold":10000000000,"num_replicas":0,"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.2"}}`},
	{"stream limits under", "L", false, `{"name":"c13","ack_policy":"explicit","max_ack_pending":20,"inactive_threshold":2000000000}`, `{"name":"c13","deliver_policy":"all","ack_policy":"explicit","ack_wait":30000000000,"max_deliver":-1,"replay_policy":"instant","max_waiting":512,"max_ack_pending":20,"inactive_threshold":2000000000,"num_replicas":0,"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.2"}}`},
	{"ack flow_control", "S", false, `{"name":"c14","ack_policy":"flow_control","deliver_subject":"dfc"}`, `{"name":"c14","deliver_policy":"all","ack_policy":"flow_control","max_deliver":-1,"replay_policy":"instant","max_ack_pending":1000,"flow_control":true,"deliver_subject":"dfc","idle_heartbeat":1000000000,"inactive_threshold":5000000000,"num_replicas":0,"metadata":{"_nats.level":"5","_nats.req.level":"4","_nats.ver":"2.15.2"}}`},
	{"durable pull", "S", false, `{"durable_name":"D1","ack_policy":"explicit"}`, `{"durable_name":"D1","name":"D1","deliver_policy":"all","ack_policy":"explicit","ack_wait":30000000000,"max_deliver":-1,"replay_policy":"instant","max_waiting":512,"max_ack_pending":1000,"num_replicas":0,"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.2"}}`},
	{"durable push", "S", false, `{"durable_name":"D2","deliver_subject":"dd2","ack_policy":"explicit","idle_heartbeat":5000000000,"flow_control":true}`, `{"durable_name":"D2","name":"D2","deliver_policy":"all","ack_policy":"explicit","ack_wait":30000000000,"max_deliver":-1,"replay_policy":"instant","max_ack_pending":1000,"flow_control":true,"deliver_subject":"dd2","idle_heartbeat":5000000000,"num_replicas":0,"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.2"}}`},
	{"max_ack_pending unlimited", "S", false, `{"name":"c15","ack_policy":"explicit","max_ack_pending":-1}`, `{"name":"c15","deliver_policy":"all","ack_policy":"explicit","ack_wait":30000000000,"max_deliver":-1,"replay_policy":"instant","max_waiting":512,"max_ack_pending":-1,"inactive_threshold":5000000000,"num_replicas":0,"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.2"}}`},
	{"inactive threshold set", "S", false, `{"name":"c16","inactive_threshold":2000000000}`, `{"name":"c16","deliver_policy":"all","ack_policy":"none","max_deliver":-1,"replay_policy":"instant","max_waiting":512,"inactive_threshold":2000000000,"num_replicas":0,"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.2"}}`},
	{"filters", "S", false, `{"name":"c17","filter_subjects":["s.a","s.b"]}`, `{"name":"c17","deliver_policy":"all","ack_policy":"none","max_deliver":-1,"filter_subjects":["s.a","s.b"],"replay_policy":"instant","max_waiting":512,"inactive_threshold":5000000000,"num_replicas":0,"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.2"}}`},
	{"filters crossing", "S", false, `{"name":"c18","filter_subjects":["s.*","*.b"]}`, `{"name":"c18","deliver_policy":"all","ack_policy":"none","max_deliver":-1,"filter_subjects":["s.*","*.b"],"replay_policy":"instant","max_waiting":512,"inactive_threshold":5000000000,"num_replicas":0,"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.2"}}`},
	{"filter", "S", false, `{"name":"c19","filter_subject":"s.a.>"}`, `{"name":"c19","deliver_policy":"all","ack_policy":"none","max_deliver":-1,"filter_subject":"s.a.\u003e","replay_policy":"instant","max_waiting":512,"inactive_threshold":5000000000,"num_replicas":0,"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.2"}}`},
	{"filter outside the stream", "S", false, `{"name":"c20","filter_subject":"zzz"}`, `{"name":"c20","deliver_policy":"all","ack_policy":"none","max_deliver":-1,"filter_subject":"zzz","replay_policy":"instant","max_waiting":512,"inactive_threshold":5000000000,"num_replicas":0,"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.2"}}`},
	{"last per subject", "S", false, `{"name":"c21","deliver_policy":"last_per_subject","filter_subject":"s.*"}`, `{"name":"c21","deliver_policy":"last_per_subject","ack_policy":"none","max_deliver":-1,"filter_subject":"s.*","replay_policy":"instant","max_waiting":512,"inactive_threshold":5000000000,"num_replicas":0,"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.2"}}`},
	{"by start sequence", "S", false, `{"name":"c22","deliver_policy":"by_start_sequence","opt_start_seq":7}`, `{"name":"c22","deliver_policy":"by_start_sequence","opt_start_seq":7,"ack_policy":"none","max_deliver":-1,"replay_policy":"instant","max_waiting":512,"inactive_threshold":5000000000,"num_replicas":0,"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.2"}}`},
	{"by start time", "S", false, `{"name":"c23","deliver_policy":"by_start_time","opt_start_time":"2024-05-01T10:00:00Z"}`, `{"name":"c23","deliver_policy":"by_start_time","opt_start_time":"2024-05-01T10:00:00Z","ack_policy":"none","max_deliver":-1,"replay_policy":"instant","max_waiting":512,"inactive_threshold":5000000000,"num_replicas":0,"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.2"}}`},
	{"sample 50%", "S", false, `{"name":"c24","sample_freq":"50%"}`, `{"name":"c24","deliver_policy":"all","ack_policy":"none","max_deliver":-1,"replay_policy":"instant","sample_freq":"50%","max_waiting":512,"inactive_threshold":5000000000,"num_replicas":0,"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.2"}}`},
	{"sample 7", "S", false, `{"name":"c25","sample_freq":"7"}`, `{"name":"c25","deliver_policy":"all","ack_policy":"none","max_deliver":-1,"replay_policy":"instant","sample_freq":"7","max_waiting":512,"inactive_threshold":5000000000,"num_replicas":0,"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.2"}}`},
	{"everything else", "S", false, `{"name":"c26","description":"d","deliver_policy":"new","replay_policy":"original","headers_only":true,"max_batch":10,"max_expires":5000000,"max_bytes":1024,"mem_storage":true,"metadata":{"owner":"ops"}}`, `{"name":"c26","description":"d","deliver_policy":"new","ack_policy":"none","max_deliver":-1,"replay_policy":"original","max_waiting":512,"headers_only":true,"max_batch":10,"max_expires":5000000,"max_bytes":1024,"inactive_threshold":5000000000,"num_replicas":0,"mem_storage":true,"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.2","owner":"ops"}}`},
	{"push rate limit", "S", false, `{"name":"c27","deliver_subject":"drl","deliver_group":"g","rate_limit_bps":1000,"idle_heartbeat":100000000}`, `{"name":"c27","deliver_policy":"all","ack_policy":"none","max_deliver":-1,"replay_policy":"instant","rate_limit_bps":1000,"deliver_subject":"drl","deliver_group":"g","idle_heartbeat":100000000,"inactive_threshold":5000000000,"num_replicas":0,"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.2"}}`},
	{"workqueue ok", "W", false, `{"name":"c28","ack_policy":"explicit","filter_subject":"w.a"}`, `{"name":"c28","deliver_policy":"all","ack_policy":"explicit","ack_wait":30000000000,"max_deliver":-1,"filter_subject":"w.a","replay_policy":"instant","max_waiting":512,"max_ack_pending":1000,"inactive_threshold":5000000000,"num_replicas":0,"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.2"}}`},
	{"interest replicas 1", "I", false, `{"name":"c29","num_replicas":1}`, `{"name":"c29","deliver_policy":"all","ack_policy":"none","max_deliver":-1,"replay_policy":"instant","max_waiting":512,"inactive_threshold":5000000000,"num_replicas":1,"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.2"}}`},
	{"replicas 1", "S", false, `{"name":"c30","num_replicas":1}`, `{"name":"c30","deliver_policy":"all","ack_policy":"none","max_deliver":-1,"replay_policy":"instant","max_waiting":512,"inactive_threshold":5000000000,"num_replicas":1,"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.2"}}`},
	{"pedantic ok", "S", true, `{"name":"c31","ack_policy":"explicit","max_deliver":-1}`, `{"name":"c31","deliver_policy":"all","ack_policy":"explicit","ack_wait":30000000000,"max_deliver":-1,"replay_policy":"instant","max_waiting":512,"max_ack_pending":1000,"inactive_threshold":5000000000,"num_replicas":0,"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.2"}}`},
	{"pedantic flow_control set", "S", true, `{"name":"c32","ack_policy":"flow_control","deliver_subject":"dfc2","flow_control":true,"idle_heartbeat":1000000000,"max_ack_pending":10}`, `{"name":"c32","deliver_policy":"all","ack_policy":"flow_control","max_deliver":-1,"replay_policy":"instant","max_ack_pending":10,"flow_control":true,"deliver_subject":"dfc2","idle_heartbeat":1000000000,"inactive_threshold":5000000000,"num_replicas":0,"metadata":{"_nats.level":"5","_nats.req.level":"4","_nats.ver":"2.15.2"}}`},
	{"pedantic max_deliver", "S", true, `{"name":"p1","max_deliver":-2}`, `{"code":400,"err_code":10157,"description":"pedantic mode: max_deliver must be set to -1"}`},
	{"pedantic max_waiting", "S", true, `{"name":"p2","max_waiting":-1}`, `{"code":400,"err_code":10157,"description":"pedantic mode: max_waiting must not be negative"}`},
	{"pedantic max_ack_pending", "S", true, `{"name":"p3","max_ack_pending":-2}`, `{"code":400,"err_code":10157,"description":"pedantic mode: max_ack_pending must be set to -1"}`},
	{"pedantic max_batch", "S", true, `{"name":"p4","max_batch":-1}`, `{"code":400,"err_code":10157,"description":"pedantic mode: max_batch must not be negative"}`},
	{"pedantic max_expires", "S", true, `{"name":"p5","max_expires":-1}`, `{"code":400,"err_code":10157,"description":"pedantic mode: max_expires must not be negative"}`},
	{"pedantic max_bytes", "S", true, `{"name":"p6","max_bytes":-1}`, `{"code":400,"err_code":10157,"description":"pedantic mode: max_bytes must not be negative"}`},
	{"pedantic idle_heartbeat", "S", true, `{"name":"p7","idle_heartbeat":-1}`, `{"code":400,"err_code":10157,"description":"pedantic mode: idle_heartbeat must not be negative"}`},
	{"pedantic inactive_threshold", "S", true, `{"name":"p8","inactive_threshold":-1}`, `{"code":400,"err_code":10157,"description":"pedantic mode: inactive_threshold must not be negative"}`},
	{"pedantic priority_timeout", "S", true, `{"name":"p9","priority_timeout":-1}`, `{"code":400,"err_code":10157,"description":"pedantic mode: priority_timeout must not be negative"}`},
	{"pedantic first of two", "S", true, `{"name":"p10","max_bytes":-1,"max_waiting":-1}`, `{"code":400,"err_code":10157,"description":"pedantic mode: max_waiting must not be negative"}`},
	{"pedantic backoff", "S", true, `{"name":"p11","ack_policy":"explicit","backoff":[1000000000]}`, `{"code":400,"err_code":10157,"description":"pedantic mode: first backoff value has to equal batch AckWait"}`},
	{"pedantic backoff equal", "S", true, `{"name":"p12","ack_policy":"explicit","ack_wait":1000000000,"backoff":[1000000000]}`, `{"name":"p12","deliver_policy":"all","ack_policy":"explicit","ack_wait":1000000000,"max_deliver":-1,"backoff":[1000000000],"replay_policy":"instant","max_waiting":512,"max_ack_pending":1000,"inactive_threshold":5000000000,"num_replicas":0,"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.2"}}`},
	{"pedantic stream max_ack_pending", "L", true, `{"name":"p13","inactive_threshold":1000000000}`, `{"code":400,"err_code":10157,"description":"pedantic mode: max_ack_pending must be set if it's configured in stream limits"}`},
	{"pedantic stream inactive_threshold", "L", true, `{"name":"p14","max_ack_pending":5}`, `{"code":400,"err_code":10157,"description":"pedantic mode: inactive_threshold must be set if it's configured in stream limits"}`},
	{"pedantic ack flow_control", "S", true, `{"name":"p15","ack_policy":"flow_control","deliver_subject":"dp15"}`, `{"code":400,"err_code":10219,"description":"flow control ack policy requires flow control"}`},
	{"pedantic flow_control heartbeat", "S", true, `{"name":"p16","ack_policy":"flow_control","deliver_subject":"dp16","flow_control":true,"idle_heartbeat":2000000000,"max_ack_pending":10}`, `{"code":500,"err_code":10052,"description":"flow control ack policy heartbeat needs to be 1s"}`},
	{"name with a dot", "S", false, `{"name":"a.b"}`, `{"code":500,"err_code":10052,"description":"consumer name can not contain '.', '*', '\u003e', '\\', '/'"}`},
	{"name with a star", "S", false, `{"name":"a*"}`, `{"code":500,"err_code":10052,"description":"consumer name can not contain '.', '*', '\u003e', '\\', '/'"}`},
	{"name with a space", "S", false, `{"name":"a b"}`, `{"code":500,"err_code":10052,"description":"consumer name can not contain '.', '*', '\u003e', '\\', '/'"}`},
	{"backoff negative", "S", false, `{"name":"v1","backoff":[1000000000,-1]}`, `{"code":400,"err_code":10184,"description":"consumer backoff needs to be positive"}`},
	{"ack_wait negative", "S", false, `{"name":"v2","ack_policy":"explicit","ack_wait":-1}`, `{"code":400,"err_code":10183,"description":"consumer ack wait needs to be positive"}`},
	{"backoff before ack_wait", "S", false, `{"name":"v3","ack_policy":"explicit","ack_wait":-1,"backoff":[-1]}`, `{"code":400,"err_code":10184,"description":"consumer backoff needs to be positive"}`},
	{"ack fc pull", "S", false, `{"name":"v4","ack_policy":"flow_control"}`, `{"code":400,"err_code":10218,"description":"flow control ack policy requires a push based consumer"}`},
	{"ack fc max_ack_pending", "S", false, `{"name":"v5","ack_policy":"flow_control","deliver_subject":"dv5","max_ack_pending":-1}`, `{"code":400,"err_code":10220,"description":"flow control ack policy requires max ack pending"}`},
	{"ack fc ack_wait", "S", false, `{"name":"v6","ack_policy":"flow_control","deliver_subject":"dv6","ack_wait":5}`, `{"code":400,"err_code":10221,"description":"flow control ack policy requires unset ack wait"}`},
	{"ack fc backoff", "S", false, `{"name":"v7","ack_policy":"flow_control","deliver_subject":"dv7","backoff":[5]}`, `{"code":400,"err_code":10221,"description":"flow control ack policy requires unset ack wait"}`},
	{"ack fc max_deliver", "S", false, `{"name":"v8","ack_policy":"flow_control","deliver_subject":"dv8","max_deliver":3}`, `{"code":400,"err_code":10222,"description":"flow control ack policy requires unset max deliver"}`},
	{"backoff over max_deliver", "S", false, `{"name":"v9","ack_policy":"explicit","backoff":[1,2,3],"max_deliver":2}`, `{"code":400,"err_code":10116,"description":"max deliver is required to be \u003e length of backoff values"}`},
	{"backoff equal max_deliver", "S", false, `{"name":"v10","ack_policy":"explicit","backoff":[1,2],"max_deliver":2}`, `{"name":"v10","deliver_policy":"all","ack_policy":"explicit","ack_wait":1,"max_deliver":2,"backoff":[1,2],"replay_policy":"instant","max_waiting":512,"max_ack_pending":1000,"inactive_threshold":5000000000,"num_replicas":0,"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.2"}}`},
	{"deliver subject wildcard", "S", false, `{"name":"v11","deliver_subject":"a.*"}`, `{"code":400,"err_code":10079,"description":"consumer deliver subject has wildcards"}`},
	{"deliver subject full wildcard", "S", false, `{"name":"v12","deliver_subject":"a.>"}`, `{"code":400,"err_code":10079,"description":"consumer deliver subject has wildcards"}`},
	{"deliver subject invalid", "S", false, `{"name":"v13","deliver_subject":"a..b"}`, `{"code":400,"err_code":10112,"description":"invalid push consumer deliver subject"}`},
	{"deliver subject cycle", "S", false, `{"name":"v14","deliver_subject":"s.x"}`, `{"code":400,"err_code":10081,"description":"consumer deliver subject forms a cycle"}`},
	{"deliver subject star prefix", "S", false, `{"name":"v15","deliver_subject":"*x"}`, `{"name":"v15","deliver_policy":"all","ack_policy":"none","max_deliver":-1,"replay_policy":"instant","deliver_subject":"*x","inactive_threshold":5000000000,"num_replicas":0,"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.2"}}`},
	{"push max_waiting", "S", false, `{"name":"v16","deliver_subject":"dv16","max_waiting":3}`, `{"code":400,"err_code":10080,"description":"consumer in push mode can not set max waiting"}`},
	{"push ack none max_ack_pending", "S", false, `{"name":"v17","deliver_subject":"dv17","max_ack_pending":5}`, `{"code":400,"err_code":10082,"description":"consumer requires ack policy for max ack pending"}`},
	{"push small heartbeat", "S", false, `{"name":"v18","deliver_subject":"dv18","idle_heartbeat":50000000}`, `{"code":400,"err_code":10083,"description":"consumer idle heartbeat needs to be \u003e= 100ms"}`},
	{"workqueue pull ack none", "W", false, `{"name":"v19"}`, `{"code":400,"err_code":10084,"description":"consumer in pull mode requires explicit ack policy on workqueue stream"}`},
	{"pull rate limit", "S", false, `{"name":"v20","rate_limit_bps":5}`, `{"code":400,"err_code":10086,"description":"consumer in pull mode can not have rate limit set"}`},
	{"pull heartbeat", "S", false, `{"name":"v21","idle_heartbeat":1000000000}`, `{"code":400,"err_code":10088,"description":"consumer idle heartbeat requires a push based consumer"}`},
	{"pull flow control", "S", false, `{"name":"v22","flow_control":true}`, `{"code":400,"err_code":10089,"description":"consumer flow control requires a push based consumer"}`},
	{"pull max_expires small", "S", false, `{"name":"v23","max_expires":999999}`, `{"code":400,"err_code":10115,"description":"consumer max request expires needs to be \u003e= 1ms"}`},
	{"pull max_expires 1ms", "S", false, `{"name":"v24","max_expires":1000000}`, `{"name":"v24","deliver_policy":"all","ack_policy":"none","max_deliver":-1,"replay_policy":"instant","max_waiting":512,"max_expires":1000000,"inactive_threshold":5000000000,"num_replicas":0,"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.2"}}`},
	{"stream max_ack_pending exceeded", "L", false, `{"name":"v25","ack_policy":"explicit","max_ack_pending":60}`, `{"code":400,"err_code":10121,"description":"consumer max ack pending exceeds system limit of 50"}`},
	{"stream max_ack_pending unlimited", "L", false, `{"name":"v26","ack_policy":"explicit","max_ack_pending":-1}`, `{"name":"v26","deliver_policy":"all","ack_policy":"explicit","ack_wait":30000000000,"max_deliver":-1,"replay_policy":"instant","max_waiting":512,"max_ack_pending":-1,"inactive_threshold":10000000000,"num_replicas":0,"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.2"}}`},
	{"stream inactive exceeded", "L", false, `{"name":"v27","inactive_threshold":20000000000}`, `{"code":400,"err_code":10153,"description":"consumer inactive threshold exceeds system limit of 10s"}`},
	{"direct pull", "S", false, `{"name":"v28","direct":true}`, `{"code":400,"err_code":10090,"description":"consumer direct requires a push based consumer"}`},
	{"direct durable", "S", false, `{"durable_name":"v29","direct":true,"deliver_subject":"dv29"}`, `{"code":400,"err_code":10091,"description":"consumer direct requires an ephemeral consumer"}`},
	{"filter both", "S", false, `{"name":"v30","filter_subject":"s.a","filter_subjects":["s.b"]}`, `{"code":400,"err_code":10136,"description":"consumer cannot have both FilterSubject and FilterSubjects specified"}`},
	{"filter invalid", "S", false, `{"name":"v31","filter_subject":"s..a"}`, `{"code":500,"err_code":10052,"description":"invalid subject"}`},
	{"filters empty entry", "S", false, `{"name":"v32","filter_subjects":["s.a",""]}`, `{"code":400,"err_code":10139,"description":"consumer filter in FilterSubjects cannot be empty"}`},
	{"filters invalid entry", "S", false, `{"name":"v33","filter_subjects":["s.a","s..b"]}`, `{"code":500,"err_code":10052,"description":"invalid subject"}`},
	{"filters repeated", "S", false, `{"name":"v34","filter_subjects":["s.a","s.a"]}`, `{"code":400,"err_code":10138,"description":"consumer subject filters cannot overlap"}`},
	{"filters nested", "S", false, `{"name":"v35","filter_subjects":["s.a","s.>"]}`, `{"code":400,"err_code":10138,"description":"consumer subject filters cannot overlap"}`},
	{"filters star prefix", "S", false, `{"name":"v36","filter_subjects":["s.bar","s.*x"]}`, `{"code":400,"err_code":10138,"description":"consumer subject filters cannot overlap"}`},
	{"filters bad wildcard later", "S", false, `{"name":"v37","filter_subjects":["s.a",">.a"]}`, `{"code":400,"err_code":10138,"description":"consumer subject filters cannot overlap"}`},
	{"filters invalid first", "S", false, `{"name":"v38","filter_subjects":["s..a","s.>"]}`, `{"code":500,"err_code":10052,"description":"invalid subject"}`},
	{"all with seq", "S", false, `{"name":"v39","opt_start_seq":3}`, `{"code":400,"err_code":10094,"description":"consumer delivery policy is deliver all, but optional start sequence is also set"}`},
	{"all with time", "S", false, `{"name":"v40","opt_start_time":"2024-05-01T10:00:00Z"}`, `{"code":400,"err_code":10094,"description":"consumer delivery policy is deliver all, but optional start time is also set"}`},
	{"last with seq", "S", false, `{"name":"v41","deliver_policy":"last","opt_start_seq":3}`, `{"code":400,"err_code":10094,"description":"consumer delivery policy is deliver last, but optional start sequence is also set"}`},
	{"last with time", "S", false, `{"name":"v42","deliver_policy":"last","opt_start_time":"2024-05-01T10:00:00Z"}`, `{"code":400,"err_code":10094,"description":"consumer delivery policy is deliver last, but optional start time is also set"}`},
	{"new with seq", "S", false, `{"name":"v43","deliver_policy":"new","opt_start_seq":3}`, `{"code":400,"err_code":10094,"description":"consumer delivery policy is deliver new, but optional start sequence is also set"}`},
	{"new with time", "S", false, `{"name":"v44","deliver_policy":"new","opt_start_time":"2024-05-01T10:00:00Z"}`, `{"code":400,"err_code":10094,"description":"consumer delivery policy is deliver new, but optional start time is also set"}`},
	{"lps with seq", "S", false, `{"name":"v45","deliver_policy":"last_per_subject","opt_start_seq":3}`, `{"code":400,"err_code":10094,"description":"consumer delivery policy is deliver last per subject, but optional start sequence is also set"}`},
	{"lps with time", "S", false, `{"name":"v46","deliver_policy":"last_per_subject","opt_start_time":"2024-05-01T10:00:00Z","filter_subject":"s.a"}`, `{"code":400,"err_code":10094,"description":"consumer delivery policy is deliver last per subject, but optional start time is also set"}`},
	{"lps without filter", "S", false, `{"name":"v47","deliver_policy":"last_per_subject"}`, `{"code":400,"err_code":10094,"description":"consumer delivery policy is deliver last per subject, but optional filter subject is not set"}`},
	{"lps with filters", "S", false, `{"name":"v48","deliver_policy":"last_per_subject","filter_subjects":["s.a","s.b"]}`, `{"name":"v48","deliver_policy":"last_per_subject","ack_policy":"none","max_deliver":-1,"filter_subjects":["s.a","s.b"],"replay_policy":"instant","max_waiting":512,"inactive_threshold":5000000000,"num_replicas":0,"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.2"}}`},
	{"by seq without seq", "S", false, `{"name":"v49","deliver_policy":"by_start_sequence"}`, `{"code":400,"err_code":10094,"description":"consumer delivery policy is deliver by start sequence, but optional start sequence is not set"}`},
	{"by seq with time", "S", false, `{"name":"v50","deliver_policy":"by_start_sequence","opt_start_seq":3,"opt_start_time":"2024-05-01T10:00:00Z"}`, `{"code":400,"err_code":10094,"description":"consumer delivery policy is deliver by start sequence, but optional start time is also set"}`},
	{"by time without time", "S", false, `{"name":"v51","deliver_policy":"by_start_time","opt_start_seq":3}`, `{"code":400,"err_code":10094,"description":"consumer delivery policy is deliver by start time, but optional start time is not set"}`},
	{"by time with seq", "S", false, `{"name":"v52","deliver_policy":"by_start_time","opt_start_seq":3,"opt_start_time":"2024-05-01T10:00:00Z"}`, `{"code":400,"err_code":10094,"description":"consumer delivery policy is deliver by start time, but optional start start sequence is also set"}`},
	{"sample negative", "S", false, `{"name":"v53","sample_freq":"-5"}`, `{"code":400,"err_code":10095,"description":"failed to parse consumer sampling configuration: \u003cnil\u003e"}`},
	{"sample word", "S", false, `{"name":"v54","sample_freq":"abc%"}`, `{"code":400,"err_code":10095,"description":"failed to parse consumer sampling configuration: strconv.Atoi: parsing \"abc\": invalid syntax"}`},
	{"sample double percent", "S", false, `{"name":"v55","sample_freq":"5%%"}`, `{"code":400,"err_code":10095,"description":"failed to parse consumer sampling configuration: strconv.Atoi: parsing \"5%\": invalid syntax"}`},
	{"flow control without heartbeat", "S", false, `{"name":"v56","deliver_subject":"dv56","flow_control":true}`, `{"code":400,"err_code":10108,"description":"consumer with flow control also needs heartbeats"}`},
	{"priority push", "S", false, `{"name":"v57","deliver_subject":"dv57","priority_policy":"overflow","priority_groups":["A"]}`, `{"code":400,"err_code":10178,"description":"priority groups can not be used with push consumers"}`},
	{"priority without groups", "S", false, `{"name":"v58","priority_policy":"pinned_client"}`, `{"code":400,"err_code":10159,"description":"Setting PriorityPolicy requires at least one PriorityGroup to be set"}`},
	{"priority empty group", "S", false, `{"name":"v59","priority_policy":"overflow","priority_groups":["A",""]}`, `{"code":400,"err_code":10161,"description":"Group name cannot be an empty string"}`},
	{"priority long group", "S", false, `{"name":"v60","priority_policy":"overflow","priority_groups":["abcdefghijklmnopq"]}`, `{"code":400,"err_code":10162,"description":"Valid priority group name must match A-Z, a-z, 0-9, -_/=)+ and may not exceed 16 characters"}`},
	{"priority bad group", "S", false, `{"name":"v61","priority_policy":"prioritized","priority_groups":["a.b"]}`, `{"code":400,"err_code":10162,"description":"Valid priority group name must match A-Z, a-z, 0-9, -_/=)+ and may not exceed 16 characters"}`},
	{"groups without policy", "S", false, `{"name":"v62","priority_groups":["A"]}`, `{"code":400,"err_code":10196,"description":"consumer can not have priority groups when policy is none"}`},
	{"timeout without policy", "S", false, `{"name":"v63","priority_timeout":5}`, `{"code":400,"err_code":10197,"description":"PinnedTTL cannot be set when PriorityPolicy is none"}`},
	{"priority overflow", "S", false, `{"name":"v64","priority_policy":"overflow","priority_groups":["A","b-1/=_"]}`, `{"name":"v64","deliver_policy":"all","ack_policy":"none","max_deliver":-1,"replay_policy":"instant","max_waiting":512,"inactive_threshold":5000000000,"num_replicas":0,"metadata":{"_nats.level":"5","_nats.req.level":"1","_nats.ver":"2.15.2"},"priority_groups":["A","b-1/=_"],"priority_policy":"overflow"}`},
	{"priority pinned", "S", false, `{"name":"v65","priority_policy":"pinned_client","priority_groups":["A"]}`, `{"name":"v65","deliver_policy":"all","ack_policy":"none","max_deliver":-1,"replay_policy":"instant","max_waiting":512,"inactive_threshold":5000000000,"num_replicas":0,"metadata":{"_nats.level":"5","_nats.req.level":"1","_nats.ver":"2.15.2"},"priority_groups":["A"],"priority_policy":"pinned_client","priority_timeout":120000000000}`},
	{"replicas negative", "S", false, `{"name":"v66","num_replicas":-1}`, `{"code":400,"err_code":10133,"description":"replicas count cannot be negative"}`},
}

// cairnAnswers are cairn's deliberate differences from createCases
// (docs/compatibility.md): none today.
var cairnAnswers = map[string]string{}

func TestCreateMatchesNatsServer(t *testing.T) {
	for _, tc := range createCases {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.want
			if w, ok := cairnAnswers[tc.name]; ok {
				want = w
			}
			s := streamConfig(t, oracleStreams[tc.stream])
			if got := createConfig(t, s, tc.in, tc.pedantic); got != want {
				t.Errorf("config %s\n got %s\nwant %s", tc.in, got, want)
			}
		})
	}
}

// validCfg returns a config that passes Validate against stream "S".
func validCfg() *Config {
	return &Config{Durable: "D", Name: "D", AckPolicy: AckExplicit, AckWait: DefaultAckWait,
		MaxDeliver: -1, MaxWaiting: DefaultMaxWaiting, MaxAckPending: DefaultMaxAckPending}
}

// TestValidateGoOnly covers what a request cannot reach on one server
// (the API layer or SetDefaults answers first), with nats-server's codes
// and texts for the same config (checkConsumerCfg).
func TestValidateGoOnly(t *testing.T) {
	r3 := `{"name":"R3","subjects":["r.>"],"retention":"interest"}`
	cases := []struct {
		name   string
		stream string
		edit   func(c *Config, s *stream.Config)
		want   jserr.ErrCode
		text   string
	}{
		{"valid", oracleStreams["S"], func(*Config, *stream.Config) {}, 0, ""},
		{"durable with a dot", oracleStreams["S"], func(c *Config, _ *stream.Config) { c.Durable, c.Name = "a.b", "" },
			jserr.StreamInvalidConfig, `consumer durable name can not contain '.', '*', '>', '\', '/'`},
		{"durable with a slash", oracleStreams["S"], func(c *Config, _ *stream.Config) { c.Durable, c.Name = `a\b`, "" },
			jserr.StreamInvalidConfig, `consumer durable name can not contain '.', '*', '>', '\', '/'`},
		{"name checked before durable", oracleStreams["S"], func(c *Config, _ *stream.Config) { c.Durable, c.Name = "a.b", "c/d" },
			jserr.StreamInvalidConfig, `consumer name can not contain '.', '*', '>', '\', '/'`},
		{"replicas above the stream", oracleStreams["S"], func(c *Config, _ *stream.Config) { c.Replicas = 2 },
			jserr.ConsumerReplicasExceedsStream, "consumer config replica count exceeds parent stream"},
		{"replicas not the interest stream's", r3, func(c *Config, s *stream.Config) { s.Replicas, c.Replicas = 3, 2 },
			jserr.ConsumerReplicasShouldMatchStream, "consumer config replicas must match interest retention stream's replicas"},
		{"replicas equal the interest stream's", r3, func(c *Config, s *stream.Config) { s.Replicas, c.Replicas = 3, 3 }, 0, ""},
		{"replicas not the workqueue stream's", oracleStreams["W"], func(c *Config, s *stream.Config) { s.Replicas, c.Replicas = 3, 1 },
			jserr.ConsumerReplicasShouldMatchStream, "consumer config replicas must match interest retention stream's replicas"},
		{"replicas any on a limits stream", oracleStreams["S"], func(c *Config, s *stream.Config) { s.Replicas, c.Replicas = 3, 2 }, 0, ""},
		{"ack policy out of range", oracleStreams["S"], func(c *Config, _ *stream.Config) { c.AckPolicy = 9 },
			jserr.ConsumerAckPolicyInvalid, "consumer ack policy invalid"},
		{"replay policy out of range", oracleStreams["S"], func(c *Config, _ *stream.Config) { c.ReplayPolicy = -1 },
			jserr.ConsumerReplayPolicyInvalid, "consumer replay policy invalid"},
		{"pull max_waiting negative", oracleStreams["S"], func(c *Config, _ *stream.Config) { c.MaxWaiting = -1 },
			jserr.ConsumerMaxWaitingNegative, "consumer max waiting needs to be positive"},
		{"pull max_batch negative", oracleStreams["S"], func(c *Config, _ *stream.Config) { c.MaxRequestBatch = -1 },
			jserr.ConsumerMaxRequestBatchNegative, "consumer max request batch needs to be > 0"},
		{"flow control heartbeat", oracleStreams["S"], func(c *Config, _ *stream.Config) {
			c.AckPolicy, c.AckWait, c.DeliverSubject, c.MaxWaiting, c.FlowControl = AckFlowControl, 0, "d", 0, true
		}, jserr.StreamInvalidConfig, "flow control ack policy heartbeat needs to be 1s"},
		{"name and durable differ", oracleStreams["S"], func(c *Config, _ *stream.Config) { c.Name = "E" },
			jserr.ConsumerCreateDurableAndNameMismatch, "Consumer Durable and Name have to be equal if both are provided"},
		{"description 4096", oracleStreams["S"], func(c *Config, _ *stream.Config) { c.Description = strings.Repeat("d", 4096) }, 0, ""},
		{"description 4097", oracleStreams["S"], func(c *Config, _ *stream.Config) { c.Description = strings.Repeat("d", 4097) },
			jserr.ConsumerDescriptionTooLong, "consumer description is too long, maximum allowed is 4096"},
		{"metadata 128 KiB", oracleStreams["S"], func(c *Config, _ *stream.Config) {
			c.Metadata = map[string]string{"k": strings.Repeat("v", MaxMetadataLen-1)}
		}, 0, ""},
		{"metadata over 128 KiB", oracleStreams["S"], func(c *Config, _ *stream.Config) {
			c.Metadata = map[string]string{"k": strings.Repeat("v", MaxMetadataLen)}
		},
			jserr.ConsumerMetadataLength, "consumer metadata exceeds maximum size of 128KB"},
		{"placement preferred", oracleStreams["S"], func(_ *Config, s *stream.Config) { s.Placement = &stream.Placement{Preferred: "n1"} },
			jserr.StreamInvalidConfig, "preferred server not permitted in placement"},
		{"priority policy out of range", oracleStreams["S"], func(c *Config, _ *stream.Config) {
			c.PriorityPolicy, c.PriorityGroups = 7, []string{"A"}
		}, jserr.StreamInvalidConfig, "unknown priority policy"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, c := streamConfig(t, tc.stream), validCfg()
			tc.edit(c, s)
			err := c.Validate(s, false)
			switch {
			case tc.want == 0 && err != nil:
				t.Fatalf("Validate: %v", err)
			case tc.want == 0:
			case err == nil || jserr.ErrCode(err.ErrCode) != tc.want || err.Description != tc.text:
				t.Fatalf("Validate = %v, want %d %q", err, tc.want, tc.text)
			}
		})
	}
}

// TestValidateRecovering: a recovered consumer may keep replicas an older
// server allowed on an interest stream (checkConsumerCfg isRecovering).
func TestValidateRecovering(t *testing.T) {
	s := streamConfig(t, oracleStreams["I"])
	s.Replicas = 3
	c := validCfg()
	c.Replicas = 2
	if err := c.Validate(s, true); err != nil {
		t.Fatalf("recovering: %v", err)
	}
	if err := c.Validate(s, false); err == nil || err.ErrCode != uint16(jserr.ConsumerReplicasShouldMatchStream) {
		t.Fatalf("not recovering: %v", err)
	}
}

// TestMetadataLimitCountsRequiredLevel: nats-server adds _nats.req.level
// before it validates, so 131071 bytes of user metadata plus the key
// exceed the limit (observed: 10135 for {"k": 131071 bytes}).
func TestMetadataLimitCountsRequiredLevel(t *testing.T) {
	s := streamConfig(t, oracleStreams["S"])
	c := validCfg()
	c.Metadata = map[string]string{"k": strings.Repeat("v", MaxMetadataLen-1)}
	c.SetStaticMetadata()
	err := c.Validate(s, false)
	if want := `{"code":400,"err_code":10135,"description":"consumer metadata exceeds maximum size of 128KB"}`; mustJSON(t, err) != want {
		t.Fatalf("got %s, want %s", mustJSON(t, err), want)
	}
}

// TestCheckDurableLength: 10102 beyond 255 bytes (observed on
// DURABLE.CREATE with a 256-byte name).
func TestCheckDurableLength(t *testing.T) {
	c := &Config{Durable: strings.Repeat("n", MaxNameLen)}
	if err := c.CheckDurableLength(); err != nil {
		t.Fatalf("255 bytes: %v", err)
	}
	c.Durable += "n"
	want := `{"code":400,"err_code":10102,"description":"consumer name is too long, maximum allowed is 255"}`
	if got := mustJSON(t, c.CheckDurableLength()); got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	if err := (&Config{Name: strings.Repeat("n", 300)}).CheckDurableLength(); err != nil {
		t.Fatalf("ephemeral name: %v", err)
	}
}

// TestSubsetMatch pins nats-server's subjectIsSubsetMatch, quirks
// included; the filter and deliver-subject checks rest on it.
func TestSubsetMatch(t *testing.T) {
	cases := []struct {
		sub, test string
		want      bool
	}{
		{"a", "a", true},
		{"a", "b", false},
		{"a.b", ">", true},
		{"a.b", "a.>", true},
		{"a", "a.>", false},
		{"a.*", "a.>", true},
		{"a.>", "a.*", false},
		{"a.*", "a.*", true},
		{"a.*", "a.b", false},
		{"a.b", "a.*", true},
		{"a.*", "*.*", true},
		{"*.b", "a.*", false},
		{"a.b.c", "a.*", false},
		{"a", "a.b", false},
		{"a.bar", "a.*x", true}, // a token starting with '*' matches like '*'
		{"a.*x", "a.bar", false},
		{"a.b", ">.x", true},  // test is not validated
		{"a..b", "a.>", true}, // sub is not validated either
		{"", "a", false},
	}
	for _, tc := range cases {
		if got := subsetMatch(tc.sub, tc.test); got != tc.want {
			t.Errorf("subsetMatch(%q, %q) = %v, want %v", tc.sub, tc.test, got, tc.want)
		}
	}
}

func TestValidGroupName(t *testing.T) {
	for g, want := range map[string]bool{
		"A": true, "a-b_c/d=e": true, "0123456789abcdef": true,
		"": false, "0123456789abcdefg": false, "a.b": false, "a b": false, "a+b": false, "é": false,
	} {
		if got := ValidGroupName(g); got != want {
			t.Errorf("ValidGroupName(%q) = %v, want %v", g, got, want)
		}
	}
}

// TestStartTimeIgnoredForOtherPolicies: an opt_start_time with zero
// value still counts as set, as nats-server tests for nil only.
func TestStartTimeZeroCountsAsSet(t *testing.T) {
	s := streamConfig(t, oracleStreams["S"])
	c := validCfg()
	c.OptStartTime = &time.Time{}
	err := c.Validate(s, false)
	if err == nil || err.Description != "consumer delivery policy is deliver all, but optional start time is also set" {
		t.Fatalf("got %v", err)
	}
}

// TestValidateDeadLetter: a consumer's dead-letter subject is refused
// with 10052 when it is invalid or captured by its own stream
// (docs/dead-letter.md, a check of cairn's own); another stream's
// subject, or an empty value (none), is accepted.
func TestValidateDeadLetter(t *testing.T) {
	s := streamConfig(t, oracleStreams["S"])
	for subj, bad := range map[string]bool{"dlq.s": false, "": false, "s.dead": true, "dlq.*": true} {
		c := decodeConfig(t, `{"durable_name":"d","ack_policy":"explicit"}`)
		c.Metadata = map[string]string{stream.MetaDeadLetterSubject: subj}
		if err := c.SetDefaults(s, false); err != nil {
			t.Fatal(err)
		}
		err := c.Validate(s, false)
		if bad != (err != nil) || bad && (err.ErrCode != uint16(jserr.StreamInvalidConfig) || !strings.Contains(err.Description, stream.MetaDeadLetterSubject)) {
			t.Errorf("dead letter subject %q: %v", subj, err)
		}
	}
}
