package test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// JetStream streams driven by the nats.go jetstream package (v1.55): the
// $JS.API stream endpoints, publishing with PubAcks, and the publish
// headers the server acts on (issue 4). Everything here also passes
// against nats-server v2.15.2 (CAIRN_TEST_TARGET=nats-server); the few
// places where cairn deliberately differs (docs/compatibility.md) are
// skipped for nats-server with a comment.

// ---------------------------------------------------------------------------
// helpers

const jsTimeout = 10 * time.Second

// startJS starts the server under test with JetStream on and a fresh store
// directory.
func startJS(t testing.TB) string {
	t.Helper()
	return startServer(t, func(o *server.Options) { o.JetStream = true })
}

// jsIn is the server options of a JetStream server storing in dir, for
// tests that restart it over the same store.
func jsIn(dir string) func(*server.Options) {
	return func(o *server.Options) { o.JetStream = true; o.StoreDir = dir }
}

// jsConnect opens a nats.go connection and a jetstream context on it.
func jsConnect(t testing.TB, u string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc := connect(t, u)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream.New: %v", err)
	}
	return nc, js
}

// tctx is a context bounded by jsTimeout and cancelled with the test.
func tctx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), jsTimeout)
	t.Cleanup(cancel)
	return ctx
}

func createStream(t testing.TB, js jetstream.JetStream, cfg jetstream.StreamConfig) jetstream.Stream {
	t.Helper()
	s, err := js.CreateStream(tctx(t), cfg)
	if err != nil {
		t.Fatalf("CreateStream %s: %v", cfg.Name, err)
	}
	return s
}

func streamInfo(t testing.TB, s jetstream.Stream, opts ...jetstream.StreamInfoOpt) *jetstream.StreamInfo {
	t.Helper()
	info, err := s.Info(tctx(t), opts...)
	if err != nil {
		t.Fatalf("stream info: %v", err)
	}
	return info
}

func jsPublish(t testing.TB, js jetstream.JetStream, subj, data string, opts ...jetstream.PublishOpt) *jetstream.PubAck {
	t.Helper()
	ack, err := js.Publish(tctx(t), subj, []byte(data), opts...)
	if err != nil {
		t.Fatalf("js.Publish %s %q: %v", subj, data, err)
	}
	return ack
}

func jsPublishMsg(t testing.TB, js jetstream.JetStream, m *nats.Msg, opts ...jetstream.PublishOpt) *jetstream.PubAck {
	t.Helper()
	ack, err := js.PublishMsg(tctx(t), m, opts...)
	if err != nil {
		t.Fatalf("js.PublishMsg %s: %v", m.Subject, err)
	}
	return ack
}

// wantAck checks a PubAck's stream, sequence and duplicate flag.
func wantAck(t testing.TB, ack *jetstream.PubAck, stream string, seq uint64, dup bool) {
	t.Helper()
	if ack.Stream != stream || ack.Sequence != seq || ack.Duplicate != dup || ack.Domain != "" {
		t.Errorf("PubAck = %+v, want stream %s seq %d duplicate %v (no domain)", *ack, stream, seq, dup)
	}
}

// wantAPIError asserts that err carries a JetStream API error with the
// given HTTP-like code, err_code and (unless desc is "") description.
func wantAPIError(t testing.TB, err error, code int, errCode uint16, desc string) {
	t.Helper()
	if err == nil {
		t.Errorf("want API error %d/%d %q, got success", code, errCode, desc)
		return
	}
	var je jetstream.JetStreamError
	if !errors.As(err, &je) || je.APIError() == nil {
		t.Errorf("want API error %d/%d %q, got %T: %v", code, errCode, desc, err, err)
		return
	}
	ae := je.APIError()
	if ae.Code != code || uint16(ae.ErrorCode) != errCode || (desc != "" && ae.Description != desc) {
		t.Errorf("API error = {code %d, err_code %d, %q}, want {code %d, err_code %d, %q}",
			ae.Code, ae.ErrorCode, ae.Description, code, errCode, desc)
	}
}

// wantDeleteError checks the error of Stream.DeleteMsg, which nats.go
// reports as ErrMsgDeleteUnsuccessful with the API error only as text.
func wantDeleteError(t testing.TB, err error, code int, errCode uint16, desc string) {
	t.Helper()
	want := fmt.Sprintf("code=%d err_code=%d description=%s", code, errCode, desc)
	if !errors.Is(err, jetstream.ErrMsgDeleteUnsuccessful) || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("DeleteMsg error %v, want ErrMsgDeleteUnsuccessful ending %q", err, want)
	}
}

// wantState checks the counters of a stream state.
func wantState(t testing.TB, st jetstream.StreamState, msgs, first, last uint64) {
	t.Helper()
	if st.Msgs != msgs || st.FirstSeq != first || st.LastSeq != last {
		t.Errorf("state: messages %d first_seq %d last_seq %d, want %d %d %d (full state %+v)",
			st.Msgs, st.FirstSeq, st.LastSeq, msgs, first, last, st)
	}
}

// apiRequest sends body to a $JS.API subject with a plain request and
// returns the raw reply and its decoded JSON.
func apiRequest(t testing.TB, nc *nats.Conn, subj, body string) ([]byte, map[string]any) {
	t.Helper()
	resp, err := nc.Request(subj, []byte(body), jsTimeout)
	if err != nil {
		t.Fatalf("request %s %s: %v", subj, trunc(body), err)
	}
	var m map[string]any
	if err := json.Unmarshal(resp.Data, &m); err != nil {
		t.Fatalf("response to %s is not JSON: %q: %v", subj, resp.Data, err)
	}
	return resp.Data, m
}

// apiOK sends a request, fails on an error response and checks the type.
func apiOK(t testing.TB, nc *nats.Conn, subj, body, typ string) map[string]any {
	t.Helper()
	raw, m := apiRequest(t, nc, subj, body)
	if m["error"] != nil {
		t.Fatalf("%s %s: error response %s", subj, trunc(body), raw)
	}
	if m["type"] != "io.nats.jetstream.api.v1."+typ {
		t.Fatalf("%s: type %v, want %s: %s", subj, m["type"], typ, raw)
	}
	return m
}

// apiErr sends a request and checks the error object and type of the
// reply. desc "" skips the description check; a desc ending in "*"
// matches a prefix.
func apiErr(t testing.TB, nc *nats.Conn, subj, body, typ string, code, errCode int, desc string) {
	t.Helper()
	raw, m := apiRequest(t, nc, subj, body)
	e, _ := m["error"].(map[string]any)
	if e == nil {
		t.Errorf("%s %s: want error %d/%d %q, got %s", subj, trunc(body), code, errCode, desc, trunc(string(raw)))
		return
	}
	gotDesc, _ := e["description"].(string)
	descOK := desc == "" || gotDesc == desc ||
		(strings.HasSuffix(desc, "*") && strings.HasPrefix(gotDesc, strings.TrimSuffix(desc, "*")))
	if num(e["code"]) != float64(code) || num(e["err_code"]) != float64(errCode) || !descOK {
		t.Errorf("%s %s: error %s, want code %d err_code %d description %q", subj, trunc(body), raw, code, errCode, desc)
	}
	if typ != "" && m["type"] != "io.nats.jetstream.api.v1."+typ {
		t.Errorf("%s: type %v, want %s", subj, m["type"], typ)
	}
	// An error response carries none of the success fields. (nats-server
	// leaves the paging counters of STREAM.INFO and the purged count of
	// STREAM.PURGE in, as zeros; clients ignore them.)
	for k, v := range m {
		switch k {
		case "type", "error":
		case "total", "offset", "limit", "purged":
			if v != float64(0) {
				t.Errorf("%s: error response carries %s %v: %s", subj, k, v, raw)
			}
		default:
			t.Errorf("%s: error response also carries %q: %s", subj, k, raw)
		}
	}
}

func num(v any) float64 {
	f, _ := v.(float64)
	return f
}

// jsonObj returns m[key] as an object (nil when absent).
func jsonObj(m map[string]any, key string) map[string]any {
	o, _ := m[key].(map[string]any)
	return o
}

// ordersConfig is the ORDERS stream on events.orders.> with mod applied.
func ordersConfig(mod func(*jetstream.StreamConfig)) jetstream.StreamConfig {
	cfg := jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"events.orders.>"}}
	if mod != nil {
		mod(&cfg)
	}
	return cfg
}

// userMetadata drops the keys servers reserve (_nats.*) from metadata.
func userMetadata(md map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range md {
		if !strings.HasPrefix(k, "_nats.") {
			out[k] = v
		}
	}
	return out
}

// ---------------------------------------------------------------------------
// create, configuration and defaults

func TestStreamJetStreamAdvertised(t *testing.T) {
	u := startJS(t)
	c := rawConn(t, u)
	if c.info["jetstream"] != true {
		t.Fatalf("INFO lacks jetstream:true with -js: %s", c.infoLine)
	}
	_, js := jsConnect(t, u)
	if _, err := js.AccountInfo(tctx(t)); err != nil {
		t.Fatalf("AccountInfo: %v", err)
	}
}

func TestStreamJetStreamDisabled(t *testing.T) {
	u := startServer(t, nil)
	c := rawConn(t, u)
	if _, ok := c.info["jetstream"]; ok {
		t.Errorf("INFO carries jetstream without -js: %s", c.infoLine)
	}
	_, js := jsConnect(t, u)
	if _, err := js.AccountInfo(tctx(t)); !errors.Is(err, jetstream.ErrJetStreamNotEnabled) {
		t.Fatalf("AccountInfo without -js: %v, want ErrJetStreamNotEnabled", err)
	}
	if _, err := js.CreateStream(tctx(t), ordersConfig(nil)); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("CreateStream without -js: %v, want no responders", err)
	}
}

func TestStreamCreateDefaults(t *testing.T) {
	u := startJS(t)
	nc, js := jsConnect(t, u)

	before := time.Now().Add(-time.Second)
	s := createStream(t, js, ordersConfig(nil))
	info := s.CachedInfo()
	want := jetstream.StreamConfig{
		Name:              "ORDERS",
		Subjects:          []string{"events.orders.>"},
		Retention:         jetstream.LimitsPolicy,
		MaxConsumers:      -1,
		MaxMsgs:           -1,
		MaxBytes:          -1,
		Discard:           jetstream.DiscardOld,
		MaxAge:            0,
		MaxMsgsPerSubject: -1,
		MaxMsgSize:        -1,
		Storage:           jetstream.FileStorage,
		Replicas:          1,
		Duplicates:        2 * time.Minute,
		Compression:       jetstream.NoCompression,
	}
	got := info.Config
	got.Metadata = nil // servers add _nats.* keys; compared below
	if !reflect.DeepEqual(got, want) {
		t.Errorf("created config:\n got %+v\nwant %+v", got, want)
	}
	if len(userMetadata(info.Config.Metadata)) != 0 {
		t.Errorf("metadata has non-reserved keys: %v", info.Config.Metadata)
	}
	if info.Created.Before(before) || info.Created.After(time.Now().Add(time.Second)) {
		t.Errorf("created = %v, want about now", info.Created)
	}
	wantState(t, info.State, 0, 0, 0)
	if !info.State.FirstTime.IsZero() || !info.State.LastTime.IsZero() || info.State.Consumers != 0 {
		t.Errorf("new stream state: %+v", info.State)
	}

	// The raw response: every key nats-server always writes.
	_, m := apiRequest(t, nc, "$JS.API.STREAM.INFO.ORDERS", "")
	if m["type"] != "io.nats.jetstream.api.v1.stream_info_response" {
		t.Errorf("info type %v", m["type"])
	}
	for _, k := range []string{"total", "offset", "limit"} {
		if v, ok := m[k]; !ok || v != float64(0) {
			t.Errorf("info response %s = %v, want 0", k, v)
		}
	}
	cfg := jsonObj(m, "config")
	for _, k := range []string{"name", "subjects", "retention", "max_consumers", "max_msgs", "max_bytes", "max_age",
		"max_msgs_per_subject", "max_msg_size", "discard", "storage", "num_replicas", "duplicate_window",
		"compression", "allow_direct", "mirror_direct", "sealed", "deny_delete", "deny_purge",
		"allow_rollup_hdrs", "consumer_limits", "allow_msg_ttl"} {
		if _, ok := cfg[k]; !ok {
			t.Errorf("config lacks %q: %v", k, cfg)
		}
	}
	for _, k := range []string{"description", "discard_new_per_subject", "no_ack", "placement", "mirror", "sources",
		"first_seq", "subject_transform", "republish"} {
		if _, ok := cfg[k]; ok {
			t.Errorf("config carries %q although it was not set: %v", k, cfg)
		}
	}
	st := jsonObj(m, "state")
	for _, k := range []string{"messages", "bytes", "first_seq", "first_ts", "last_seq", "last_ts", "consumer_count"} {
		if _, ok := st[k]; !ok {
			t.Errorf("state lacks %q: %v", k, st)
		}
	}
	for _, k := range []string{"num_subjects", "subjects", "num_deleted", "deleted"} {
		if _, ok := st[k]; ok {
			t.Errorf("empty stream's state carries %q: %v", k, st)
		}
	}
	for _, k := range []string{"created", "ts"} {
		if _, ok := m[k]; !ok {
			t.Errorf("info lacks %q", k)
		}
	}

	// Creating the same stream again with an identical config succeeds.
	if _, err := js.CreateStream(tctx(t), ordersConfig(nil)); err != nil {
		t.Fatalf("identical re-create: %v", err)
	}
	// With a different config it is refused with 10058.
	_, err := js.CreateStream(tctx(t), ordersConfig(func(c *jetstream.StreamConfig) { c.MaxMsgs = 5 }))
	if !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		t.Fatalf("re-create with another config: %v, want ErrStreamNameAlreadyInUse", err)
	}
	apiErr(t, nc, "$JS.API.STREAM.CREATE.ORDERS", `{"name":"ORDERS","subjects":["events.orders.>"],"max_msgs":5}`,
		"stream_create_response", 400, 10058, "stream name already in use with a different configuration")
	// CreateOrUpdateStream updates it instead.
	s2, err := js.CreateOrUpdateStream(tctx(t), ordersConfig(func(c *jetstream.StreamConfig) { c.MaxMsgs = 5 }))
	if err != nil || s2.CachedInfo().Config.MaxMsgs != 5 {
		t.Fatalf("CreateOrUpdateStream: %v", err)
	}

	// raw create answers did_create:true; subjects default to the name.
	m = apiOK(t, nc, "$JS.API.STREAM.CREATE.NOSUBJ", `{"name":"NOSUBJ"}`, "stream_create_response")
	if m["did_create"] != true {
		t.Errorf("create response did_create = %v", m["did_create"])
	}
	if subs, _ := jsonObj(m, "config")["subjects"].([]any); len(subs) != 1 || subs[0] != "NOSUBJ" {
		t.Errorf("subjects of a stream created without any: %v, want [NOSUBJ]", jsonObj(m, "config")["subjects"])
	}
	ack := jsPublish(t, js, "NOSUBJ", "x")
	wantAck(t, ack, "NOSUBJ", 1, false)
}

func TestStreamCreateConfigs(t *testing.T) {
	u := startJS(t)
	_, js := jsConnect(t, u)

	cases := []jetstream.StreamConfig{
		{Name: "LIMITS_FILE", Subjects: []string{"cfg.limits.>"}, Retention: jetstream.LimitsPolicy, Storage: jetstream.FileStorage},
		{Name: "INTEREST_MEM", Subjects: []string{"cfg.interest.>"}, Retention: jetstream.InterestPolicy, Storage: jetstream.MemoryStorage},
		{Name: "WQ_FILE", Subjects: []string{"cfg.wq.*"}, Retention: jetstream.WorkQueuePolicy},
		{Name: "WQ_MEM", Subjects: []string{"cfg.wqm"}, Retention: jetstream.WorkQueuePolicy, Storage: jetstream.MemoryStorage},
		{
			Name: "ALL_LIMITS", Subjects: []string{"cfg.all.>", "cfg.other"},
			Description:       "every limit set",
			MaxMsgs:           1000,
			MaxBytes:          1 << 20,
			MaxAge:            time.Hour,
			MaxMsgSize:        4096,
			MaxMsgsPerSubject: 10,
			MaxConsumers:      7,
			Discard:           jetstream.DiscardNew,
			Duplicates:        30 * time.Second,
			AllowRollup:       true,
			DenyDelete:        true,
			Metadata:          map[string]string{"owner": "team-a", "tier": "gold"},
			Storage:           jetstream.MemoryStorage,
		},
		{
			Name: "DISCARD_NEW_PER_SUBJECT", Subjects: []string{"cfg.dnps.>"},
			Discard: jetstream.DiscardNew, MaxMsgsPerSubject: 1, DiscardNewPerSubject: true,
		},
		{Name: "DENY_PURGE", Subjects: []string{"cfg.dp"}, DenyPurge: true, DenyDelete: true},
		// duplicate_window defaults to max_age when that is shorter.
		{Name: "SHORT_AGE", Subjects: []string{"cfg.age"}, MaxAge: 30 * time.Second},
		{Name: "S2", Subjects: []string{"cfg.s2"}, Compression: jetstream.S2Compression},
		{Name: "FIRST_SEQ", Subjects: []string{"cfg.fs"}, FirstSeq: 100},
	}
	for _, in := range cases {
		t.Run(in.Name, func(t *testing.T) {
			s := createStream(t, js, in)
			want := in
			if want.MaxConsumers == 0 {
				want.MaxConsumers = -1
			}
			if want.MaxMsgs == 0 {
				want.MaxMsgs = -1
			}
			if want.MaxBytes == 0 {
				want.MaxBytes = -1
			}
			if want.MaxMsgsPerSubject == 0 {
				want.MaxMsgsPerSubject = -1
			}
			if want.MaxMsgSize == 0 {
				want.MaxMsgSize = -1
			}
			if want.Duplicates == 0 {
				want.Duplicates = 2 * time.Minute
				if want.MaxAge != 0 && want.MaxAge < want.Duplicates {
					want.Duplicates = want.MaxAge
				}
			}
			want.Replicas = 1
			wantMD := userMetadata(want.Metadata)
			want.Metadata = nil
			for _, info := range []*jetstream.StreamInfo{s.CachedInfo(), streamInfo(t, s)} {
				got := info.Config
				if !reflect.DeepEqual(userMetadata(got.Metadata), wantMD) {
					t.Errorf("metadata %v, want %v", got.Metadata, wantMD)
				}
				got.Metadata = nil
				if !reflect.DeepEqual(got, want) {
					t.Errorf("config:\n got %+v\nwant %+v", got, want)
				}
			}
			// Each stream takes messages on its subjects.
			subj := strings.TrimSuffix(strings.TrimSuffix(in.Subjects[0], ".>"), ".*")
			if subj != in.Subjects[0] {
				subj += ".x"
			}
			ack := jsPublish(t, js, subj, "hello")
			wantSeq := uint64(1)
			if in.FirstSeq != 0 {
				wantSeq = in.FirstSeq
			}
			wantAck(t, ack, in.Name, wantSeq, false)
		})
	}
}

func TestStreamFirstSeq(t *testing.T) {
	u := startJS(t)
	_, js := jsConnect(t, u)
	s := createStream(t, js, ordersConfig(func(c *jetstream.StreamConfig) { c.FirstSeq = 100 }))
	wantState(t, s.CachedInfo().State, 0, 100, 99)
	wantAck(t, jsPublish(t, js, "events.orders.1", "a"), "ORDERS", 100, false)
	wantAck(t, jsPublish(t, js, "events.orders.1", "b"), "ORDERS", 101, false)
	wantState(t, streamInfo(t, s).State, 2, 100, 101)
}

// Stream configurations the server refuses, with nats-server's errors.
func TestStreamCreateInvalid(t *testing.T) {
	u := startJS(t)
	nc, js := jsConnect(t, u)
	createStream(t, js, ordersConfig(nil))

	long := strings.Repeat("A", 256)
	cases := []struct {
		name, subj, body string
		code, errCode    int
		desc             string
	}{
		{"malformed JSON", "$JS.API.STREAM.CREATE.BAD", `{"name":"BAD",`, 400, 10025, "invalid JSON: unexpected EOF"},
		{"not JSON", "$JS.API.STREAM.CREATE.BAD", `name=BAD`, 400, 10025, "invalid JSON*"},
		{"wrong type", "$JS.API.STREAM.CREATE.BAD", `{"name":"BAD","max_msgs":"ten"}`, 400, 10025, "invalid JSON*"},
		{"unknown retention", "$JS.API.STREAM.CREATE.BAD", `{"name":"BAD","retention":"bogus"}`, 400, 10025, "invalid JSON*"},
		{"unknown storage", "$JS.API.STREAM.CREATE.BAD", `{"name":"BAD","storage":"tape"}`, 400, 10025, "invalid JSON*"},
		{"unknown discard", "$JS.API.STREAM.CREATE.BAD", `{"name":"BAD","discard":"sometimes"}`, 400, 10025, "invalid JSON*"},
		{"name mismatch", "$JS.API.STREAM.CREATE.BAD", `{"name":"OTHER"}`, 400, 10056, "stream name in subject does not match request"},
		{"name missing", "$JS.API.STREAM.CREATE.BAD", `{}`, 400, 10056, "stream name in subject does not match request"},
		{"name too long", "$JS.API.STREAM.CREATE." + long, `{"name":"` + long + `"}`, 500, 10052, "stream name is too long, maximum allowed is 255"},
		{"path separator", "$JS.API.STREAM.CREATE.a/b", `{"name":"a/b"}`, 400, 10128, "Stream name can not contain path separators"},
		{"backslash", `$JS.API.STREAM.CREATE.a\b`, `{"name":"a\\b"}`, 400, 10128, "Stream name can not contain path separators"},
		{"name with *", "$JS.API.STREAM.CREATE.a*b", `{"name":"a*b"}`, 500, 10052, `stream name is required and can not contain '.', '*', '>', '\', '/'`},
		{"name with >", "$JS.API.STREAM.CREATE.a>b", `{"name":"a>b"}`, 500, 10052, `stream name is required and can not contain '.', '*', '>', '\', '/'`},
		{"self-overlapping subjects", "$JS.API.STREAM.CREATE.BAD", `{"name":"BAD","subjects":["x.>","x.y"]}`, 500, 10052, `subject "x.>" overlaps with "x.y"`},
		{"duplicate subjects", "$JS.API.STREAM.CREATE.BAD", `{"name":"BAD","subjects":["x.y","x.y"]}`, 500, 10052, `subject "x.y" overlaps with "x.y"`},
		{"all subjects", "$JS.API.STREAM.CREATE.BAD", `{"name":"BAD","subjects":[">"]}`, 500, 10052, "capturing all subjects requires no-ack to be true"},
		{"replicas negative", "$JS.API.STREAM.CREATE.BAD", `{"name":"BAD","num_replicas":-1}`, 400, 10133, "replicas count cannot be negative"},
		{"replicas 6", "$JS.API.STREAM.CREATE.BAD", `{"name":"BAD","num_replicas":6}`, 500, 10052, "maximum replicas is 5"},
		{"invalid subject", "$JS.API.STREAM.CREATE.BAD", `{"name":"BAD","subjects":["a..b"]}`, 500, 10052, "invalid subject"},
		{"overlapping stream", "$JS.API.STREAM.CREATE.BAD", `{"name":"BAD","subjects":["events.orders.new"]}`, 400, 10065, "subjects overlap with an existing stream"},
		{"overlapping stream wildcard", "$JS.API.STREAM.CREATE.BAD", `{"name":"BAD","subjects":["events.*.x"]}`, 400, 10065, "subjects overlap with an existing stream"},
		{"replicas 3", "$JS.API.STREAM.CREATE.BAD", `{"name":"BAD","num_replicas":3}`, 500, 10074, "replicas > 1 not supported in non-clustered mode"},
		{"max_age too small", "$JS.API.STREAM.CREATE.BAD", `{"name":"BAD","max_age":50000000}`, 500, 10052, "max age needs to be >= 100ms"},
		{"dup window > max_age", "$JS.API.STREAM.CREATE.BAD", `{"name":"BAD","max_age":1000000000,"duplicate_window":2000000000}`, 500, 10052, "duplicates window can not be larger then max age"},
		{"rollup and deny_purge", "$JS.API.STREAM.CREATE.BAD", `{"name":"BAD","deny_purge":true,"allow_rollup_hdrs":true}`, 500, 10052, "roll-ups require the purge permission"},
		{"discard_new_per_subject without discard new", "$JS.API.STREAM.CREATE.BAD", `{"name":"BAD","discard_new_per_subject":true,"max_msgs_per_subject":1}`, 500, 10052, "discard new per subject requires discard new policy to be set"},
		{"sealed on create", "$JS.API.STREAM.CREATE.BAD", `{"name":"BAD","sealed":true}`, 500, 10052, "stream configuration for create can not be sealed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			apiErr(t, nc, c.subj, c.body, "stream_create_response", c.code, c.errCode, c.desc)
		})
	}

	// The same refusals reach nats.go as APIErrors.
	_, err := js.CreateStream(tctx(t), jetstream.StreamConfig{Name: "R3", Replicas: 3})
	wantAPIError(t, err, 500, 10074, "replicas > 1 not supported in non-clustered mode")
	_, err = js.CreateStream(tctx(t), jetstream.StreamConfig{Name: "OVERLAP", Subjects: []string{"events.>"}})
	wantAPIError(t, err, 400, 10065, "subjects overlap with an existing stream")

	// Nothing was created along the way.
	names := streamNames(t, js)
	if !reflect.DeepEqual(names, []string{"ORDERS"}) {
		t.Fatalf("streams after refused creates: %v, want [ORDERS]", names)
	}
}

// Unknown keys in a StreamConfig are tolerated by cairn (issue 4); nats-server
// decodes strictly and answers 10025 (docs/compatibility.md).
func TestStreamCreateUnknownKeysTolerated(t *testing.T) {
	u := startJS(t)
	nc, _ := jsConnect(t, u)
	body := `{"name":"FUTURE","subjects":["future.>"],"some_future_field":{"a":1}}`
	if targetIsNatsServer() {
		// Deliberate difference: nats-server rejects unknown fields.
		apiErr(t, nc, "$JS.API.STREAM.CREATE.FUTURE", body, "stream_create_response", 400, 10025, `invalid JSON: json: unknown field "some_future_field"`)
		return
	}
	m := apiOK(t, nc, "$JS.API.STREAM.CREATE.FUTURE", body, "stream_create_response")
	if _, ok := jsonObj(m, "config")["some_future_field"]; ok {
		t.Errorf("unknown key echoed back in config: %v", m["config"])
	}
}

// ---------------------------------------------------------------------------
// names, list, info

func streamNames(t testing.TB, js jetstream.JetStream, opts ...jetstream.StreamListOpt) []string {
	t.Helper()
	l := js.StreamNames(tctx(t), opts...)
	var out []string
	for n := range l.Name() {
		out = append(out, n)
	}
	if err := l.Err(); err != nil {
		t.Fatalf("StreamNames: %v", err)
	}
	return out
}

func TestStreamListAndNames(t *testing.T) {
	u := startJS(t)
	nc, js := jsConnect(t, u)

	// No streams yet: empty, not an error.
	if names := streamNames(t, js); len(names) != 0 {
		t.Fatalf("names with no streams: %v", names)
	}
	m := apiOK(t, nc, "$JS.API.STREAM.NAMES", "", "stream_names_response")
	if num(m["total"]) != 0 || num(m["limit"]) != 1024 {
		t.Fatalf("empty names response: %v", m)
	}
	if s, _ := m["streams"].([]any); len(s) != 0 {
		t.Fatalf("empty names response lists %v", s)
	}

	// More streams than one LIST page (256), created in shuffled order.
	const n = 300
	want := make([]string, 0, n)
	for i := range n {
		j := (i * 7) % n // a permutation of 0..n-1
		name := fmt.Sprintf("S%03d", j)
		want = append(want, name)
		cfg := jetstream.StreamConfig{Name: name, Subjects: []string{fmt.Sprintf("list.%03d.*", j)}, Storage: jetstream.MemoryStorage}
		if j%2 == 0 {
			cfg.Description = "even"
		}
		createStream(t, js, cfg)
	}
	sort.Strings(want)

	names := streamNames(t, js)
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("StreamNames: %d names, want %d sorted (first %v)", len(names), len(want), names[:min(5, len(names))])
	}

	// ListStreams pages through LIST (256 per page).
	l := js.ListStreams(tctx(t))
	var listed []string
	for info := range l.Info() {
		listed = append(listed, info.Config.Name)
		idx, _ := strconv.Atoi(info.Config.Name[1:])
		if (idx%2 == 0) != (info.Config.Description == "even") {
			t.Errorf("stream %s listed with description %q", info.Config.Name, info.Config.Description)
		}
		if info.Config.Storage != jetstream.MemoryStorage || info.State.Msgs != 0 {
			t.Errorf("listed %s: %+v", info.Config.Name, info)
		}
	}
	if err := l.Err(); err != nil {
		t.Fatalf("ListStreams: %v", err)
	}
	if !reflect.DeepEqual(listed, want) {
		t.Fatalf("ListStreams returned %d streams, want the %d names in order", len(listed), len(want))
	}

	// Raw paging: total, offset and limit as nats-server writes them.
	m = apiOK(t, nc, "$JS.API.STREAM.LIST", "", "stream_list_response")
	if num(m["total"]) != n || num(m["offset"]) != 0 || num(m["limit"]) != 256 {
		t.Errorf("LIST page 1: total %v offset %v limit %v", m["total"], m["offset"], m["limit"])
	}
	if s, _ := m["streams"].([]any); len(s) != 256 {
		t.Errorf("LIST page 1 has %d streams, want 256", len(s))
	}
	m = apiOK(t, nc, "$JS.API.STREAM.LIST", `{"offset":256}`, "stream_list_response")
	if s, _ := m["streams"].([]any); len(s) != n-256 || num(m["offset"]) != 256 || num(m["total"]) != n {
		t.Errorf("LIST page 2: %d streams, offset %v total %v", len(s), m["offset"], m["total"])
	} else if first := jsonObj(s[0].(map[string]any), "config")["name"]; first != want[256] {
		t.Errorf("LIST page 2 starts at %v, want %s", first, want[256])
	}
	m = apiOK(t, nc, "$JS.API.STREAM.NAMES", `{"offset":290}`, "stream_names_response")
	if s, _ := m["streams"].([]any); len(s) != 10 || s[0] != "S290" || num(m["total"]) != n || num(m["offset"]) != 290 || num(m["limit"]) != 1024 {
		t.Errorf("NAMES offset 290: %v", m)
	}

	// The subject filter selects the streams whose subjects collide with it.
	if got := streamNames(t, js, jetstream.WithStreamListSubject("list.042.x")); !reflect.DeepEqual(got, []string{"S042"}) {
		t.Errorf("names for list.042.x: %v, want [S042]", got)
	}
	if got := streamNames(t, js, jetstream.WithStreamListSubject("list.00*.x")); len(got) != 0 {
		// "00*" is a literal token, not a wildcard.
		t.Errorf("names for list.00*.x: %v, want none", got)
	}
	if got := streamNames(t, js, jetstream.WithStreamListSubject("list.*.y")); len(got) != n {
		t.Errorf("names for list.*.y: %d, want %d", len(got), n)
	}
	if got := streamNames(t, js, jetstream.WithStreamListSubject("nothing.here")); len(got) != 0 {
		t.Errorf("names for nothing.here: %v", got)
	}
	name, err := js.StreamNameBySubject(tctx(t), "list.123.z")
	if err != nil || name != "S123" {
		t.Errorf("StreamNameBySubject(list.123.z) = %q, %v", name, err)
	}
	if _, err := js.StreamNameBySubject(tctx(t), "nothing.here"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("StreamNameBySubject(nothing.here): %v, want ErrStreamNotFound", err)
	}
}

func TestStreamInfoDetails(t *testing.T) {
	u := startJS(t)
	nc, js := jsConnect(t, u)
	s := createStream(t, js, ordersConfig(nil))

	// 1..9 over three subjects: a gets 4, b 3, c.deep 2.
	subjects := []string{"a", "b", "a", "c.deep", "a", "b", "c.deep", "a", "b"}
	for i, sub := range subjects {
		wantAck(t, jsPublish(t, js, "events.orders."+sub, fmt.Sprintf("m%d", i+1)), "ORDERS", uint64(i+1), false)
	}
	info := streamInfo(t, s)
	wantState(t, info.State, 9, 1, 9)
	if info.State.NumSubjects != 3 || info.State.Subjects != nil || info.State.NumDeleted != 0 || info.State.Deleted != nil {
		t.Fatalf("state without details: %+v", info.State)
	}
	if info.State.Bytes == 0 || info.State.FirstTime.IsZero() || info.State.LastTime.Before(info.State.FirstTime) {
		t.Fatalf("state bytes/times: %+v", info.State)
	}

	info = streamInfo(t, s, jetstream.WithSubjectFilter(">"))
	if want := map[string]uint64{"events.orders.a": 4, "events.orders.b": 3, "events.orders.c.deep": 2}; !reflect.DeepEqual(info.State.Subjects, want) {
		t.Errorf("subjects for >: %v, want %v", info.State.Subjects, want)
	}
	info = streamInfo(t, s, jetstream.WithSubjectFilter("events.orders.*"))
	if want := map[string]uint64{"events.orders.a": 4, "events.orders.b": 3}; !reflect.DeepEqual(info.State.Subjects, want) {
		t.Errorf("subjects for events.orders.*: %v, want %v", info.State.Subjects, want)
	}
	info = streamInfo(t, s, jetstream.WithSubjectFilter("events.orders.b"))
	if want := map[string]uint64{"events.orders.b": 3}; !reflect.DeepEqual(info.State.Subjects, want) {
		t.Errorf("subjects for events.orders.b: %v, want %v", info.State.Subjects, want)
	}
	info = streamInfo(t, s, jetstream.WithSubjectFilter("events.orders.zzz"))
	if len(info.State.Subjects) != 0 {
		t.Errorf("subjects for an unused subject: %v", info.State.Subjects)
	}
	// Raw: the filter's total, offset and limit.
	m := apiOK(t, nc, "$JS.API.STREAM.INFO.ORDERS", `{"subjects_filter":"events.orders.*"}`, "stream_info_response")
	if num(m["total"]) != 2 || num(m["offset"]) != 0 || num(m["limit"]) != 100000 {
		t.Errorf("info with filter: total %v offset %v limit %v", m["total"], m["offset"], m["limit"])
	}

	// Deleted details: interior gaps only.
	for _, seq := range []uint64{3, 5, 6} {
		if err := s.DeleteMsg(tctx(t), seq); err != nil {
			t.Fatalf("DeleteMsg %d: %v", seq, err)
		}
	}
	info = streamInfo(t, s)
	if info.State.NumDeleted != 3 || info.State.Deleted != nil {
		t.Errorf("after deletes, without details: num_deleted %d deleted %v", info.State.NumDeleted, info.State.Deleted)
	}
	info = streamInfo(t, s, jetstream.WithDeletedDetails(true))
	wantState(t, info.State, 6, 1, 9)
	if !reflect.DeepEqual(info.State.Deleted, []uint64{3, 5, 6}) || info.State.NumDeleted != 3 {
		t.Errorf("deleted details: %v (num %d), want [3 5 6]", info.State.Deleted, info.State.NumDeleted)
	}
	// Deleting the first message moves first_seq; it is not an interior gap.
	if err := s.DeleteMsg(tctx(t), 1); err != nil {
		t.Fatal(err)
	}
	info = streamInfo(t, s, jetstream.WithDeletedDetails(true))
	wantState(t, info.State, 5, 2, 9)
	if !reflect.DeepEqual(info.State.Deleted, []uint64{3, 5, 6}) {
		t.Errorf("deleted details after deleting seq 1: %v, want [3 5 6]", info.State.Deleted)
	}
	info = streamInfo(t, s, jetstream.WithSubjectFilter(">"))
	// left: a 8, b 2 9, c.deep 4 7
	if want := map[string]uint64{"events.orders.a": 1, "events.orders.b": 2, "events.orders.c.deep": 2}; !reflect.DeepEqual(info.State.Subjects, want) {
		t.Errorf("subjects after deletes: %v, want %v", info.State.Subjects, want)
	}

	// Unknown streams.
	if _, err := js.Stream(tctx(t), "NOPE"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("Stream(NOPE): %v", err)
	}
	apiErr(t, nc, "$JS.API.STREAM.INFO.NOPE", "", "stream_info_response", 404, 10059, "stream not found")
	apiErr(t, nc, "$JS.API.STREAM.INFO.ORDERS", `{"subjects_filter":`, "stream_info_response", 400, 10025, "invalid JSON*")
}

// ---------------------------------------------------------------------------
// update and delete

func TestStreamUpdate(t *testing.T) {
	u := startJS(t)
	nc, js := jsConnect(t, u)
	createStream(t, js, jetstream.StreamConfig{Name: "OTHER", Subjects: []string{"other.>"}})
	base := ordersConfig(func(c *jetstream.StreamConfig) { c.MaxMsgs = 10 })
	s := createStream(t, js, base)
	for i := range 6 {
		jsPublish(t, js, "events.orders.x", strconv.Itoa(i+1))
	}

	// What may change.
	upd := base
	upd.Description = "updated"
	upd.MaxMsgs = 4 // shrinking trims at once
	upd.MaxAge = time.Hour
	upd.Duplicates = time.Minute
	upd.MaxMsgSize = 2048
	upd.MaxMsgsPerSubject = 100
	upd.Subjects = []string{"events.orders.>", "events.returns.*"}
	upd.Metadata = map[string]string{"k": "v"}
	upd.AllowRollup = true
	us, err := js.UpdateStream(tctx(t), upd)
	if err != nil {
		t.Fatalf("UpdateStream: %v", err)
	}
	got := us.CachedInfo().Config
	if got.Description != "updated" || got.MaxMsgs != 4 || got.MaxAge != time.Hour || got.Duplicates != time.Minute ||
		got.MaxMsgSize != 2048 || got.MaxMsgsPerSubject != 100 || !reflect.DeepEqual(got.Subjects, upd.Subjects) ||
		!reflect.DeepEqual(userMetadata(got.Metadata), upd.Metadata) || !got.AllowRollup || got.Retention != jetstream.LimitsPolicy {
		t.Fatalf("updated config: %+v", got)
	}
	wantState(t, us.CachedInfo().State, 4, 3, 6)
	wantState(t, streamInfo(t, s).State, 4, 3, 6)
	// The new subject is captured.
	wantAck(t, jsPublish(t, js, "events.returns.r1", "ret"), "ORDERS", 7, false)
	wantState(t, streamInfo(t, s).State, 4, 4, 7)
	// Removing a subject stops capture.
	upd.Subjects = []string{"events.orders.>"}
	if _, err := js.UpdateStream(tctx(t), upd); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(tctx(t), "events.returns.r2", []byte("x"), jetstream.WithRetryAttempts(0)); !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Fatalf("publish to a removed subject: %v, want ErrNoStreamResponse", err)
	}

	// What may not change, with nats-server's errors.
	type refusal struct {
		name          string
		mod           func(*jetstream.StreamConfig)
		code, errCode int
		desc          string
	}
	for _, r := range []refusal{
		{"storage", func(c *jetstream.StreamConfig) { c.Storage = jetstream.MemoryStorage }, 500, 10052, "stream configuration update can not change storage type"},
		{"to workqueue", func(c *jetstream.StreamConfig) { c.Retention = jetstream.WorkQueuePolicy }, 500, 10052, "stream configuration update can not change retention policy to/from workqueue"},
		{"replicas", func(c *jetstream.StreamConfig) { c.Replicas = 3 }, 500, 10074, "replicas > 1 not supported in non-clustered mode"},
		{"overlap", func(c *jetstream.StreamConfig) { c.Subjects = []string{"events.orders.>", "other.x"} }, 400, 10065, "subjects overlap with an existing stream"},
		{"invalid", func(c *jetstream.StreamConfig) { c.MaxAge = time.Millisecond }, 500, 10052, "max age needs to be >= 100ms"},
	} {
		t.Run(r.name, func(t *testing.T) {
			c := upd
			r.mod(&c)
			_, err := js.UpdateStream(tctx(t), c)
			wantAPIError(t, err, r.code, uint16(r.errCode), r.desc)
		})
	}
	if _, err := js.UpdateStream(tctx(t), jetstream.StreamConfig{Name: "NOPE", Subjects: []string{"nope"}}); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("update of an unknown stream: %v, want ErrStreamNotFound", err)
	}
	apiErr(t, nc, "$JS.API.STREAM.UPDATE.NOPE", `{"name":"NOPE"}`, "stream_update_response", 404, 10059, "stream not found")
	apiErr(t, nc, "$JS.API.STREAM.UPDATE.ORDERS", `{"name":"OTHER","subjects":["other.>"]}`, "stream_update_response", 400, 10056, "stream name in subject does not match request")
	apiErr(t, nc, "$JS.API.STREAM.UPDATE.ORDERS", `{"name":`, "stream_update_response", 400, 10025, "invalid JSON*")

	// The refused updates left the stream alone.
	info := streamInfo(t, s)
	if info.Config.Storage != jetstream.FileStorage || info.Config.Retention != jetstream.LimitsPolicy || info.Config.Replicas != 1 {
		t.Fatalf("config after refused updates: %+v", info.Config)
	}
	wantState(t, info.State, 4, 4, 7)

	// limits -> interest is allowed; with no consumers nothing is of
	// interest, so the stored messages go.
	upd.Retention = jetstream.InterestPolicy
	if us, err = js.UpdateStream(tctx(t), upd); err != nil {
		t.Fatalf("UpdateStream to interest: %v", err)
	}
	if us.CachedInfo().Config.Retention != jetstream.InterestPolicy {
		t.Fatalf("retention after update: %v", us.CachedInfo().Config.Retention)
	}
	waitFor(t, 3*time.Second, "interest stream without consumers to drop its messages", func() bool { return streamInfo(t, s).State.Msgs == 0 })
	wantState(t, streamInfo(t, s).State, 0, 8, 7)
	upd.Retention = jetstream.LimitsPolicy
	if _, err := js.UpdateStream(tctx(t), upd); err != nil {
		t.Fatalf("UpdateStream back to limits: %v", err)
	}
	wantAck(t, jsPublish(t, js, "events.orders.x", "kept"), "ORDERS", 8, false)
	wantState(t, streamInfo(t, s).State, 1, 8, 8)
}

func TestStreamUpdateFlags(t *testing.T) {
	u := startJS(t)
	_, js := jsConnect(t, u)
	base := ordersConfig(func(c *jetstream.StreamConfig) {
		c.DenyDelete = true
		c.DenyPurge = true
		c.Retention = jetstream.WorkQueuePolicy
	})
	createStream(t, js, base)
	jsPublish(t, js, "events.orders.1", "one")

	for _, r := range []struct {
		name string
		mod  func(*jetstream.StreamConfig)
		desc string
	}{
		{"deny_delete off", func(c *jetstream.StreamConfig) { c.DenyDelete = false }, "stream configuration update can not cancel deny message deletes"},
		{"deny_purge off", func(c *jetstream.StreamConfig) { c.DenyPurge = false }, "stream configuration update can not cancel deny purge"},
		{"from workqueue", func(c *jetstream.StreamConfig) { c.Retention = jetstream.LimitsPolicy }, "stream configuration update can not change retention policy to/from workqueue"},
	} {
		c := base
		r.mod(&c)
		_, err := js.UpdateStream(tctx(t), c)
		wantAPIError(t, err, 500, 10052, r.desc)
	}

	// Sealing is update-only and one-way; it rewrites the limits.
	sealed := base
	sealed.Sealed = true
	sealed.MaxAge = time.Hour
	sealed.Duplicates = time.Minute
	s, err := js.UpdateStream(tctx(t), sealed)
	if err != nil {
		t.Fatalf("seal: %v", err)
	}
	cfg := s.CachedInfo().Config
	if !cfg.Sealed || !cfg.DenyDelete || !cfg.DenyPurge || cfg.Discard != jetstream.DiscardNew || cfg.AllowRollup {
		t.Errorf("sealed config: %+v", cfg)
	}
	_, err = js.Publish(tctx(t), "events.orders.1", []byte("two"))
	wantAPIError(t, err, 400, 10109, "invalid operation on sealed stream")
	wantDeleteError(t, s.DeleteMsg(tctx(t), 1), 400, 10109, "invalid operation on sealed stream")
	wantAPIError(t, s.Purge(tctx(t)), 400, 10109, "invalid operation on sealed stream")
	wantState(t, streamInfo(t, s).State, 1, 1, 1)
	if m, err := s.GetMsg(tctx(t), 1); err != nil || string(m.Data) != "one" {
		t.Errorf("get from a sealed stream: %v", err)
	}
	unseal := cfg
	unseal.Sealed = false
	_, err = js.UpdateStream(tctx(t), unseal)
	wantAPIError(t, err, 500, 10052, "stream configuration update can not unseal a sealed stream")
}

func TestStreamDelete(t *testing.T) {
	u := startJS(t)
	nc, js := jsConnect(t, u)
	createStream(t, js, ordersConfig(nil))
	createStream(t, js, jetstream.StreamConfig{Name: "KEEP", Subjects: []string{"keep"}})
	jsPublish(t, js, "events.orders.1", "x")

	apiErr(t, nc, "$JS.API.STREAM.DELETE.ORDERS", `{"x":1}`, "stream_delete_response", 400, 10038, "expected an empty request payload")
	// An empty JSON object counts as an empty payload.
	apiOK(t, nc, "$JS.API.STREAM.DELETE.KEEP", `{}`, "stream_delete_response")
	createStream(t, js, jetstream.StreamConfig{Name: "KEEP", Subjects: []string{"keep"}})
	if err := js.DeleteStream(tctx(t), "ORDERS"); err != nil {
		t.Fatalf("DeleteStream: %v", err)
	}
	if _, err := js.Stream(tctx(t), "ORDERS"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("info after delete: %v", err)
	}
	if err := js.DeleteStream(tctx(t), "ORDERS"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	apiErr(t, nc, "$JS.API.STREAM.DELETE.ORDERS", "", "stream_delete_response", 404, 10059, "stream not found")
	if got := streamNames(t, js); !reflect.DeepEqual(got, []string{"KEEP"}) {
		t.Fatalf("names after delete: %v", got)
	}
	// Its subjects are free: no stream answers, and a new stream may take them.
	if _, err := js.Publish(tctx(t), "events.orders.1", []byte("x"), jetstream.WithRetryAttempts(0)); !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Fatalf("publish after delete: %v", err)
	}
	s := createStream(t, js, ordersConfig(nil))
	wantState(t, s.CachedInfo().State, 0, 0, 0)
	wantAck(t, jsPublish(t, js, "events.orders.1", "again"), "ORDERS", 1, false)

	m := apiOK(t, nc, "$JS.API.STREAM.DELETE.KEEP", "", "stream_delete_response")
	if m["success"] != true {
		t.Fatalf("delete response: %v", m)
	}
}

// ---------------------------------------------------------------------------
// purge

// fillAB publishes events.orders.a and .b alternately: seqs 1..n, odd on a.
func fillAB(t testing.TB, js jetstream.JetStream, n int) {
	t.Helper()
	for i := 1; i <= n; i++ {
		sub := "events.orders.a"
		if i%2 == 0 {
			sub = "events.orders.b"
		}
		wantAck(t, jsPublish(t, js, sub, strconv.Itoa(i)), "ORDERS", uint64(i), false)
	}
}

func TestStreamPurge(t *testing.T) {
	u := startJS(t)
	nc, js := jsConnect(t, u)
	s := createStream(t, js, ordersConfig(nil))
	// ORDERS is deleted and re-created below; another stream stays, since
	// nats-server removes the account's stream directory along with its
	// last stream and a create racing with that can fail.
	createStream(t, js, jetstream.StreamConfig{Name: "SENTINEL", Subjects: []string{"sentinel"}})

	purge := func(body string, want uint64) {
		t.Helper()
		m := apiOK(t, nc, "$JS.API.STREAM.PURGE.ORDERS", body, "stream_purge_response")
		if m["success"] != true || num(m["purged"]) != float64(want) {
			t.Fatalf("purge %s: %v, want purged %d", body, m, want)
		}
	}
	subjects := func() map[string]uint64 {
		t.Helper()
		return streamInfo(t, s, jetstream.WithSubjectFilter(">")).State.Subjects
	}

	// All.
	fillAB(t, js, 10)
	if err := s.Purge(tctx(t)); err != nil {
		t.Fatal(err)
	}
	info := streamInfo(t, s)
	wantState(t, info.State, 0, 11, 10)
	if info.State.NumSubjects != 0 {
		t.Errorf("num_subjects after purge: %d", info.State.NumSubjects)
	}
	// Below the first sequence, a message delete answers "no message found".
	wantDeleteError(t, s.DeleteMsg(tctx(t), 5), 500, 10057, "no message found")
	// Sequences continue after a purge.
	wantAck(t, jsPublish(t, js, "events.orders.a", "11"), "ORDERS", 11, false)
	purge("", 1)
	purge("{}", 0)

	// By subject.
	if err := js.DeleteStream(tctx(t), "ORDERS"); err != nil {
		t.Fatal(err)
	}
	s = createStream(t, js, ordersConfig(nil))
	fillAB(t, js, 10)
	if err := s.Purge(tctx(t), jetstream.WithPurgeSubject("events.orders.a")); err != nil {
		t.Fatal(err)
	}
	wantState(t, streamInfo(t, s).State, 5, 2, 10)
	if got := subjects(); !reflect.DeepEqual(got, map[string]uint64{"events.orders.b": 5}) {
		t.Errorf("after purging a: %v", got)
	}
	purge(`{"filter":"events.orders.*","keep":2}`, 3) // b: keep 8 and 10
	if got, err := s.GetMsg(tctx(t), 8); err != nil || string(got.Data) != "8" {
		t.Errorf("seq 8 after keep 2: %v", err)
	}
	wantState(t, streamInfo(t, s).State, 2, 8, 10)

	// Keep N over the whole stream, and up to a sequence.
	if err := js.DeleteStream(tctx(t), "ORDERS"); err != nil {
		t.Fatal(err)
	}
	s = createStream(t, js, ordersConfig(nil))
	fillAB(t, js, 20)
	if err := s.Purge(tctx(t), jetstream.WithPurgeKeep(15)); err != nil {
		t.Fatal(err)
	}
	wantState(t, streamInfo(t, s).State, 15, 6, 20)
	if err := s.Purge(tctx(t), jetstream.WithPurgeSequence(10)); err != nil { // below 10, exclusive
		t.Fatal(err)
	}
	wantState(t, streamInfo(t, s).State, 11, 10, 20)
	purge(`{"seq":1}`, 0)
	purge(`{"filter":"events.orders.a","seq":15}`, 2) // a is odd: 11 and 13 are below 15
	if got := subjects(); !reflect.DeepEqual(got, map[string]uint64{"events.orders.a": 3, "events.orders.b": 6}) {
		t.Errorf("after filtered seq purge: %v", got)
	}
	purge(`{"filter":"events.orders.b","keep":1}`, 5)
	if got := subjects(); !reflect.DeepEqual(got, map[string]uint64{"events.orders.a": 3, "events.orders.b": 1}) {
		t.Errorf("after keep 1 on b: %v", got)
	}
	purge(`{"keep":100}`, 0)
	purge(`{"filter":"events.orders.none"}`, 0)

	// Errors.
	apiErr(t, nc, "$JS.API.STREAM.PURGE.ORDERS", `{"seq":5,"keep":1}`, "stream_purge_response", 400, 10003, "bad request")
	apiErr(t, nc, "$JS.API.STREAM.PURGE.NOPE", "", "stream_purge_response", 404, 10059, "stream not found")
	apiErr(t, nc, "$JS.API.STREAM.PURGE.ORDERS", `{"filter":`, "stream_purge_response", 400, 10025, "invalid JSON*")

	createStream(t, js, jetstream.StreamConfig{Name: "NOPURGE", Subjects: []string{"nopurge"}, DenyPurge: true})
	jsPublish(t, js, "nopurge", "x")
	apiErr(t, nc, "$JS.API.STREAM.PURGE.NOPURGE", "", "stream_purge_response", 500, 10110, "stream purge not permitted")
	np, _ := js.Stream(tctx(t), "NOPURGE")
	wantAPIError(t, np.Purge(tctx(t)), 500, 10110, "stream purge not permitted")
	wantState(t, streamInfo(t, np).State, 1, 1, 1)
}

// ---------------------------------------------------------------------------
// get and delete single messages

func TestStreamMsgGetAndDelete(t *testing.T) {
	u := startJS(t)
	nc, js := jsConnect(t, u)
	s := createStream(t, js, ordersConfig(nil))

	before := time.Now().Add(-time.Second)
	m := nats.NewMsg("events.orders.a")
	m.Header.Set("X-Order", "42")
	m.Header.Add("X-Multi", "1")
	m.Header.Add("X-Multi", "2")
	m.Data = []byte("first")
	wantAck(t, jsPublishMsg(t, js, m, jetstream.WithMsgID("id-1")), "ORDERS", 1, false)
	jsPublish(t, js, "events.orders.b", "second")
	jsPublish(t, js, "events.orders.a", "third")
	jsPublish(t, js, "events.orders.c", "")

	got, err := s.GetMsg(tctx(t), 1)
	if err != nil {
		t.Fatalf("GetMsg 1: %v", err)
	}
	if got.Subject != "events.orders.a" || got.Sequence != 1 || string(got.Data) != "first" {
		t.Errorf("msg 1: %+v", got)
	}
	if got.Header.Get("X-Order") != "42" || strings.Join(got.Header.Values("X-Multi"), ",") != "1,2" || got.Header.Get(jetstream.MsgIDHeader) != "id-1" {
		t.Errorf("msg 1 headers: %v (the stored message keeps every header, Nats-Msg-Id included)", got.Header)
	}
	if got.Time.Before(before) || got.Time.After(time.Now().Add(time.Second)) {
		t.Errorf("msg 1 time %v", got.Time)
	}
	last, err := s.GetLastMsgForSubject(tctx(t), "events.orders.a")
	if err != nil || last.Sequence != 3 || string(last.Data) != "third" {
		t.Errorf("last for events.orders.a: %+v, %v", last, err)
	}
	last, err = s.GetLastMsgForSubject(tctx(t), "events.orders.*")
	if err != nil || last.Sequence != 4 || last.Subject != "events.orders.c" || len(last.Data) != 0 {
		t.Errorf("last for events.orders.*: %+v, %v", last, err)
	}
	next, err := s.GetMsg(tctx(t), 2, jetstream.WithGetMsgSubject("events.orders.a"))
	if err != nil || next.Sequence != 3 {
		t.Errorf("next a from 2: %+v, %v", next, err)
	}
	if _, err := s.GetMsg(tctx(t), 99); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Errorf("GetMsg 99: %v, want ErrMsgNotFound", err)
	}
	if _, err := s.GetLastMsgForSubject(tctx(t), "events.orders.zzz"); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Errorf("last for an unused subject: %v, want ErrMsgNotFound", err)
	}

	// The raw response: base64 headers starting NATS/1.0, no hdrs without headers.
	r := apiOK(t, nc, "$JS.API.STREAM.MSG.GET.ORDERS", `{"seq":1}`, "stream_msg_get_response")
	msg := jsonObj(r, "message")
	hdrs, _ := base64.StdEncoding.DecodeString(fmt.Sprint(msg["hdrs"]))
	data, _ := base64.StdEncoding.DecodeString(fmt.Sprint(msg["data"]))
	if !strings.HasPrefix(string(hdrs), "NATS/1.0\r\n") || !strings.Contains(string(hdrs), "X-Order: 42\r\n") || string(data) != "first" ||
		msg["subject"] != "events.orders.a" || num(msg["seq"]) != 1 {
		t.Errorf("raw get 1: %v (hdrs %q)", r, hdrs)
	}
	if _, err := time.Parse(time.RFC3339Nano, fmt.Sprint(msg["time"])); err != nil {
		t.Errorf("raw get time %v: %v", msg["time"], err)
	}
	r = apiOK(t, nc, "$JS.API.STREAM.MSG.GET.ORDERS", `{"last_by_subj":"events.orders.b"}`, "stream_msg_get_response")
	if msg := jsonObj(r, "message"); msg["hdrs"] != nil || num(msg["seq"]) != 2 {
		t.Errorf("raw get of a message without headers: %v", r)
	}
	r = apiOK(t, nc, "$JS.API.STREAM.MSG.GET.ORDERS", `{"seq":4}`, "stream_msg_get_response")
	if msg := jsonObj(r, "message"); msg["data"] != nil || msg["hdrs"] != nil {
		t.Errorf("raw get of an empty message: %v", r)
	}
	for _, body := range []string{`{}`, `{"seq":1,"last_by_subj":"events.orders.a"}`, `{"last_by_subj":"events.orders.a","next_by_subj":"events.orders.a"}`} {
		apiErr(t, nc, "$JS.API.STREAM.MSG.GET.ORDERS", body, "stream_msg_get_response", 400, 10003, "bad request")
	}
	apiErr(t, nc, "$JS.API.STREAM.MSG.GET.ORDERS", `{"seq":99}`, "stream_msg_get_response", 404, 10037, "no message found")
	apiErr(t, nc, "$JS.API.STREAM.MSG.GET.NOPE", `{"seq":1}`, "stream_msg_get_response", 404, 10059, "stream not found")
	apiErr(t, nc, "$JS.API.STREAM.MSG.GET.ORDERS", `{"seq":`, "stream_msg_get_response", 400, 10025, "invalid JSON*")

	// Delete.
	if err := s.DeleteMsg(tctx(t), 2); err != nil {
		t.Fatalf("DeleteMsg 2: %v", err)
	}
	if _, err := s.GetMsg(tctx(t), 2); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Errorf("GetMsg of a deleted message: %v", err)
	}
	if _, err := s.GetLastMsgForSubject(tctx(t), "events.orders.b"); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Errorf("last for a subject whose only message was deleted: %v", err)
	}
	if err := s.SecureDeleteMsg(tctx(t), 3); err != nil {
		t.Fatalf("SecureDeleteMsg 3: %v", err)
	}
	wantDeleteError(t, s.DeleteMsg(tctx(t), 2), 400, 10043, "sequence 2 not found")
	// Beyond the last sequence nats-server's file store answers EOF.
	wantDeleteError(t, s.DeleteMsg(tctx(t), 99), 500, 10057, "stream store EOF")
	dr := apiOK(t, nc, "$JS.API.STREAM.MSG.DELETE.ORDERS", `{"seq":4,"no_erase":true}`, "stream_msg_delete_response")
	if dr["success"] != true {
		t.Errorf("delete response: %v", dr)
	}
	apiErr(t, nc, "$JS.API.STREAM.MSG.DELETE.ORDERS", ``, "stream_msg_delete_response", 400, 10003, "bad request")
	apiErr(t, nc, "$JS.API.STREAM.MSG.DELETE.NOPE", `{"seq":1}`, "stream_msg_delete_response", 404, 10059, "stream not found")
	info := streamInfo(t, s, jetstream.WithDeletedDetails(true))
	wantState(t, info.State, 1, 1, 4)
	// last_seq stays 4, so the deleted tail message counts as deleted too.
	if !reflect.DeepEqual(info.State.Deleted, []uint64{2, 3, 4}) || info.State.NumDeleted != 3 {
		t.Errorf("deleted %v (num %d), want [2 3 4]", info.State.Deleted, info.State.NumDeleted)
	}

	createStream(t, js, jetstream.StreamConfig{Name: "NODEL", Subjects: []string{"nodel"}, DenyDelete: true})
	jsPublish(t, js, "nodel", "x")
	nd, _ := js.Stream(tctx(t), "NODEL")
	wantDeleteError(t, nd.DeleteMsg(tctx(t), 1), 500, 10057, "message delete not permitted")
	if _, err := nd.GetMsg(tctx(t), 1); err != nil {
		t.Errorf("message survived a refused delete: %v", err)
	}
}

// ---------------------------------------------------------------------------
// publish, PubAck, dedupe, expected-* headers, rollup

func TestStreamPublishAck(t *testing.T) {
	u := startJS(t)
	nc, js := jsConnect(t, u)
	createStream(t, js, ordersConfig(nil))
	createStream(t, js, jetstream.StreamConfig{Name: "MEM", Subjects: []string{"mem.>"}, Storage: jetstream.MemoryStorage})

	for i := 1; i <= 3; i++ {
		wantAck(t, jsPublish(t, js, "events.orders.new", "o"), "ORDERS", uint64(i), false)
	}
	wantAck(t, jsPublish(t, js, "mem.x", "m"), "MEM", 1, false)

	// The PubAck bytes exactly as nats-server writes them.
	resp, err := nc.Request("events.orders.new", []byte("raw"), jsTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if string(resp.Data) != `{"stream":"ORDERS","seq":4}` {
		t.Errorf("PubAck %q", resp.Data)
	}
	dm := nats.NewMsg("events.orders.new")
	dm.Header.Set("Nats-Msg-Id", "raw-1")
	if resp, err = nc.RequestMsg(dm, jsTimeout); err != nil || string(resp.Data) != `{"stream":"ORDERS","seq":5}` {
		t.Fatalf("PubAck with id: %q %v", resp.Data, err)
	}
	if resp, err = nc.RequestMsg(dm, jsTimeout); err != nil || string(resp.Data) != `{"stream":"ORDERS","seq":5,"duplicate": true}` {
		t.Errorf("duplicate PubAck: %q %v", resp.Data, err)
	}
	em := nats.NewMsg("events.orders.new")
	em.Header.Set("Nats-Expected-Last-Sequence", "1")
	if resp, err = nc.RequestMsg(em, jsTimeout); err != nil ||
		string(resp.Data) != `{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 5"},"stream":"ORDERS","seq":0}` {
		t.Errorf("error PubAck: %q %v", resp.Data, err)
	}

	// A core subscriber on the subject still gets the message.
	sub := subSync(t, nc, "events.orders.>")
	flush(t, nc)
	wantAck(t, jsPublish(t, js, "events.orders.seen", "both"), "ORDERS", 6, false)
	if m := nextMsg(t, sub); m.Subject != "events.orders.seen" || string(m.Data) != "both" {
		t.Errorf("core subscriber got %s %q", m.Subject, m.Data)
	}

	// A plain publish without a reply is stored too.
	publish(t, nc, "events.orders.noreply", "quiet")
	flush(t, nc)
	s, _ := js.Stream(tctx(t), "ORDERS")
	waitFor(t, jsTimeout, "the reply-less publish to be stored", func() bool { return streamInfo(t, s).State.LastSeq == 7 })
	if m, err := s.GetMsg(tctx(t), 7); err != nil || m.Subject != "events.orders.noreply" || string(m.Data) != "quiet" {
		t.Errorf("reply-less message: %+v %v", m, err)
	}

	// Async publishes are acknowledged in order.
	var futs []jetstream.PubAckFuture
	for i := range 200 {
		f, err := js.PublishAsync("events.orders.async", []byte(strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		futs = append(futs, f)
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(jsTimeout):
		t.Fatal("async publishes not acknowledged")
	}
	for i, f := range futs {
		select {
		case ack := <-f.Ok():
			wantAck(t, ack, "ORDERS", uint64(8+i), false)
		case err := <-f.Err():
			t.Fatalf("async publish %d: %v", i, err)
		}
	}
}

func TestStreamNoResponders(t *testing.T) {
	u := startJS(t)
	nc, js := jsConnect(t, u)
	createStream(t, js, ordersConfig(nil))

	// Default retries (2 x 250 ms), as a user gets them.
	start := time.Now()
	_, err := js.Publish(tctx(t), "events.other.x", []byte("x"))
	if !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Fatalf("publish to an uncaptured subject: %v, want ErrNoStreamResponse", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("no-responders took %v", took)
	}
	if _, err := nc.Request("events.other.x", []byte("x"), jsTimeout); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("core request to an uncaptured subject: %v", err)
	}
	f, err := js.PublishAsync("events.other.y", []byte("y"), jetstream.WithRetryAttempts(0))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-f.Err():
		if !errors.Is(err, jetstream.ErrNoStreamResponse) {
			t.Fatalf("async publish to an uncaptured subject: %v", err)
		}
	case <-f.Ok():
		t.Fatal("async publish to an uncaptured subject was acknowledged")
	case <-time.After(jsTimeout):
		t.Fatal("no answer to an async publish to an uncaptured subject")
	}
}

func TestStreamDedupe(t *testing.T) {
	u := startJS(t)
	_, js := jsConnect(t, u)
	s := createStream(t, js, ordersConfig(nil))

	wantAck(t, jsPublish(t, js, "events.orders.a", "one", jetstream.WithMsgID("A")), "ORDERS", 1, false)
	wantAck(t, jsPublish(t, js, "events.orders.a", "two", jetstream.WithMsgID("B")), "ORDERS", 2, false)
	// Same id, even with another subject and payload: the original sequence.
	wantAck(t, jsPublish(t, js, "events.orders.b", "one again", jetstream.WithMsgID("A")), "ORDERS", 1, true)
	wantAck(t, jsPublish(t, js, "events.orders.a", "two again", jetstream.WithMsgID("B")), "ORDERS", 2, true)
	wantAck(t, jsPublish(t, js, "events.orders.a", "no id"), "ORDERS", 3, false)
	wantAck(t, jsPublish(t, js, "events.orders.a", "no id"), "ORDERS", 4, false)
	wantState(t, streamInfo(t, s).State, 4, 1, 4)
	if m, err := s.GetMsg(tctx(t), 1); err != nil || string(m.Data) != "one" {
		t.Errorf("original kept: %v", err)
	}
	// Deleting the message does not forget its id within the window.
	if err := s.DeleteMsg(tctx(t), 1); err != nil {
		t.Fatal(err)
	}
	wantAck(t, jsPublish(t, js, "events.orders.a", "x", jetstream.WithMsgID("A")), "ORDERS", 1, true)

	// Async duplicates: each answered with its original sequence.
	var futs []jetstream.PubAckFuture
	for i := range 50 {
		f, err := js.PublishAsync("events.orders.async", []byte("x"), jetstream.WithMsgID(fmt.Sprintf("async-%d", i%10)))
		if err != nil {
			t.Fatal(err)
		}
		futs = append(futs, f)
	}
	<-js.PublishAsyncComplete()
	for i, f := range futs {
		select {
		case ack := <-f.Ok():
			wantAck(t, ack, "ORDERS", uint64(5+i%10), i >= 10)
		case err := <-f.Err():
			t.Fatalf("async %d: %v", i, err)
		}
	}
	wantState(t, streamInfo(t, s).State, 13, 2, 14)
}

func TestStreamDedupeWindowExpires(t *testing.T) {
	t.Parallel()
	u := startJS(t)
	_, js := jsConnect(t, u)
	s := createStream(t, js, ordersConfig(func(c *jetstream.StreamConfig) { c.Duplicates = 500 * time.Millisecond }))
	wantAck(t, jsPublish(t, js, "events.orders.a", "1", jetstream.WithMsgID("X")), "ORDERS", 1, false)
	wantAck(t, jsPublish(t, js, "events.orders.a", "1", jetstream.WithMsgID("X")), "ORDERS", 1, true)
	time.Sleep(600 * time.Millisecond)
	// Once the window has passed the id is forgotten (a server may purge
	// its id table a little late: retry, duplicates are not stored).
	var ack *jetstream.PubAck
	waitFor(t, 5*time.Second, "the duplicate window to pass", func() bool {
		ack = jsPublish(t, js, "events.orders.a", "2", jetstream.WithMsgID("X"))
		if !ack.Duplicate {
			return true
		}
		time.Sleep(50 * time.Millisecond)
		return false
	})
	wantAck(t, ack, "ORDERS", 2, false)
	wantState(t, streamInfo(t, s).State, 2, 1, 2)
}

// Streams, their configuration, their messages and the dedupe window
// survive a restart on the same store directory.
func TestStreamRestart(t *testing.T) {
	opts := jsIn(t.TempDir())
	u, stop := startServerStoppable(t, opts)
	nc, js := jsConnect(t, u)
	cfg := ordersConfig(func(c *jetstream.StreamConfig) {
		c.Description = "survives"
		c.MaxMsgsPerSubject = 5
		c.Metadata = map[string]string{"k": "v"}
		c.AllowRollup = true
	})
	s := createStream(t, js, cfg)
	createStream(t, js, jetstream.StreamConfig{Name: "SECOND", Subjects: []string{"second"}})
	createStream(t, js, jetstream.StreamConfig{Name: "MEMORY", Subjects: []string{"memory"}, Storage: jetstream.MemoryStorage})
	jsPublish(t, js, "memory", "gone after a restart")
	for i := 1; i <= 20; i++ {
		m := nats.NewMsg(fmt.Sprintf("events.orders.%d", i%3))
		m.Header.Set("X-I", strconv.Itoa(i))
		m.Data = []byte(fmt.Sprintf("payload-%d", i))
		wantAck(t, jsPublishMsg(t, js, m, jetstream.WithMsgID(fmt.Sprintf("id-%d", i))), "ORDERS", uint64(i), false)
	}
	if err := s.DeleteMsg(tctx(t), 19); err != nil {
		t.Fatal(err)
	}
	jsPublish(t, js, "second", "2nd")
	before := streamInfo(t, s, jetstream.WithDeletedDetails(true))
	nc.Close()
	stop()

	u2, _ := startServerStoppable(t, opts)
	_, js2 := jsConnect(t, u2)
	s2, err := js2.Stream(tctx(t), "ORDERS")
	if err != nil {
		t.Fatalf("ORDERS after restart: %v", err)
	}
	after := streamInfo(t, s2, jetstream.WithDeletedDetails(true))
	if !reflect.DeepEqual(after.Config, before.Config) {
		t.Errorf("config after restart:\n got %+v\nwant %+v", after.Config, before.Config)
	}
	if !after.Created.Equal(before.Created) {
		t.Errorf("created %v, was %v", after.Created, before.Created)
	}
	if a, b := after.State, before.State; a.Msgs != b.Msgs || a.Bytes != b.Bytes || a.FirstSeq != b.FirstSeq ||
		a.LastSeq != b.LastSeq || !a.FirstTime.Equal(b.FirstTime) || !a.LastTime.Equal(b.LastTime) ||
		!reflect.DeepEqual(a.Deleted, b.Deleted) || a.NumSubjects != b.NumSubjects {
		t.Errorf("state after restart:\n got %+v\nwant %+v", a, b)
	}
	for seq := uint64(1); seq <= 20; seq++ {
		m, err := s2.GetMsg(tctx(t), seq)
		if seq <= 5 || seq == 19 {
			// 1..5 fell out per subject (max 5 each); 19 was deleted
			if seq == 19 && !errors.Is(err, jetstream.ErrMsgNotFound) {
				t.Errorf("deleted seq 19 after restart: %v", err)
			}
			continue
		}
		if err != nil || string(m.Data) != fmt.Sprintf("payload-%d", seq) || m.Header.Get("X-I") != strconv.Itoa(int(seq)) {
			t.Errorf("seq %d after restart: %+v %v", seq, m, err)
		}
	}
	// Dedupe remembers the ids from before the restart.
	wantAck(t, jsPublish(t, js2, "events.orders.x", "dup", jetstream.WithMsgID("id-20")), "ORDERS", 20, true)
	wantAck(t, jsPublish(t, js2, "events.orders.x", "dup", jetstream.WithMsgID("id-7")), "ORDERS", 7, true)
	// Sequences continue.
	wantAck(t, jsPublish(t, js2, "events.orders.x", "new", jetstream.WithMsgID("id-21")), "ORDERS", 21, false)
	// Memory streams do not survive a restart (nats-server forgets them
	// entirely, configuration included).
	if got := streamNames(t, js2); !reflect.DeepEqual(got, []string{"ORDERS", "SECOND"}) {
		t.Errorf("streams after restart: %v, want [ORDERS SECOND]", got)
	}
	if _, err := js2.Stream(tctx(t), "MEMORY"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("memory stream after restart: %v, want ErrStreamNotFound", err)
	}
}

func TestStreamExpectedHeaders(t *testing.T) {
	u := startJS(t)
	_, js := jsConnect(t, u)
	createStream(t, js, ordersConfig(nil))

	wantAck(t, jsPublish(t, js, "events.orders.a", "1", jetstream.WithExpectStream("ORDERS"), jetstream.WithExpectLastSequence(0)), "ORDERS", 1, false)
	_, err := js.Publish(tctx(t), "events.orders.a", []byte("x"), jetstream.WithExpectStream("OTHER"))
	wantAPIError(t, err, 400, 10060, "expected stream does not match")

	// Nats-Expected-Last-Sequence: the stream's last sequence.
	wantAck(t, jsPublish(t, js, "events.orders.b", "2", jetstream.WithExpectLastSequence(1)), "ORDERS", 2, false)
	_, err = js.Publish(tctx(t), "events.orders.a", []byte("x"), jetstream.WithExpectLastSequence(1))
	wantAPIError(t, err, 400, 10071, "wrong last sequence: 2")
	var apiE *jetstream.APIError
	if !errors.As(err, &apiE) || !errors.Is(err, &jetstream.APIError{ErrorCode: jetstream.JSErrCodeStreamWrongLastSequence}) {
		t.Errorf("error %v does not match JSErrCodeStreamWrongLastSequence", err)
	}

	// Nats-Expected-Last-Subject-Sequence: the subject's last sequence.
	wantAck(t, jsPublish(t, js, "events.orders.a", "3", jetstream.WithExpectLastSequencePerSubject(1)), "ORDERS", 3, false)
	_, err = js.Publish(tctx(t), "events.orders.a", []byte("x"), jetstream.WithExpectLastSequencePerSubject(1))
	wantAPIError(t, err, 400, 10071, "wrong last sequence: 3")
	wantAck(t, jsPublish(t, js, "events.orders.new", "4", jetstream.WithExpectLastSequencePerSubject(0)), "ORDERS", 4, false)
	_, err = js.Publish(tctx(t), "events.orders.fresh", []byte("x"), jetstream.WithExpectLastSequencePerSubject(4))
	wantAPIError(t, err, 400, 10071, "wrong last sequence: 0")
	// ... of another subject (Nats-Expected-Last-Subject-Sequence-Subject).
	wantAck(t, jsPublish(t, js, "events.orders.a", "5", jetstream.WithExpectLastSequenceForSubject(4, "events.orders.*")), "ORDERS", 5, false)
	_, err = js.Publish(tctx(t), "events.orders.a", []byte("x"), jetstream.WithExpectLastSequenceForSubject(2, "events.orders.b"))
	if err != nil {
		t.Fatalf("expected last seq 2 for events.orders.b: %v", err) // seq 6
	}
	_, err = js.Publish(tctx(t), "events.orders.a", []byte("x"), jetstream.WithExpectLastSequenceForSubject(3, "events.orders.b"))
	wantAPIError(t, err, 400, 10071, "wrong last sequence: 2")

	// Nats-Expected-Last-Msg-Id: the id of the stream's last message.
	wantAck(t, jsPublish(t, js, "events.orders.c", "7", jetstream.WithMsgID("m7")), "ORDERS", 7, false)
	wantAck(t, jsPublish(t, js, "events.orders.c", "8", jetstream.WithMsgID("m8"), jetstream.WithExpectLastMsgID("m7")), "ORDERS", 8, false)
	_, err = js.Publish(tctx(t), "events.orders.c", []byte("x"), jetstream.WithExpectLastMsgID("m7"))
	wantAPIError(t, err, 400, 10070, "wrong last msg ID: m8")
	wantAck(t, jsPublish(t, js, "events.orders.c", "9"), "ORDERS", 9, false)
	_, err = js.Publish(tctx(t), "events.orders.c", []byte("x"), jetstream.WithExpectLastMsgID("m8"))
	wantAPIError(t, err, 400, 10070, "wrong last msg ID: ")

	// Every refused publish left the stream alone.
	s, _ := js.Stream(tctx(t), "ORDERS")
	wantState(t, streamInfo(t, s).State, 9, 1, 9)
}

func TestStreamRollup(t *testing.T) {
	u := startJS(t)
	_, js := jsConnect(t, u)
	s := createStream(t, js, ordersConfig(func(c *jetstream.StreamConfig) { c.AllowRollup = true }))
	fillAB(t, js, 6) // a: 1 3 5, b: 2 4 6

	rollup := func(subj, how, data string) *jetstream.PubAck {
		t.Helper()
		m := nats.NewMsg(subj)
		m.Header.Set("Nats-Rollup", how)
		m.Data = []byte(data)
		return jsPublishMsg(t, js, m)
	}
	wantAck(t, rollup("events.orders.a", "sub", "a-rolled"), "ORDERS", 7, false)
	info := streamInfo(t, s, jetstream.WithSubjectFilter(">"))
	wantState(t, info.State, 4, 2, 7)
	if want := map[string]uint64{"events.orders.a": 1, "events.orders.b": 3}; !reflect.DeepEqual(info.State.Subjects, want) {
		t.Errorf("after a sub rollup: %v", info.State.Subjects)
	}
	if m, err := s.GetLastMsgForSubject(tctx(t), "events.orders.a"); err != nil || m.Sequence != 7 || string(m.Data) != "a-rolled" {
		t.Errorf("rollup message: %+v %v", m, err)
	}
	wantAck(t, rollup("events.orders.c", "all", "everything"), "ORDERS", 8, false)
	wantState(t, streamInfo(t, s).State, 1, 8, 8)

	_, err := js.PublishMsg(tctx(t), &nats.Msg{Subject: "events.orders.a", Header: nats.Header{"Nats-Rollup": []string{"bogus"}}})
	wantAPIError(t, err, 500, 10111, `rollup value invalid: "bogus"`)

	createStream(t, js, jetstream.StreamConfig{Name: "NOROLL", Subjects: []string{"noroll.*"}})
	jsPublish(t, js, "noroll.a", "1")
	_, err = js.PublishMsg(tctx(t), &nats.Msg{Subject: "noroll.a", Header: nats.Header{"Nats-Rollup": []string{"sub"}}})
	wantAPIError(t, err, 500, 10111, "rollup not permitted")
	nr, _ := js.Stream(tctx(t), "NOROLL")
	wantState(t, streamInfo(t, nr).State, 1, 1, 1)
}

// ---------------------------------------------------------------------------
// limits and discard

func TestStreamLimits(t *testing.T) {
	u := startJS(t)
	_, js := jsConnect(t, u)

	t.Run("max_msgs discard old", func(t *testing.T) {
		for _, st := range []jetstream.StorageType{jetstream.FileStorage, jetstream.MemoryStorage} {
			name := "MM_OLD_" + st.String()
			s := createStream(t, js, jetstream.StreamConfig{Name: name, Subjects: []string{"mmold." + st.String()}, MaxMsgs: 3, Storage: st})
			for i := 1; i <= 5; i++ {
				wantAck(t, jsPublish(t, js, "mmold."+st.String(), strconv.Itoa(i)), name, uint64(i), false)
			}
			wantState(t, streamInfo(t, s).State, 3, 3, 5)
		}
	})
	t.Run("max_msgs discard new", func(t *testing.T) {
		s := createStream(t, js, jetstream.StreamConfig{Name: "MM_NEW", Subjects: []string{"mmnew"}, MaxMsgs: 3, Discard: jetstream.DiscardNew})
		for i := 1; i <= 3; i++ {
			jsPublish(t, js, "mmnew", strconv.Itoa(i))
		}
		_, err := js.Publish(tctx(t), "mmnew", []byte("4"))
		wantAPIError(t, err, 503, 10077, "maximum messages exceeded")
		wantState(t, streamInfo(t, s).State, 3, 1, 3)
		// Room again after a delete.
		if err := s.DeleteMsg(tctx(t), 1); err != nil {
			t.Fatal(err)
		}
		wantAck(t, jsPublish(t, js, "mmnew", "5"), "MM_NEW", 4, false)
	})
	t.Run("max_bytes", func(t *testing.T) {
		payload := strings.Repeat("x", 600)
		s := createStream(t, js, jetstream.StreamConfig{Name: "MB_OLD", Subjects: []string{"mbold"}, MaxBytes: 1000})
		for i := 1; i <= 3; i++ {
			jsPublish(t, js, "mbold", payload)
		}
		info := streamInfo(t, s)
		wantState(t, info.State, 1, 3, 3)
		if info.State.Bytes > 1000 || info.State.Bytes < 600 {
			t.Errorf("bytes %d with max_bytes 1000 and one 600-byte message", info.State.Bytes)
		}
		s = createStream(t, js, jetstream.StreamConfig{Name: "MB_NEW", Subjects: []string{"mbnew"}, MaxBytes: 1000, Discard: jetstream.DiscardNew})
		jsPublish(t, js, "mbnew", payload)
		_, err := js.Publish(tctx(t), "mbnew", []byte(payload))
		wantAPIError(t, err, 503, 10077, "maximum bytes exceeded")
		wantState(t, streamInfo(t, s).State, 1, 1, 1)
	})
	t.Run("max_msg_size", func(t *testing.T) {
		s := createStream(t, js, jetstream.StreamConfig{Name: "MSZ", Subjects: []string{"msz"}, MaxMsgSize: 100})
		wantAck(t, jsPublish(t, js, "msz", strings.Repeat("x", 100)), "MSZ", 1, false)
		_, err := js.Publish(tctx(t), "msz", []byte(strings.Repeat("x", 101)))
		wantAPIError(t, err, 400, 10054, "message size exceeds maximum allowed")
		// Headers count as well.
		m := nats.NewMsg("msz")
		m.Header.Set("X-Pad", strings.Repeat("h", 40))
		m.Data = []byte(strings.Repeat("x", 80))
		_, err = js.PublishMsg(tctx(t), m)
		wantAPIError(t, err, 400, 10054, "message size exceeds maximum allowed")
		wantState(t, streamInfo(t, s).State, 1, 1, 1)
	})
	t.Run("max_msgs_per_subject", func(t *testing.T) {
		s := createStream(t, js, jetstream.StreamConfig{Name: "MPS", Subjects: []string{"mps.*"}, MaxMsgsPerSubject: 2})
		for i, sub := range []string{"a", "a", "b", "a", "a", "b", "b"} {
			wantAck(t, jsPublish(t, js, "mps."+sub, strconv.Itoa(i+1)), "MPS", uint64(i+1), false)
		}
		info := streamInfo(t, s, jetstream.WithSubjectFilter(">"), jetstream.WithDeletedDetails(true))
		wantState(t, info.State, 4, 4, 7)
		if want := map[string]uint64{"mps.a": 2, "mps.b": 2}; !reflect.DeepEqual(info.State.Subjects, want) {
			t.Errorf("subjects: %v", info.State.Subjects)
		}
		// 1, 2 (a) and 3 (b) fell out: no interior gaps
		if len(info.State.Deleted) != 0 || info.State.NumDeleted != 0 {
			t.Errorf("deleted: %v (num %d), want none", info.State.Deleted, info.State.NumDeleted)
		}
		// discard new keeps dropping a subject's oldest message...
		s = createStream(t, js, jetstream.StreamConfig{Name: "MPS_NEW", Subjects: []string{"mpsnew.*"}, MaxMsgsPerSubject: 1, Discard: jetstream.DiscardNew})
		jsPublish(t, js, "mpsnew.a", "1")
		wantAck(t, jsPublish(t, js, "mpsnew.a", "2"), "MPS_NEW", 2, false)
		wantState(t, streamInfo(t, s).State, 1, 2, 2)
		// ... unless discard_new_per_subject.
		s = createStream(t, js, jetstream.StreamConfig{Name: "MPS_DNPS", Subjects: []string{"dnps.*"}, MaxMsgsPerSubject: 1,
			Discard: jetstream.DiscardNew, DiscardNewPerSubject: true})
		jsPublish(t, js, "dnps.a", "1")
		_, err := js.Publish(tctx(t), "dnps.a", []byte("2"))
		wantAPIError(t, err, 503, 10077, "maximum messages per subject exceeded")
		wantAck(t, jsPublish(t, js, "dnps.b", "3"), "MPS_DNPS", 2, false)
		wantState(t, streamInfo(t, s).State, 2, 1, 2)
	})
	t.Run("max_msgs discard new with per-subject limit", func(t *testing.T) {
		// At max_msgs, a message whose subject is at its own limit replaces
		// that subject's oldest one and is accepted.
		s := createStream(t, js, jetstream.StreamConfig{Name: "MM_MPS", Subjects: []string{"mmmps.*"}, MaxMsgs: 2, MaxMsgsPerSubject: 1, Discard: jetstream.DiscardNew})
		jsPublish(t, js, "mmmps.a", "1")
		jsPublish(t, js, "mmmps.b", "2")
		wantAck(t, jsPublish(t, js, "mmmps.a", "3"), "MM_MPS", 3, false)
		_, err := js.Publish(tctx(t), "mmmps.c", []byte("4"))
		wantAPIError(t, err, 503, 10077, "maximum messages exceeded")
		wantState(t, streamInfo(t, s).State, 2, 2, 3)
	})
}

func TestStreamMaxAge(t *testing.T) {
	t.Parallel()
	u := startJS(t)
	_, js := jsConnect(t, u)
	var streams []jetstream.Stream
	for _, st := range []jetstream.StorageType{jetstream.FileStorage, jetstream.MemoryStorage} {
		s := createStream(t, js, jetstream.StreamConfig{Name: "AGE_" + st.String(), Subjects: []string{"age." + st.String()}, MaxAge: time.Second, Storage: st})
		if d := s.CachedInfo().Config.Duplicates; d != time.Second {
			t.Errorf("duplicate_window with max_age 1s: %v, want 1s", d)
		}
		for i := range 3 {
			jsPublish(t, js, "age."+st.String(), strconv.Itoa(i))
		}
		streams = append(streams, s)
	}
	for _, s := range streams {
		wantState(t, streamInfo(t, s).State, 3, 1, 3)
	}
	for _, s := range streams {
		waitFor(t, 8*time.Second, "messages to age out", func() bool { return streamInfo(t, s).State.Msgs == 0 })
		st := streamInfo(t, s).State
		wantState(t, st, 0, 4, 3)
	}
}

// Interest streams store a message only if some consumer wants it: with no
// consumers, a publish is acknowledged with a sequence but not kept.
// Workqueue streams keep messages until a consumer takes them.
func TestStreamRetentionWithoutConsumers(t *testing.T) {
	u := startJS(t)
	_, js := jsConnect(t, u)
	is := createStream(t, js, jetstream.StreamConfig{Name: "INTEREST", Subjects: []string{"int.>"}, Retention: jetstream.InterestPolicy})
	ws := createStream(t, js, jetstream.StreamConfig{Name: "WQ", Subjects: []string{"wq.>"}, Retention: jetstream.WorkQueuePolicy})
	for i := 1; i <= 3; i++ {
		wantAck(t, jsPublish(t, js, "int.x", "i"), "INTEREST", uint64(i), false)
		wantAck(t, jsPublish(t, js, "wq.x", "w"), "WQ", uint64(i), false)
	}
	wantState(t, streamInfo(t, is).State, 0, 4, 3)
	wantState(t, streamInfo(t, ws).State, 3, 1, 3)
}

// ---------------------------------------------------------------------------
// account info and odd requests

func TestStreamAccountInfo(t *testing.T) {
	u := startJS(t)
	nc, js := jsConnect(t, u)

	ai, err := js.AccountInfo(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if ai.Streams != 0 || ai.Consumers != 0 || ai.Memory != 0 || ai.Store != 0 {
		t.Errorf("fresh account: %+v", ai.Tier)
	}
	l := ai.Limits
	if l.MaxMemory != -1 || l.MaxStore != -1 || l.MaxStreams != -1 || l.MaxConsumers != -1 || l.MaxAckPending != -1 ||
		l.MemoryMaxStreamBytes != -1 || l.StoreMaxStreamBytes != -1 || l.MaxBytesRequired {
		t.Errorf("default account limits: %+v", l)
	}
	if ai.Domain != "" {
		t.Errorf("domain %q", ai.Domain)
	}

	fs := createStream(t, js, jetstream.StreamConfig{Name: "F", Subjects: []string{"f"}})
	ms := createStream(t, js, jetstream.StreamConfig{Name: "M", Subjects: []string{"m"}, Storage: jetstream.MemoryStorage})
	for range 10 {
		jsPublish(t, js, "f", strings.Repeat("f", 100))
		jsPublish(t, js, "m", strings.Repeat("m", 50))
	}
	ai, err = js.AccountInfo(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	fb, mb := streamInfo(t, fs).State.Bytes, streamInfo(t, ms).State.Bytes
	if ai.Streams != 2 || ai.Store != fb || ai.Memory != mb || fb < 1000 || mb < 500 {
		t.Errorf("account after two streams: streams %d storage %d memory %d; stream bytes file %d memory %d", ai.Streams, ai.Store, ai.Memory, fb, mb)
	}
	// API counters count requests and errors.
	total, errs := ai.API.Total, ai.API.Errors
	apiErr(t, nc, "$JS.API.STREAM.INFO.NOPE", "", "stream_info_response", 404, 10059, "stream not found")
	ai, err = js.AccountInfo(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if ai.API.Total < total+1 || ai.API.Errors != errs+1 {
		t.Errorf("api counters went from total %d errors %d to %d %d after one failing request", total, errs, ai.API.Total, ai.API.Errors)
	}

	if err := js.DeleteStream(tctx(t), "F"); err != nil {
		t.Fatal(err)
	}
	ai, _ = js.AccountInfo(tctx(t))
	if ai.Streams != 1 || ai.Store != 0 || ai.Memory != mb {
		t.Errorf("account after deleting F: %+v", ai.Tier)
	}

	m := apiOK(t, nc, "$JS.API.INFO", "", "account_info_response")
	for _, k := range []string{"memory", "storage", "reserved_memory", "reserved_storage", "streams", "consumers", "limits", "api"} {
		if _, ok := m[k]; !ok {
			t.Errorf("account info lacks %q: %v", k, m)
		}
	}
}
