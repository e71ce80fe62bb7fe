package stream

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/store/memstore"
)

// The publish scripts below were run against nats-server v2.15.2 with
// nats.go (one request per line, headers written "Key: value"); want is
// the reply it sent, byte for byte (nats-server v2.15.2 PubAck, JSPubAckResponse; the Nats-* publish headers of nats-server v2.15.2's processJetStreamMsg; nats-server v2.15.2 deduplication; nats-server v2.15.2's limits and discard policies). Each script starts on a new stream with the config shown.

// pubStep is one publish: the subject, the header fields as
// "Key:value|Key:value" ("" for no header), the payload and the PubAck.
type pubStep struct {
	subj, hdr, data, want string
}

// t0 is the time of the first publish of a script; each next publish is
// 1 ms later.
const t0 = int64(1_700_000_000_000_000_000)

// scriptOrders runs every header check on
// {"name":"ORDERS","subjects":["orders.>"]}.
var scriptOrders = []pubStep{
	{"orders.a", "", "hello", `{"stream":"ORDERS","seq":1}`},
	{"orders.a", "Nats-Msg-Id:m1", "x", `{"stream":"ORDERS","seq":2}`},
	{"orders.a", "Nats-Msg-Id:m1", "x", `{"stream":"ORDERS","seq":2,"duplicate": true}`},
	{"orders.a", "nats-msg-id:m1", "x", `{"stream":"ORDERS","seq":3}`},
	{"orders.a", "Nats-Expected-Stream:FOO", "x", `{"error":{"code":400,"err_code":10060,"description":"expected stream does not match"},"stream":"ORDERS","seq":0}`},
	{"orders.a", "Nats-Expected-Last-Sequence:2", "x", `{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 3"},"stream":"ORDERS","seq":0}`},
	{"orders.a", "Nats-Expected-Last-Sequence:abc", "x", `{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 3"},"stream":"ORDERS","seq":0}`},
	{"orders.a", "Nats-Expected-Last-Subject-Sequence:1", "x", `{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 3"},"stream":"ORDERS","seq":0}`},
	{"orders.a", "Nats-Expected-Last-Subject-Sequence-Subject:orders.b", "x", `{"error":{"code":400,"err_code":10193,"description":"missing sequence for expected last sequence per subject"},"stream":"ORDERS","seq":0}`},
	{"orders.b", "Nats-Expected-Last-Subject-Sequence:0", "x", `{"stream":"ORDERS","seq":4}`},
	{"orders.c", "Nats-Expected-Last-Subject-Sequence:0|Nats-Expected-Last-Subject-Sequence-Subject:orders.*", "x", `{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 4"},"stream":"ORDERS","seq":0}`},
	{"orders.a", "Nats-Expected-Last-Msg-Id:zz", "x", `{"error":{"code":400,"err_code":10070,"description":"wrong last msg ID: "},"stream":"ORDERS","seq":0}`},
	{"orders.a", "Nats-TTL:5s", "x", `{"error":{"code":400,"err_code":10166,"description":"per-message TTL is disabled"},"stream":"ORDERS","seq":0}`},
	{"orders.a", "Nats-TTL:500ms", "x", `{"error":{"code":400,"err_code":10165,"description":"invalid per-message TTL"},"stream":"ORDERS","seq":0}`},
	{"orders.a", "Nats-TTL:0", "x", `{"error":{"code":400,"err_code":10165,"description":"invalid per-message TTL"},"stream":"ORDERS","seq":0}`},
	{"orders.a", "Nats-TTL:abc", "x", `{"error":{"code":400,"err_code":10165,"description":"invalid per-message TTL"},"stream":"ORDERS","seq":0}`},
	{"orders.a", "Nats-TTL:never", "x", `{"error":{"code":400,"err_code":10166,"description":"per-message TTL is disabled"},"stream":"ORDERS","seq":0}`},
	{"orders.a", "Nats-TTL:60", "x", `{"error":{"code":400,"err_code":10166,"description":"per-message TTL is disabled"},"stream":"ORDERS","seq":0}`},
	{"orders.a", "Nats-Incr:5", "x", `{"error":{"code":400,"err_code":10168,"description":"message counters is disabled"},"stream":"ORDERS","seq":0}`},
	{"orders.a", "Nats-Incr:abc", "x", `{"error":{"code":400,"err_code":10171,"description":"message counter increment is invalid"},"stream":"ORDERS","seq":0}`},
	{"orders.a", "Nats-Schedule:@every 5s", "x", `{"error":{"code":400,"err_code":10188,"description":"message schedules is disabled"},"stream":"ORDERS","seq":0}`},
	{"orders.a", "Nats-Schedule:garbage", "x", `{"error":{"code":400,"err_code":10188,"description":"message schedules is disabled"},"stream":"ORDERS","seq":0}`},
	{"orders.a", "Nats-Schedule-Time-Zone:", "x", `{"error":{"code":400,"err_code":10188,"description":"message schedules is disabled"},"stream":"ORDERS","seq":0}`},
	{"orders.a", "Nats-Schedule-Next:purge", "x", `{"error":{"code":400,"err_code":10212,"description":"message schedules invalid scheduler"},"stream":"ORDERS","seq":0}`},
	{"orders.a", "Nats-Schedule-Next:xx", "x", `{"error":{"code":400,"err_code":10212,"description":"message schedules invalid scheduler"},"stream":"ORDERS","seq":0}`},
	{"orders.a", "Nats-Scheduler:orders.z", "x", `{"error":{"code":400,"err_code":10212,"description":"message schedules invalid scheduler"},"stream":"ORDERS","seq":0}`},
	{"orders.a", "Nats-Stream-Source:abc", "x", `{"error":{"code":400,"err_code":10227,"description":"message stream source header is not allowed"},"stream":"ORDERS","seq":0}`},
	{"orders.a", "Nats-Batch-Id:b1", "x", `{"error":{"code":400,"err_code":10174,"description":"atomic publish is disabled"},"stream":"ORDERS","seq":0}`},
	{"orders.a", "Nats-Rollup:sub", "x", `{"error":{"code":500,"err_code":10111,"description":"rollup not permitted"},"stream":"ORDERS","seq":0}`},
	{"orders.a", "Nats-Rollup:bogus", "x", `{"error":{"code":500,"err_code":10111,"description":"rollup not permitted"},"stream":"ORDERS","seq":0}`},
	{"orders.a", "Nats-Expected-Stream:FOO|Nats-Expected-Last-Sequence:99", "x", `{"error":{"code":400,"err_code":10060,"description":"expected stream does not match"},"stream":"ORDERS","seq":0}`},
	{"orders.a", "Nats-Msg-Id:m1|Nats-Expected-Last-Sequence:99", "x", `{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 4"},"stream":"ORDERS","seq":0}`},
	{"orders.a", "Nats-Msg-Id:m1|Nats-Expected-Last-Msg-Id:nope", "x", `{"stream":"ORDERS","seq":2,"duplicate": true}`},
	{"orders.a", "Nats-Msg-Id:m2|Nats-Expected-Last-Msg-Id:m1", "x", `{"error":{"code":400,"err_code":10070,"description":"wrong last msg ID: "},"stream":"ORDERS","seq":0}`},
	{"orders.a", "Nats-Msg-Id:m3|Nats-Expected-Last-Msg-Id:m1", "x", `{"error":{"code":400,"err_code":10070,"description":"wrong last msg ID: "},"stream":"ORDERS","seq":0}`},
	{"orders.a", "Nats-TTL:abc|Nats-Expected-Last-Sequence:99", "x", `{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 4"},"stream":"ORDERS","seq":0}`},
	{"orders.a", "Nats-TTL:abc|Nats-Rollup:sub", "x", `{"error":{"code":500,"err_code":10111,"description":"rollup not permitted"},"stream":"ORDERS","seq":0}`},
}

// scriptKV is a KV-like stream: {"name":"KV","subjects":["kv.>"],
// "max_msgs_per_subject":1,"discard":"new","discard_new_per_subject":true,
// "allow_rollup_hdrs":true,"max_bytes":300}. A rollup passes the
// per-subject limit; a purged message's id is still a duplicate.
var scriptKV = []pubStep{
	{"kv.a", "Nats-Msg-Id:x", "1", `{"stream":"KV","seq":1}`},
	{"kv.a", "", "2", `{"error":{"code":503,"err_code":10077,"description":"maximum messages per subject exceeded"},"stream":"KV","seq":0}`},
	{"kv.a", "Nats-Expected-Last-Msg-Id:x|Nats-Rollup:sub", "3", `{"stream":"KV","seq":2}`},
	{"kv.a", "Nats-Expected-Last-Msg-Id:x", "4", `{"error":{"code":400,"err_code":10070,"description":"wrong last msg ID: "},"stream":"KV","seq":0}`},
	{"kv.b", "Nats-Expected-Last-Subject-Sequence:0|Nats-Msg-Id:y", "5", `{"stream":"KV","seq":3}`},
	{"kv.b", "Nats-Expected-Last-Subject-Sequence:2|Nats-Rollup:sub", "6", `{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 3"},"stream":"KV","seq":0}`},
	{"kv.c", "Nats-Msg-Id:z", "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789", `{"error":{"code":503,"err_code":10077,"description":"maximum bytes exceeded"},"stream":"KV","seq":0}`},
	{"kv.b", "Nats-Rollup:all|Nats-Expected-Last-Sequence:3", "7", `{"stream":"KV","seq":4}`},
	{"kv.b", "Nats-Msg-Id:y", "8", `{"stream":"KV","seq":3,"duplicate": true}`},
	{"kv.b", "Nats-Msg-Id:y2|Nats-Expected-Last-Msg-Id:", "9", `{"error":{"code":503,"err_code":10077,"description":"maximum messages per subject exceeded"},"stream":"KV","seq":0}`},
}

// scriptRollup: {"name":"R","subjects":["r.>"],"allow_rollup_hdrs":true,
// "max_msgs":4,"discard":"new"}. The limits refuse a rollup before it
// could purge.
var scriptRollup = []pubStep{
	{"r.b", "", "1", `{"stream":"R","seq":1}`},
	{"r.b", "", "2", `{"stream":"R","seq":2}`},
	{"r.a", "", "3", `{"stream":"R","seq":3}`},
	{"r.a", "Nats-Rollup:bogus", "x", `{"error":{"code":500,"err_code":10111,"description":"rollup value invalid: \"bogus\""},"stream":"R","seq":0}`},
	{"r.a", "Nats-Rollup:SUB", "x", `{"stream":"R","seq":4}`},
	{"r.c", "", "4", `{"stream":"R","seq":5}`},
	{"r.c", "", "5", `{"error":{"code":503,"err_code":10077,"description":"maximum messages exceeded"},"stream":"R","seq":0}`},
	{"r.c", "Nats-Rollup:all", "x", `{"error":{"code":503,"err_code":10077,"description":"maximum messages exceeded"},"stream":"R","seq":0}`},
}

// scriptFeatures: {"name":"SC","subjects":["sc.>"],"max_msg_size":100}.
// Atomic batches, counters and schedules are refused as on a stream
// without them; empty values count as absent.
var scriptFeatures = []pubStep{
	{"sc.a", "Nats-Batch-Id:b1|Nats-Expected-Stream:X", "x", `{"error":{"code":400,"err_code":10174,"description":"atomic publish is disabled"},"stream":"SC","seq":0}`},
	{"sc.a", "Nats-Batch-Id:b1", "01234567890123456789012345678901234567890123456789012345678901234567890123456789", `{"error":{"code":400,"err_code":10054,"description":"message size exceeds maximum allowed"},"stream":"SC","seq":0}`},
	{"sc.a", "Nats-Batch-Id:", "x", `{"stream":"SC","seq":1}`},
	{"sc.a", "Nats-TTL:00", "x", `{"stream":"SC","seq":2}`},
	{"sc.a", "Nats-Incr:+5", "x", `{"error":{"code":400,"err_code":10168,"description":"message counters is disabled"},"stream":"SC","seq":0}`},
	{"sc.a", "Nats-Schedule-Time-Zone:UTC", "x", `{"stream":"SC","seq":3}`},
	{"sc.a", "Nats-Schedule-Next:purge|Nats-Scheduler:sc.a", "x", `{"error":{"code":400,"err_code":10212,"description":"message schedules invalid scheduler"},"stream":"SC","seq":0}`},
	{"sc.a", "Nats-Schedule-Next:purge|Nats-Scheduler:sc.b", "x", `{"error":{"code":400,"err_code":10188,"description":"message schedules is disabled"},"stream":"SC","seq":0}`},
	{"sc.a", "Nats-Expected-Last-Sequence:", "x", `{"stream":"SC","seq":4}`},
	{"sc.a", "Nats-Rollup:", "x", `{"stream":"SC","seq":5}`},
	{"sc.a", "", "x", `{"stream":"SC","seq":6}`},
}

// scriptSize: {"name":"SZ","subjects":["sz.>"],"max_msg_size":40}. The
// size check comes before the header checks.
var scriptSize = []pubStep{
	{"sz.a", "Nats-Expected-Stream:FOO", "0123456789", `{"error":{"code":400,"err_code":10054,"description":"message size exceeds maximum allowed"},"stream":"SZ","seq":0}`},
	{"sz.a", "", "01234567890123456789012345678901234567890", `{"error":{"code":400,"err_code":10054,"description":"message size exceeds maximum allowed"},"stream":"SZ","seq":0}`},
	{"sz.a", "", "0123456789012345678901234567890123456789", `{"stream":"SZ","seq":1}`},
	{"sz.a", "Nats-Expected-Stream:FOO", "01234567890123456789012345678901234567890", `{"error":{"code":400,"err_code":10054,"description":"message size exceeds maximum allowed"},"stream":"SZ","seq":0}`},
}

func TestApplyScripts(t *testing.T) {
	tests := []struct {
		name, cfg string
		steps     []pubStep
	}{
		{"orders", `{"name":"ORDERS","subjects":["orders.>"]}`, scriptOrders},
		{"kv", `{"name":"KV","subjects":["kv.>"],"max_msgs_per_subject":1,"discard":"new","discard_new_per_subject":true,"allow_rollup_hdrs":true,"max_bytes":300}`, scriptKV},
		{"rollup", `{"name":"R","subjects":["r.>"],"allow_rollup_hdrs":true,"max_msgs":4,"discard":"new"}`, scriptRollup},
		{"features", `{"name":"SC","subjects":["sc.>"],"max_msg_size":100}`, scriptFeatures},
		{"size", `{"name":"SZ","subjects":["sz.>"],"max_msg_size":40}`, scriptSize},
		{"header too large", `{"name":"HZ","subjects":["hz.>"]}`, []pubStep{
			{"hz.a", "Nats-Expected-Stream:FOO|X-Big:" + strings.Repeat("a", 65600), "x", `{"error":{"code":400,"err_code":10097,"description":"header size exceeds maximum allowed of 64k"},"stream":"HZ","seq":0}`},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			runScript(t, newTestStream(t, tc.cfg), tc.steps)
		})
	}
}

// newTestStream returns a stream with the config decoded from cfg
// (defaulted and validated) over a new memstore.
func newTestStream(t *testing.T, cfg string) *Stream {
	t.Helper()
	c := mustConfig(t, cfg)
	return New(c, memstore.New(c.StoreConfig()))
}

// runScript applies the steps in order and compares each PubAck.
func runScript(t *testing.T, s *Stream, steps []pubStep) {
	t.Helper()
	for i, st := range steps {
		r := s.Apply(Entry{Subject: st.subj, Header: hdrBlock(st.hdr), Data: []byte(st.data), Time: stepTime(i)})
		if got := string(AppendPubAck(nil, s.cfg.Name, r, "")); got != st.want {
			t.Errorf("step %d %s %.60q:\n got %s\nwant %s", i, st.subj, st.hdr, got, st.want)
		}
	}
}

func stepTime(i int) int64 { return t0 + int64(i)*int64(time.Millisecond) }

// hdrBlock builds the header block nats.go sends for "K:v|K2:v2".
func hdrBlock(fields string) []byte {
	if fields == "" {
		return nil
	}
	b := []byte("NATS/1.0\r\n")
	for _, kv := range strings.Split(fields, "|") {
		k, v, _ := strings.Cut(kv, ":")
		b = append(b, k+": "+v+"\r\n"...)
	}
	return append(b, "\r\n"...)
}

// BenchmarkApply measures the state machine on the publish path over a
// memstore: a plain message, and one with a Nats-Msg-Id.
func BenchmarkApply(b *testing.B) {
	for _, bc := range []struct {
		name string
		hdr  func(i int) []byte
	}{
		{"plain", func(int) []byte { return nil }},
		{"msgid", func(i int) []byte { return hdrBlock("Nats-Msg-Id:" + strconv.Itoa(i)) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := Config{Name: "B", Subjects: []string{"b"}, MaxMsgs: 1000}
			c.SetDefaults()
			s := New(c, memstore.New(c.StoreConfig()))
			hdrs := make([][]byte, 1024)
			for i := range hdrs {
				hdrs[i] = bc.hdr(i)
			}
			data := make([]byte, 128)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				r := s.Apply(Entry{Subject: "b", Header: hdrs[i%len(hdrs)], Data: data, Time: int64(i)})
				if r.Err != nil {
					b.Fatal(r.Err)
				}
				if i%1024 == 1023 {
					s.ExpireDedupe(int64(i) + int64(DefaultDuplicateWindow))
				}
			}
		})
	}
}
