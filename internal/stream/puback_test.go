package stream

import (
	"testing"

	"github.com/cairnmq/cairn/internal/jserr"
)

// TestAppendPubAck checks every PubAck form against the bytes nats-server
// v2.15.2 sent (nats-server v2.15.2 PubAck, JSPubAckResponse; nats-server v2.15.2 deduplication; the domain forms from a
// server with jetstream { domain: hub }).
func TestAppendPubAck(t *testing.T) {
	wrong := jserr.New(jserr.StreamWrongLastSequence, jserr.Sub("seq", 6))
	tests := []struct {
		stream, domain string
		r              Result
		want           string
	}{
		{"ORDERS", "", Result{Seq: 7}, `{"stream":"ORDERS","seq":7}`},
		{"ORDERS", "", Result{Seq: 7, Duplicate: true}, `{"stream":"ORDERS","seq":7,"duplicate": true}`},
		{"ORDERS", "hub", Result{Seq: 1}, `{"stream":"ORDERS","domain":"hub","seq":1}`},
		{"ORDERS", "hub", Result{Seq: 1, Duplicate: true}, `{"stream":"ORDERS","domain":"hub","seq":1,"duplicate": true}`},
		{"ORDERS", "", Result{Err: wrong}, `{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 6"},"stream":"ORDERS","seq":0}`},
		{"ORDERS", "hub", Result{Err: wrong}, `{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 6"},"stream":"ORDERS","seq":0}`},
		// %q for the success forms, encoding/json for the error form.
		{"A<B", "", Result{Seq: 1}, `{"stream":"A<B","seq":1}`},
		{"A<B", "", Result{Err: jserr.New(jserr.StreamNotMatch)}, `{"error":{"code":400,"err_code":10060,"description":"expected stream does not match"},"stream":"A\u003cB","seq":0}`},
		{"ORDERS", "", Result{Err: jserr.New(jserr.StreamTooManyRequests)}, `{"error":{"code":429,"err_code":10167,"description":"too many requests"},"stream":"ORDERS","seq":0}`},
		{"ORDERS", "", Result{Seq: 18446744073709551615}, `{"stream":"ORDERS","seq":18446744073709551615}`},
	}
	for _, tc := range tests {
		prefix := []byte("MSG x 1 27\r\n")
		got := AppendPubAck(prefix, tc.stream, tc.r, tc.domain)
		if string(got[len(prefix):]) != tc.want || string(got[:len(prefix)]) != string(prefix) {
			t.Errorf("\n got %s\nwant %s", got, tc.want)
		}
	}
}

// TestAppendPubAckNoAlloc: the success form appends into a buffer with
// room without allocating (it is on the publish path).
func TestAppendPubAckNoAlloc(t *testing.T) {
	buf := make([]byte, 0, 128)
	n := testing.AllocsPerRun(100, func() {
		buf = AppendPubAck(buf[:0], "ORDERS", Result{Seq: 123456}, "")
	})
	if n != 0 {
		t.Errorf("%v allocations", n)
	}
}
