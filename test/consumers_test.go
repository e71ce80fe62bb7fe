package test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// JetStream consumers driven by the nats.go jetstream package (v1.55), the
// legacy nats.JetStream() push API, and raw pull requests on
// $JS.API.CONSUMER.MSG.NEXT: the consumer endpoints of the $JS.API,
// delivery, acks, redelivery, retention, and the exact status frames of
// pull requests. Every assertion here holds against nats-server v2.15.2
// (CAIRN_TEST_TARGET=nats-server); where nats-server's behaviour is
// surprising, a comment says so.

// ---------------------------------------------------------------------------
// helpers (prefixed cx to keep clear of other files' helpers)

// cxWait bounds how long a test waits for something that should happen
// promptly (a delivery, an advisory, a state change).
const cxWait = 3 * time.Second

// cxCreate creates a consumer on stream and fails the test on an error.
func cxCreate(t testing.TB, js jetstream.JetStream, stream string, cfg jetstream.ConsumerConfig) jetstream.Consumer {
	t.Helper()
	c, err := js.CreateConsumer(tctx(t), stream, cfg)
	if err != nil {
		t.Fatalf("CreateConsumer %s %+v: %v", stream, cfg, err)
	}
	return c
}

// cxInfo fetches a consumer's current info.
func cxInfo(t testing.TB, c jetstream.Consumer) *jetstream.ConsumerInfo {
	t.Helper()
	info, err := c.Info(tctx(t))
	if err != nil {
		t.Fatalf("consumer info: %v", err)
	}
	return info
}

// cxFetch fetches up to batch messages, waiting at most wait, and fails
// the test if the batch ends with an error.
func cxFetch(t testing.TB, c jetstream.Consumer, batch int, wait time.Duration) []jetstream.Msg {
	t.Helper()
	b, err := c.Fetch(batch, jetstream.FetchMaxWait(wait))
	if err != nil {
		t.Fatalf("Fetch(%d): %v", batch, err)
	}
	var out []jetstream.Msg
	for m := range b.Messages() {
		out = append(out, m)
	}
	if err := b.Error(); err != nil {
		t.Fatalf("Fetch(%d) ended with %v after %d messages", batch, err, len(out))
	}
	return out
}

// cxNoWait is FetchNoWait, failing the test on an error.
func cxNoWait(t testing.TB, c jetstream.Consumer, batch int) []jetstream.Msg {
	t.Helper()
	b, err := c.FetchNoWait(batch)
	if err != nil {
		t.Fatalf("FetchNoWait(%d): %v", batch, err)
	}
	var out []jetstream.Msg
	for m := range b.Messages() {
		out = append(out, m)
	}
	if err := b.Error(); err != nil {
		t.Fatalf("FetchNoWait(%d) ended with %v after %d messages", batch, err, len(out))
	}
	return out
}

func cxMeta(t testing.TB, m jetstream.Msg) *jetstream.MsgMetadata {
	t.Helper()
	md, err := m.Metadata()
	if err != nil {
		t.Fatalf("Metadata of %s (reply %q): %v", m.Subject(), m.Reply(), err)
	}
	return md
}

// cxBodies returns the payloads of msgs.
func cxBodies(msgs []jetstream.Msg) []string {
	out := make([]string, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, string(m.Data()))
	}
	return out
}

// cxSeqs returns the stream sequences of msgs.
func cxSeqs(t testing.TB, msgs []jetstream.Msg) []uint64 {
	t.Helper()
	out := make([]uint64, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, cxMeta(t, m).Sequence.Stream)
	}
	return out
}

// cxAckSync acks m and waits for the server's confirmation, so that the
// server state seen afterwards includes the ack.
func cxAckSync(t testing.TB, m jetstream.Msg) {
	t.Helper()
	if err := m.DoubleAck(tctx(t)); err != nil {
		t.Fatalf("DoubleAck %s: %v", m.Reply(), err)
	}
}

// cxNakSync NAKs m as a request, so that the NAK has been processed when
// it returns (a plain Nak races with a following pull request).
func cxNakSync(t testing.TB, nc *nats.Conn, m jetstream.Msg) {
	t.Helper()
	if _, err := nc.Request(m.Reply(), []byte("-NAK"), jsTimeout); err != nil {
		t.Fatalf("-NAK %s: %v", m.Reply(), err)
	}
}

// cxPubN publishes n messages: subject fmt.Sprintf(subj, i) when subj has
// a verb, payload "m<i>", for i = 1..n.
func cxPubN(t testing.TB, js jetstream.JetStream, subj string, n int) {
	t.Helper()
	for i := 1; i <= n; i++ {
		s := subj
		if strings.Contains(subj, "%") {
			s = fmt.Sprintf(subj, i)
		}
		jsPublish(t, js, s, fmt.Sprintf("m%d", i))
	}
}

// cxSeqInfo checks a SequenceInfo.
func cxSeqInfo(t testing.TB, what string, got jetstream.SequenceInfo, cseq, sseq uint64) {
	t.Helper()
	if got.Consumer != cseq || got.Stream != sseq {
		t.Errorf("%s = {consumer_seq %d, stream_seq %d}, want {%d, %d}", what, got.Consumer, got.Stream, cseq, sseq)
	}
}

// cxCounts checks the counters of a ConsumerInfo.
func cxCounts(t testing.TB, info *jetstream.ConsumerInfo, pending uint64, ackPending, redelivered, waiting int) {
	t.Helper()
	if info.NumPending != pending || info.NumAckPending != ackPending || info.NumRedelivered != redelivered || info.NumWaiting != waiting {
		t.Errorf("consumer %s: num_pending %d num_ack_pending %d num_redelivered %d num_waiting %d, want %d %d %d %d",
			info.Name, info.NumPending, info.NumAckPending, info.NumRedelivered, info.NumWaiting, pending, ackPending, redelivered, waiting)
	}
}

// cxWaitInfo polls the consumer's info until cond holds.
func cxWaitInfo(t testing.TB, c jetstream.Consumer, what string, cond func(*jetstream.ConsumerInfo) bool) *jetstream.ConsumerInfo {
	t.Helper()
	var last *jetstream.ConsumerInfo
	deadline := time.Now().Add(cxWait)
	for {
		last = cxInfo(t, c)
		if cond(last) {
			return last
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; last info: %+v", what, *last)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// cxWaitPending waits until the consumer counts n pending messages.
// nats-server tells consumers about new messages asynchronously, after
// the PubAck, so a no_wait pull or a pending count right after a publish
// may not see it yet.
func cxWaitPending(t testing.TB, c jetstream.Consumer, n uint64) {
	t.Helper()
	cxWaitInfo(t, c, fmt.Sprintf("num_pending %d", n), func(i *jetstream.ConsumerInfo) bool { return i.NumPending == n })
}

// cxWaitMsgs polls the stream until it holds n messages.
func cxWaitMsgs(t testing.TB, s jetstream.Stream, n uint64) {
	t.Helper()
	waitFor(t, cxWait, fmt.Sprintf("stream %s to hold %d messages", s.CachedInfo().Config.Name, n), func() bool {
		return streamInfo(t, s).State.Msgs == n
	})
}

// cxAdvisory waits for the next advisory on sub and decodes it.
func cxAdvisory(t testing.TB, sub *nats.Subscription) map[string]any {
	t.Helper()
	m, err := sub.NextMsg(cxWait)
	if err != nil {
		t.Fatalf("no advisory on %s: %v", sub.Subject, err)
	}
	var adv map[string]any
	if err := json.Unmarshal(m.Data, &adv); err != nil {
		t.Fatalf("advisory on %s is not JSON: %q", m.Subject, m.Data)
	}
	adv["$subject"] = m.Subject
	return adv
}

// cxCreateBody is a CreateConsumerRequest body for raw API requests.
func cxCreateBody(stream, action, config string) string {
	if action == "" {
		return fmt.Sprintf(`{"stream_name":%q,"config":%s}`, stream, config)
	}
	return fmt.Sprintf(`{"stream_name":%q,"config":%s,"action":%q}`, stream, config, action)
}

// cxAPIErr sends a raw API request and checks the type and the error
// object of the reply (desc "" skips the description, a trailing "*"
// matches a prefix). Unlike apiErr it does not insist that the reply
// carries nothing else: nats-server leaves zeroed success fields in some
// consumer error replies (names/list paging and "consumers":[], pause's
// "paused":false), which clients ignore.
func cxAPIErr(t testing.TB, nc *nats.Conn, subj, body, typ string, code, errCode int, desc string) {
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
	if m["type"] != "io.nats.jetstream.api.v1."+typ {
		t.Errorf("%s: type %v, want %s", subj, m["type"], typ)
	}
}

// ---------------------------------------------------------------------------
// create, info, list, delete, pause

func TestConsumerCreateDurable(t *testing.T) {
	u := startJS(t)
	nc, js := jsConnect(t, u)
	createStream(t, js, ordersConfig(nil))
	cxPubN(t, js, "events.orders.%d", 3)
	adv := subSync(t, nc, "$JS.EVENT.ADVISORY.CONSUMER.>")
	flush(t, nc)

	before := time.Now().Add(-time.Second)
	c := cxCreate(t, js, "ORDERS", jetstream.ConsumerConfig{Durable: "proc", AckPolicy: jetstream.AckExplicitPolicy})
	info := c.CachedInfo()
	if info.Stream != "ORDERS" || info.Name != "proc" {
		t.Errorf("created consumer %s on %s, want proc on ORDERS", info.Name, info.Stream)
	}
	want := jetstream.ConsumerConfig{
		Name:          "proc",
		Durable:       "proc",
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       30 * time.Second,
		MaxDeliver:    -1,
		ReplayPolicy:  jetstream.ReplayInstantPolicy,
		MaxWaiting:    512,
		MaxAckPending: 1000,
	}
	got := info.Config
	got.Metadata = nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("created config:\n got %+v\nwant %+v", got, want)
	}
	if len(userMetadata(info.Config.Metadata)) != 0 {
		t.Errorf("metadata has non-reserved keys: %v", info.Config.Metadata)
	}
	if info.Created.Before(before) || info.Created.After(time.Now().Add(time.Second)) {
		t.Errorf("created = %v, want about now", info.Created)
	}
	cxCounts(t, info, 3, 0, 0, 0)
	cxSeqInfo(t, "delivered", info.Delivered, 0, 0)
	cxSeqInfo(t, "ack_floor", info.AckFloor, 0, 0)
	if info.Delivered.Last != nil || info.AckFloor.Last != nil {
		t.Errorf("fresh consumer has last_active: delivered %v ack_floor %v", info.Delivered.Last, info.AckFloor.Last)
	}
	if info.PushBound || info.Paused {
		t.Errorf("fresh pull consumer: push_bound %v paused %v", info.PushBound, info.Paused)
	}

	// The create advisory.
	a := cxAdvisory(t, adv)
	if a["$subject"] != "$JS.EVENT.ADVISORY.CONSUMER.CREATED.ORDERS.proc" || a["type"] != "io.nats.jetstream.advisory.v1.consumer_action" ||
		a["stream"] != "ORDERS" || a["consumer"] != "proc" || a["action"] != "create" {
		t.Errorf("create advisory: %v", a)
	}

	// Info by name, through nats.go and raw.
	c2, err := js.Consumer(tctx(t), "ORDERS", "proc")
	if err != nil {
		t.Fatalf("Consumer(proc): %v", err)
	}
	if i2 := c2.CachedInfo(); !reflect.DeepEqual(i2.Config, info.Config) || !i2.Created.Equal(info.Created) {
		t.Errorf("info by name: %+v, want config %+v created %v", i2, info.Config, info.Created)
	}
	m := apiOK(t, nc, "$JS.API.CONSUMER.INFO.ORDERS.proc", "", "consumer_info_response")
	for _, k := range []string{"stream_name", "name", "created", "config", "delivered", "ack_floor", "num_ack_pending",
		"num_redelivered", "num_waiting", "num_pending", "ts"} {
		if _, ok := m[k]; !ok {
			t.Errorf("consumer info lacks %q: %v", k, m)
		}
	}
	for _, k := range []string{"push_bound", "paused", "pause_remaining", "error"} {
		if _, ok := m[k]; ok {
			t.Errorf("consumer info carries %q: %v", k, m)
		}
	}
	cfg := jsonObj(m, "config")
	for _, k := range []string{"durable_name", "name", "deliver_policy", "ack_policy", "ack_wait", "max_deliver",
		"replay_policy", "max_waiting", "max_ack_pending", "num_replicas"} {
		if _, ok := cfg[k]; !ok {
			t.Errorf("consumer config lacks %q: %v", k, cfg)
		}
	}
	for _, k := range []string{"filter_subject", "filter_subjects", "deliver_subject", "opt_start_seq", "opt_start_time",
		"backoff", "headers_only", "idle_heartbeat", "flow_control", "inactive_threshold", "description", "pause_until"} {
		if _, ok := cfg[k]; ok {
			t.Errorf("consumer config carries %q although it was not set: %v", k, cfg)
		}
	}
	if cfg["deliver_policy"] != "all" || cfg["ack_policy"] != "explicit" || cfg["replay_policy"] != "instant" {
		t.Errorf("enum spellings: %v", cfg)
	}
	dl := jsonObj(m, "delivered")
	if dl["consumer_seq"] != float64(0) || dl["stream_seq"] != float64(0) {
		t.Errorf("delivered: %v", dl)
	}
	if _, ok := dl["last_active"]; ok {
		t.Errorf("delivered of a fresh consumer has last_active: %v", dl)
	}

	// The legacy DURABLE.CREATE subject creates a durable too.
	m = apiOK(t, nc, "$JS.API.CONSUMER.DURABLE.CREATE.ORDERS.legacy",
		cxCreateBody("ORDERS", "", `{"durable_name":"legacy","ack_policy":"explicit"}`), "consumer_create_response")
	if m["name"] != "legacy" || jsonObj(m, "config")["durable_name"] != "legacy" || m["num_pending"] != float64(3) {
		t.Errorf("DURABLE.CREATE response: %v", m)
	}
	// The stream counts its consumers.
	if n := streamInfo(t, cxStreamByName(t, js, "ORDERS")).State.Consumers; n != 2 {
		t.Errorf("stream state consumer_count = %d, want 2", n)
	}
}

// cxStreamByName looks a stream up by name.
func cxStreamByName(t testing.TB, js jetstream.JetStream, name string) jetstream.Stream {
	t.Helper()
	s, err := js.Stream(tctx(t), name)
	if err != nil {
		t.Fatalf("Stream(%s): %v", name, err)
	}
	return s
}

func TestConsumerCreateEphemeral(t *testing.T) {
	t.Parallel()
	u := startJS(t)
	nc, js := jsConnect(t, u)
	createStream(t, js, ordersConfig(nil))
	cxPubN(t, js, "events.orders.x", 2)

	// CONSUMER.CREATE.<S> without a name: the server names it (8
	// characters) and gives it the ephemeral inactivity threshold of 5s.
	m := apiOK(t, nc, "$JS.API.CONSUMER.CREATE.ORDERS", cxCreateBody("ORDERS", "", `{"ack_policy":"explicit"}`), "consumer_create_response")
	name, _ := m["name"].(string)
	if !regexp.MustCompile(`^[A-Za-z0-9]{8}$`).MatchString(name) {
		t.Errorf("generated consumer name %q, want 8 alphanumerics", name)
	}
	cfg := jsonObj(m, "config")
	// nats-server leaves config.name out for a name it generated (the
	// name is only at the top level); echoing it would be harmless.
	if n, ok := cfg["name"]; ok && n != name {
		t.Errorf("config.name %v, want absent or %q", n, name)
	}
	if cfg["durable_name"] != nil || cfg["inactive_threshold"] != float64(5*time.Second) {
		t.Errorf("ephemeral config: %v", cfg)
	}
	if m["num_pending"] != float64(2) {
		t.Errorf("num_pending %v, want 2", m["num_pending"])
	}
	apiOK(t, nc, "$JS.API.CONSUMER.INFO.ORDERS."+name, "", "consumer_info_response")

	// A named ephemeral through nats.go.
	c := cxCreate(t, js, "ORDERS", jetstream.ConsumerConfig{Name: "eph", AckPolicy: jetstream.AckExplicitPolicy})
	info := c.CachedInfo()
	if info.Name != "eph" || info.Config.Durable != "" || info.Config.InactiveThreshold != 5*time.Second {
		t.Errorf("named ephemeral: name %q durable %q inactive_threshold %v", info.Name, info.Config.Durable, info.Config.InactiveThreshold)
	}
	msgs := cxFetch(t, c, 2, time.Second)
	if got := cxBodies(msgs); !reflect.DeepEqual(got, []string{"m1", "m2"}) {
		t.Errorf("ephemeral fetched %v", got)
	}

	// An ephemeral with a short inactive_threshold disappears once nobody
	// pulls from it.
	start := time.Now()
	cxCreate(t, js, "ORDERS", jetstream.ConsumerConfig{Name: "short", InactiveThreshold: 300 * time.Millisecond})
	waitFor(t, 5*time.Second, "the idle ephemeral to be deleted", func() bool {
		_, err := js.Consumer(tctx(t), "ORDERS", "short")
		return errors.Is(err, jetstream.ErrConsumerNotFound)
	})
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Errorf("ephemeral deleted after %v, before its inactive_threshold of 300ms", d)
	}
	// A durable with the same threshold is removed too (the threshold
	// applies to durables when set).
	cxCreate(t, js, "ORDERS", jetstream.ConsumerConfig{Durable: "idle", InactiveThreshold: 300 * time.Millisecond})
	waitFor(t, 5*time.Second, "the idle durable to be deleted", func() bool {
		_, err := js.Consumer(tctx(t), "ORDERS", "idle")
		return errors.Is(err, jetstream.ErrConsumerNotFound)
	})
	// eph has the default threshold of 5s and was used a moment ago.
	if _, err := js.Consumer(tctx(t), "ORDERS", "eph"); err != nil {
		t.Errorf("named ephemeral gone early: %v", err)
	}
}

func TestConsumerCreateFilters(t *testing.T) {
	u := startJS(t)
	nc, js := jsConnect(t, u)
	createStream(t, js, ordersConfig(nil))
	for _, s := range []string{"a", "b", "a", "c", "b", "a"} {
		jsPublish(t, js, "events.orders."+s, s)
	}

	// One filter: nats.go uses CONSUMER.CREATE.<S>.<C>.<filter>.
	ca := cxCreate(t, js, "ORDERS", jetstream.ConsumerConfig{Durable: "fa", FilterSubject: "events.orders.a"})
	if info := ca.CachedInfo(); info.Config.FilterSubject != "events.orders.a" || info.NumPending != 3 {
		t.Errorf("filtered consumer: filter %q num_pending %d, want events.orders.a 3", info.Config.FilterSubject, info.NumPending)
	}
	msgs := cxFetch(t, ca, 3, time.Second)
	if got := cxSeqs(t, msgs); !reflect.DeepEqual(got, []uint64{1, 3, 6}) {
		t.Errorf("filter a delivered sequences %v, want [1 3 6]", got)
	}
	for i, m := range msgs {
		if m.Subject() != "events.orders.a" {
			t.Errorf("message %d subject %q", i, m.Subject())
		}
		if md := cxMeta(t, m); md.Sequence.Consumer != uint64(i+1) || md.NumPending != uint64(2-i) {
			t.Errorf("message %d: consumer seq %d pending %d, want %d %d", i, md.Sequence.Consumer, md.NumPending, i+1, 2-i)
		}
	}

	// Several filters: echoed back, pending counted over all of them.
	cm := cxCreate(t, js, "ORDERS", jetstream.ConsumerConfig{Durable: "fm", FilterSubjects: []string{"events.orders.b", "events.orders.c"}})
	if info := cm.CachedInfo(); !reflect.DeepEqual(info.Config.FilterSubjects, []string{"events.orders.b", "events.orders.c"}) ||
		info.Config.FilterSubject != "" || info.NumPending != 3 {
		t.Errorf("multi-filter consumer: filters %v/%q num_pending %d", info.Config.FilterSubjects, info.Config.FilterSubject, info.NumPending)
	}
	if got := cxSeqs(t, cxFetch(t, cm, 3, time.Second)); !reflect.DeepEqual(got, []uint64{2, 4, 5}) {
		t.Errorf("filters b,c delivered sequences %v, want [2 4 5]", got)
	}
	// A wildcard filter.
	cw := cxCreate(t, js, "ORDERS", jetstream.ConsumerConfig{Durable: "fw", FilterSubject: "events.*.c"})
	if info := cw.CachedInfo(); info.NumPending != 1 {
		t.Errorf("wildcard filter num_pending %d, want 1", info.NumPending)
	}
	// A filter that matches nothing in the stream is allowed.
	cn := cxCreate(t, js, "ORDERS", jetstream.ConsumerConfig{Durable: "fn", FilterSubject: "events.orders.none"})
	if info := cn.CachedInfo(); info.NumPending != 0 {
		t.Errorf("empty filter num_pending %d", info.NumPending)
	}
	// New messages are counted per filter.
	jsPublish(t, js, "events.orders.c", "c2")
	cxWaitPending(t, cm, 1)
	if info := cxInfo(t, ca); info.NumPending != 0 {
		t.Errorf("filter a num_pending after a c publish: %d, want 0", info.NumPending)
	}

	// The raw subject forms and their errors.
	m := apiOK(t, nc, "$JS.API.CONSUMER.CREATE.ORDERS.raw.events.orders.*",
		cxCreateBody("ORDERS", "", `{"name":"raw","filter_subject":"events.orders.*","ack_policy":"explicit"}`), "consumer_create_response")
	if jsonObj(m, "config")["filter_subject"] != "events.orders.*" || m["num_pending"] != float64(7) {
		t.Errorf("raw filtered create: %v", m)
	}
	apiErr(t, nc, "$JS.API.CONSUMER.CREATE.ORDERS.raw2.events.orders.x",
		cxCreateBody("ORDERS", "", `{"filter_subject":"events.orders.y","ack_policy":"explicit"}`),
		"consumer_create_response", 400, 10131, "Consumer create request did not match filtered subject from create subject")
	apiErr(t, nc, "$JS.API.CONSUMER.CREATE.ORDERS.raw3.events.orders.x",
		cxCreateBody("ORDERS", "", `{"filter_subjects":["events.orders.x","events.orders.y"],"ack_policy":"explicit"}`),
		"consumer_create_response", 400, 10137, "consumer with multiple subject filters cannot use subject based API")
	apiErr(t, nc, "$JS.API.CONSUMER.CREATE.ORDERS.raw4",
		cxCreateBody("ORDERS", "", `{"filter_subject":"events.orders.x","filter_subjects":["events.orders.y"],"ack_policy":"explicit"}`),
		"consumer_create_response", 400, 10136, "consumer cannot have both FilterSubject and FilterSubjects specified")
	apiErr(t, nc, "$JS.API.CONSUMER.CREATE.ORDERS.raw5",
		cxCreateBody("ORDERS", "", `{"filter_subjects":["events.orders.*","events.orders.a"],"ack_policy":"explicit"}`),
		"consumer_create_response", 400, 10138, "consumer subject filters cannot overlap")
	apiErr(t, nc, "$JS.API.CONSUMER.CREATE.ORDERS.raw6",
		cxCreateBody("ORDERS", "", `{"filter_subjects":["events.orders.a",""],"ack_policy":"explicit"}`),
		"consumer_create_response", 400, 10139, "consumer filter in FilterSubjects cannot be empty")

	// nats.go maps the filter errors to typed errors.
	_, err := js.CreateConsumer(tctx(t), "ORDERS", jetstream.ConsumerConfig{Durable: "bad", FilterSubjects: []string{"events.>", "events.orders.a"}})
	if !errors.Is(err, jetstream.ErrOverlappingFilterSubjects) {
		t.Errorf("overlapping filters through nats.go: %v, want ErrOverlappingFilterSubjects", err)
	}
	_, err = js.CreateConsumer(tctx(t), "ORDERS", jetstream.ConsumerConfig{Durable: "bad", FilterSubject: "a", FilterSubjects: []string{"b"}})
	if !errors.Is(err, jetstream.ErrDuplicateFilterSubjects) {
		t.Errorf("filter_subject and filter_subjects through nats.go: %v, want ErrDuplicateFilterSubjects", err)
	}
}

func TestConsumerCreateAction(t *testing.T) {
	u := startJS(t)
	nc, js := jsConnect(t, u)
	createStream(t, js, ordersConfig(nil))
	cfg := jetstream.ConsumerConfig{Durable: "act", AckPolicy: jetstream.AckExplicitPolicy, Description: "first"}
	c1 := cxCreate(t, js, "ORDERS", cfg)

	// action "create" with an identical config is idempotent: the same
	// consumer comes back.
	c2, err := js.CreateConsumer(tctx(t), "ORDERS", cfg)
	if err != nil {
		t.Fatalf("identical re-create: %v", err)
	}
	if !c2.CachedInfo().Created.Equal(c1.CachedInfo().Created) {
		t.Errorf("re-create made a new consumer: created %v, was %v", c2.CachedInfo().Created, c1.CachedInfo().Created)
	}
	// With the defaults spelled out it is still identical.
	full := cfg
	full.AckWait = 30 * time.Second
	full.MaxDeliver = -1
	full.MaxWaiting = 512
	full.MaxAckPending = 1000
	if _, err := js.CreateConsumer(tctx(t), "ORDERS", full); err != nil {
		t.Errorf("re-create with explicit defaults: %v", err)
	}
	// A different config: 10148.
	other := cfg
	other.Description = "second"
	_, err = js.CreateConsumer(tctx(t), "ORDERS", other)
	if !errors.Is(err, jetstream.ErrConsumerExists) {
		t.Errorf("create with another config: %v, want ErrConsumerExists", err)
	}
	wantAPIError(t, err, 400, 10148, "consumer already exists")
	apiErr(t, nc, "$JS.API.CONSUMER.CREATE.ORDERS.act",
		cxCreateBody("ORDERS", "create", `{"durable_name":"act","ack_policy":"explicit","description":"third"}`),
		"consumer_create_response", 400, 10148, "consumer already exists")

	// action "update" of a missing consumer: 10149.
	_, err = js.UpdateConsumer(tctx(t), "ORDERS", jetstream.ConsumerConfig{Durable: "missing", AckPolicy: jetstream.AckExplicitPolicy})
	if !errors.Is(err, jetstream.ErrConsumerDoesNotExist) {
		t.Errorf("update of a missing consumer: %v, want ErrConsumerDoesNotExist", err)
	}
	wantAPIError(t, err, 400, 10149, "consumer does not exist")
	if _, err := js.Consumer(tctx(t), "ORDERS", "missing"); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Errorf("update-only created the consumer: %v", err)
	}

	// action "update" changes what may change.
	upd := cfg
	upd.Description = "updated"
	upd.AckWait = 5 * time.Second
	upd.MaxAckPending = 7
	upd.MaxDeliver = 4
	upd.Metadata = map[string]string{"k": "v"}
	c3, err := js.UpdateConsumer(tctx(t), "ORDERS", upd)
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	i3 := c3.CachedInfo()
	if i3.Config.Description != "updated" || i3.Config.AckWait != 5*time.Second || i3.Config.MaxAckPending != 7 ||
		i3.Config.MaxDeliver != 4 || userMetadata(i3.Config.Metadata)["k"] != "v" {
		t.Errorf("updated config: %+v", i3.Config)
	}
	if !i3.Created.Equal(c1.CachedInfo().Created) {
		t.Errorf("update made a new consumer")
	}
	// create-or-update (action "") updates too.
	upd.Description = "upserted"
	c4, err := js.CreateOrUpdateConsumer(tctx(t), "ORDERS", upd)
	if err != nil || c4.CachedInfo().Config.Description != "upserted" {
		t.Fatalf("create-or-update of an existing consumer: %v", err)
	}
	// ... and creates when missing.
	if _, err := js.CreateOrUpdateConsumer(tctx(t), "ORDERS", jetstream.ConsumerConfig{Durable: "upsert-new"}); err != nil {
		t.Errorf("create-or-update of a new consumer: %v", err)
	}

	// What may not change: 10012 with the reason.
	bad := upd
	bad.DeliverPolicy = jetstream.DeliverNewPolicy
	_, err = js.UpdateConsumer(tctx(t), "ORDERS", bad)
	wantAPIError(t, err, 500, 10012, "deliver policy can not be updated")
	bad = upd
	bad.AckPolicy = jetstream.AckAllPolicy
	_, err = js.UpdateConsumer(tctx(t), "ORDERS", bad)
	wantAPIError(t, err, 500, 10012, "ack policy can not be updated")
	bad = upd
	bad.DeliverSubject = "now.push"
	_, err = js.CreateOrUpdateConsumer(tctx(t), "ORDERS", bad)
	wantAPIError(t, err, 500, 10012, "can not update pull consumer to push based")
	if info := cxInfo(t, c1); info.Config.Description != "upserted" || info.Config.DeliverSubject != "" {
		t.Errorf("a refused update changed the consumer: %+v", info.Config)
	}
}

func TestConsumerCreateErrors(t *testing.T) {
	u := startJS(t)
	nc, js := jsConnect(t, u)
	createStream(t, js, ordersConfig(func(c *jetstream.StreamConfig) { c.MaxConsumers = 3 }))
	const typ = "consumer_create_response"

	// Unknown stream.
	_, err := js.CreateConsumer(tctx(t), "NOPE", jetstream.ConsumerConfig{Durable: "x"})
	if !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("create on a missing stream: %v, want ErrStreamNotFound", err)
	}
	apiErr(t, nc, "$JS.API.CONSUMER.CREATE.NOPE.x", cxCreateBody("NOPE", "", `{"durable_name":"x"}`), typ, 404, 10059, "stream not found")
	// Durable name in the body differs from the subject.
	apiErr(t, nc, "$JS.API.CONSUMER.CREATE.ORDERS.abc", cxCreateBody("ORDERS", "", `{"durable_name":"xyz"}`), typ,
		400, 10017, "consumer name in subject does not match durable name in request")
	apiErr(t, nc, "$JS.API.CONSUMER.DURABLE.CREATE.ORDERS.abc", cxCreateBody("ORDERS", "", `{"durable_name":"xyz"}`), typ,
		400, 10017, "consumer name in subject does not match durable name in request")
	// DURABLE.CREATE without a durable name.
	apiErr(t, nc, "$JS.API.CONSUMER.DURABLE.CREATE.ORDERS.abc", cxCreateBody("ORDERS", "", `{"ack_policy":"explicit"}`), typ,
		400, 10018, "consumer expected to be durable but a durable name was not set")
	// The ephemeral subject with a durable name.
	apiErr(t, nc, "$JS.API.CONSUMER.CREATE.ORDERS", cxCreateBody("ORDERS", "", `{"durable_name":"abc"}`), typ,
		400, 10020, "consumer expected to be ephemeral but a durable name was set in request")
	// stream_name differs from the subject.
	apiErr(t, nc, "$JS.API.CONSUMER.CREATE.ORDERS.abc", cxCreateBody("OTHER", "", `{"durable_name":"abc"}`), typ,
		400, 10056, "stream name in subject does not match request")
	// Deliver policy and start options disagree.
	apiErr(t, nc, "$JS.API.CONSUMER.CREATE.ORDERS.p1", cxCreateBody("ORDERS", "", `{"deliver_policy":"by_start_sequence"}`), typ,
		400, 10094, "consumer delivery policy is deliver by start sequence, but optional start sequence is not set")
	apiErr(t, nc, "$JS.API.CONSUMER.CREATE.ORDERS.p2", cxCreateBody("ORDERS", "", `{"deliver_policy":"all","opt_start_seq":3}`), typ,
		400, 10094, "consumer delivery policy is deliver all, but optional start sequence is also set")
	apiErr(t, nc, "$JS.API.CONSUMER.CREATE.ORDERS.p3", cxCreateBody("ORDERS", "", `{"deliver_policy":"by_start_time"}`), typ,
		400, 10094, "consumer delivery policy is deliver by start time, but optional start time is not set")
	apiErr(t, nc, "$JS.API.CONSUMER.CREATE.ORDERS.p4", cxCreateBody("ORDERS", "", `{"deliver_policy":"last_per_subject"}`), typ,
		400, 10094, "consumer delivery policy is deliver last per subject, but optional filter subject is not set")
	// Pull-only and push-only options.
	apiErr(t, nc, "$JS.API.CONSUMER.CREATE.ORDERS.h1", cxCreateBody("ORDERS", "", `{"idle_heartbeat":1000000000}`), typ,
		400, 10088, "consumer idle heartbeat requires a push based consumer")
	apiErr(t, nc, "$JS.API.CONSUMER.CREATE.ORDERS.h2", cxCreateBody("ORDERS", "", `{"flow_control":true}`), typ,
		400, 10089, "consumer flow control requires a push based consumer")
	apiErr(t, nc, "$JS.API.CONSUMER.CREATE.ORDERS.h3", cxCreateBody("ORDERS", "", `{"deliver_subject":"d.x","flow_control":true}`), typ,
		400, 10108, "consumer with flow control also needs heartbeats")
	apiErr(t, nc, "$JS.API.CONSUMER.CREATE.ORDERS.h4", cxCreateBody("ORDERS", "", `{"deliver_subject":"d.*"}`), typ,
		400, 10079, "consumer deliver subject has wildcards")
	apiErr(t, nc, "$JS.API.CONSUMER.CREATE.ORDERS.h5", cxCreateBody("ORDERS", "", `{"deliver_subject":"events.orders.x"}`), typ,
		400, 10081, "consumer deliver subject forms a cycle")
	apiErr(t, nc, "$JS.API.CONSUMER.CREATE.ORDERS.h6", cxCreateBody("ORDERS", "", `{"backoff":[1000000000,2000000000],"max_deliver":1}`), typ,
		400, 10116, "max deliver is required to be > length of backoff values")
	// Bad names.
	apiErr(t, nc, "$JS.API.CONSUMER.CREATE.ORDERS", cxCreateBody("ORDERS", "", `{"name":"a.b"}`), typ,
		500, 10052, `consumer name can not contain '.', '*', '>', '\', '/'`)
	// Bad JSON.
	apiErr(t, nc, "$JS.API.CONSUMER.CREATE.ORDERS.j1", `{"stream_name":"ORDERS","config":{"ack_policy":"sometimes"}}`, typ,
		400, 10025, "invalid JSON*")
	apiErr(t, nc, "$JS.API.CONSUMER.CREATE.ORDERS.j2", `{"stream_name":"ORDERS","config":{},"action":"upsert"}`, typ,
		400, 10025, "invalid JSON*")

	// Info/delete/names of a missing stream or consumer; bodies where
	// none is allowed.
	apiErr(t, nc, "$JS.API.CONSUMER.INFO.ORDERS.nope", "", "consumer_info_response", 404, 10014, "consumer not found")
	apiErr(t, nc, "$JS.API.CONSUMER.INFO.NOPE.x", "", "consumer_info_response", 404, 10059, "stream not found")
	apiErr(t, nc, "$JS.API.CONSUMER.DELETE.ORDERS.nope", "", "consumer_delete_response", 404, 10014, "consumer not found")
	apiErr(t, nc, "$JS.API.CONSUMER.DELETE.NOPE.x", "", "consumer_delete_response", 404, 10059, "stream not found")
	cxAPIErr(t, nc, "$JS.API.CONSUMER.NAMES.NOPE", "", "consumer_names_response", 404, 10059, "stream not found")
	cxAPIErr(t, nc, "$JS.API.CONSUMER.LIST.NOPE", "", "consumer_list_response", 404, 10059, "stream not found")
	cxCreate(t, js, "ORDERS", jetstream.ConsumerConfig{Durable: "real"})
	// An empty JSON object counts as empty; anything else is refused.
	apiOK(t, nc, "$JS.API.CONSUMER.INFO.ORDERS.real", "{}", "consumer_info_response")
	apiErr(t, nc, "$JS.API.CONSUMER.INFO.ORDERS.real", `{"x":1}`, "consumer_info_response", 400, 10038, "expected an empty request payload")
	apiErr(t, nc, "$JS.API.CONSUMER.DELETE.ORDERS.real", "junk", "consumer_delete_response", 400, 10038, "expected an empty request payload")
	if _, err := js.Consumer(tctx(t), "ORDERS", "nope"); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Errorf("Consumer(nope): %v, want ErrConsumerNotFound", err)
	}
	if err := js.DeleteConsumer(tctx(t), "ORDERS", "nope"); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Errorf("DeleteConsumer(nope): %v, want ErrConsumerNotFound", err)
	}

	// The stream's max_consumers (3): one exists, two more fit.
	cxCreate(t, js, "ORDERS", jetstream.ConsumerConfig{Durable: "two"})
	cxCreate(t, js, "ORDERS", jetstream.ConsumerConfig{Durable: "three"})
	_, err = js.CreateConsumer(tctx(t), "ORDERS", jetstream.ConsumerConfig{Durable: "four"})
	if !errors.Is(err, jetstream.ErrMaximumConsumersLimit) {
		t.Errorf("create beyond max_consumers: %v, want ErrMaximumConsumersLimit", err)
	}
	apiErr(t, nc, "$JS.API.CONSUMER.CREATE.ORDERS.four", cxCreateBody("ORDERS", "", `{"durable_name":"four"}`), typ,
		400, 10026, "maximum consumers limit reached")
	// Re-creating an existing one is still fine at the limit.
	if _, err := js.CreateConsumer(tctx(t), "ORDERS", jetstream.ConsumerConfig{Durable: "two"}); err != nil {
		t.Errorf("identical re-create at the consumer limit: %v", err)
	}
}

func TestConsumerListAndNames(t *testing.T) {
	u := startJS(t)
	nc, js := jsConnect(t, u)
	s := createStream(t, js, jetstream.StreamConfig{Name: "LIST", Subjects: []string{"list.>"}, Storage: jetstream.MemoryStorage})

	// No consumers yet.
	m := apiOK(t, nc, "$JS.API.CONSUMER.NAMES.LIST", "", "consumer_names_response")
	if m["total"] != float64(0) || m["offset"] != float64(0) || m["limit"] != float64(1024) {
		t.Errorf("empty names paging: %v", m)
	}
	if cs, ok := m["consumers"].([]any); !ok || len(cs) != 0 {
		t.Errorf("empty names: consumers = %#v, want []", m["consumers"])
	}
	m = apiOK(t, nc, "$JS.API.CONSUMER.LIST.LIST", "", "consumer_list_response")
	if m["total"] != float64(0) || m["limit"] != float64(256) {
		t.Errorf("empty list paging: %v", m)
	}
	if cs, ok := m["consumers"].([]any); !ok || len(cs) != 0 {
		t.Errorf("empty list: consumers = %#v, want []", m["consumers"])
	}

	// 260 consumers: more than one LIST page (256).
	const n = 260
	var want []string
	for i := n - 1; i >= 0; i-- { // created in reverse: the answers are sorted by name
		name := fmt.Sprintf("c%03d", i)
		apiOK(t, nc, "$JS.API.CONSUMER.CREATE.LIST."+name, cxCreateBody("LIST", "", fmt.Sprintf(`{"durable_name":%q}`, name)), "consumer_create_response")
		want = append(want, name)
	}
	sort.Strings(want)

	m = apiOK(t, nc, "$JS.API.CONSUMER.NAMES.LIST", "", "consumer_names_response")
	var names []string
	for _, v := range m["consumers"].([]any) {
		names = append(names, v.(string))
	}
	if m["total"] != float64(n) || m["offset"] != float64(0) || m["limit"] != float64(1024) || !reflect.DeepEqual(names, want) {
		t.Errorf("names: total %v offset %v limit %v, %d names (sorted: %v)", m["total"], m["offset"], m["limit"], len(names), sort.StringsAreSorted(names))
	}
	m = apiOK(t, nc, "$JS.API.CONSUMER.NAMES.LIST", `{"offset":250}`, "consumer_names_response")
	if cs := m["consumers"].([]any); m["total"] != float64(n) || m["offset"] != float64(250) || len(cs) != 10 || cs[0] != "c250" {
		t.Errorf("names from offset 250: total %v offset %v, %d names starting %v", m["total"], m["offset"], len(cs), cs[0])
	}

	m = apiOK(t, nc, "$JS.API.CONSUMER.LIST.LIST", "", "consumer_list_response")
	page, _ := m["consumers"].([]any)
	if m["total"] != float64(n) || m["offset"] != float64(0) || m["limit"] != float64(256) || len(page) != 256 {
		t.Fatalf("list first page: total %v offset %v limit %v, %d infos", m["total"], m["offset"], m["limit"], len(page))
	}
	for i, ci := range page {
		o := ci.(map[string]any)
		if o["name"] != want[i] || o["stream_name"] != "LIST" || jsonObj(o, "config")["durable_name"] != want[i] {
			t.Fatalf("list entry %d: %v, want %s", i, o, want[i])
		}
	}
	m = apiOK(t, nc, "$JS.API.CONSUMER.LIST.LIST", `{"offset":256}`, "consumer_list_response")
	if page, _ := m["consumers"].([]any); m["offset"] != float64(256) || len(page) != 4 || page[0].(map[string]any)["name"] != "c256" {
		t.Errorf("list second page: offset %v, %d infos", m["offset"], len(page))
	}
	// An offset beyond the end gives an empty page.
	m = apiOK(t, nc, "$JS.API.CONSUMER.NAMES.LIST", `{"offset":1000}`, "consumer_names_response")
	if cs, _ := m["consumers"].([]any); m["total"] != float64(n) || len(cs) != 0 {
		t.Errorf("names beyond the end: %v", m)
	}

	// nats.go pages through LIST and NAMES.
	var listed []string
	lister := s.ListConsumers(tctx(t))
	for ci := range lister.Info() {
		listed = append(listed, ci.Name)
	}
	if err := lister.Err(); err != nil {
		t.Fatalf("ListConsumers: %v", err)
	}
	sort.Strings(listed)
	if !reflect.DeepEqual(listed, want) {
		t.Errorf("ListConsumers returned %d consumers, want %d", len(listed), n)
	}
	var named []string
	nl := s.ConsumerNames(tctx(t))
	for name := range nl.Name() {
		named = append(named, name)
	}
	if err := nl.Err(); err != nil {
		t.Fatalf("ConsumerNames: %v", err)
	}
	sort.Strings(named)
	if !reflect.DeepEqual(named, want) {
		t.Errorf("ConsumerNames returned %d names, want %d", len(named), n)
	}
	if got := streamInfo(t, s).State.Consumers; got != n {
		t.Errorf("consumer_count %d, want %d", got, n)
	}
}

func TestConsumerDelete(t *testing.T) {
	u := startJS(t)
	nc, js := jsConnect(t, u)
	s := createStream(t, js, ordersConfig(nil))
	cxPubN(t, js, "events.orders.x", 2)
	cxCreate(t, js, "ORDERS", jetstream.ConsumerConfig{Durable: "gone"})
	cxCreate(t, js, "ORDERS", jetstream.ConsumerConfig{Durable: "stays"})
	adv := subSync(t, nc, "$JS.EVENT.ADVISORY.CONSUMER.DELETED.>")
	flush(t, nc)

	m := apiOK(t, nc, "$JS.API.CONSUMER.DELETE.ORDERS.gone", "", "consumer_delete_response")
	if m["success"] != true {
		t.Errorf("delete response: %v", m)
	}
	a := cxAdvisory(t, adv)
	if a["$subject"] != "$JS.EVENT.ADVISORY.CONSUMER.DELETED.ORDERS.gone" || a["action"] != "delete" ||
		a["type"] != "io.nats.jetstream.advisory.v1.consumer_action" || a["consumer"] != "gone" {
		t.Errorf("delete advisory: %v", a)
	}
	if _, err := js.Consumer(tctx(t), "ORDERS", "gone"); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Errorf("deleted consumer info: %v", err)
	}
	if err := js.DeleteConsumer(tctx(t), "ORDERS", "gone"); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Errorf("second delete: %v, want ErrConsumerNotFound", err)
	}
	// Nobody serves its pull subject any more: a pull request gets 503.
	if _, err := nc.Request("$JS.API.CONSUMER.MSG.NEXT.ORDERS.gone", nil, time.Second); !errors.Is(err, nats.ErrNoResponders) {
		t.Errorf("pull from a deleted consumer: %v, want no responders", err)
	}
	if n := streamInfo(t, s).State.Consumers; n != 1 {
		t.Errorf("consumer_count after delete %d, want 1", n)
	}
	// The name can be reused, and the new consumer starts afresh.
	c := cxCreate(t, js, "ORDERS", jetstream.ConsumerConfig{Durable: "gone"})
	if info := c.CachedInfo(); info.NumPending != 2 || info.Delivered.Consumer != 0 {
		t.Errorf("re-created consumer: %+v", info)
	}
	// Deleting the stream deletes its consumers.
	if err := js.DeleteStream(tctx(t), "ORDERS"); err != nil {
		t.Fatal(err)
	}
	createStream(t, js, ordersConfig(nil))
	if _, err := js.Consumer(tctx(t), "ORDERS", "stays"); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Errorf("consumer of a deleted and re-created stream: %v, want ErrConsumerNotFound", err)
	}
}

func TestConsumerPauseResume(t *testing.T) {
	t.Parallel()
	u := startJS(t)
	nc, js := jsConnect(t, u)
	createStream(t, js, ordersConfig(nil))
	cxPubN(t, js, "events.orders.x", 2)
	c := cxCreate(t, js, "ORDERS", jetstream.ConsumerConfig{Durable: "p"})
	adv := subSync(t, nc, "$JS.EVENT.ADVISORY.CONSUMER.PAUSE.ORDERS.p")
	flush(t, nc)

	until := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	resp, err := js.PauseConsumer(tctx(t), "ORDERS", "p", until)
	if err != nil {
		t.Fatalf("PauseConsumer: %v", err)
	}
	if !resp.Paused || !resp.PauseUntil.Equal(until) || resp.PauseRemaining < 59*time.Minute || resp.PauseRemaining > time.Hour {
		t.Errorf("pause response: %+v, want paused until %v", resp, until)
	}
	a := cxAdvisory(t, adv)
	if a["type"] != "io.nats.jetstream.advisory.v1.consumer_pause" || a["paused"] != true || a["consumer"] != "p" || a["stream"] != "ORDERS" {
		t.Errorf("pause advisory: %v", a)
	}
	info := cxInfo(t, c)
	if !info.Paused || info.PauseRemaining <= 0 || info.Config.PauseUntil == nil || !info.Config.PauseUntil.Equal(until) {
		t.Errorf("paused info: paused %v remaining %v pause_until %v", info.Paused, info.PauseRemaining, info.Config.PauseUntil)
	}
	// A paused consumer delivers nothing.
	if msgs := cxFetch(t, c, 2, 300*time.Millisecond); len(msgs) != 0 {
		t.Errorf("paused consumer delivered %v", cxBodies(msgs))
	}
	// An update does not unpause it.
	if _, err := js.UpdateConsumer(tctx(t), "ORDERS", jetstream.ConsumerConfig{Durable: "p", Description: "d"}); err != nil {
		t.Fatal(err)
	}
	if info := cxInfo(t, c); !info.Paused {
		t.Errorf("update unpaused the consumer")
	}

	resp, err = js.ResumeConsumer(tctx(t), "ORDERS", "p")
	if err != nil {
		t.Fatalf("ResumeConsumer: %v", err)
	}
	if resp.Paused || resp.PauseRemaining != 0 {
		t.Errorf("resume response: %+v", resp)
	}
	// The update above may have announced the (still) paused state again;
	// a resume advisory with paused:false follows.
	for a := cxAdvisory(t, adv); a["paused"] != false; a = cxAdvisory(t, adv) {
		if a["paused"] != true {
			t.Fatalf("pause advisory: %v", a)
		}
	}
	if info := cxInfo(t, c); info.Paused || info.PauseRemaining != 0 || info.Config.PauseUntil != nil {
		t.Errorf("resumed info: paused %v remaining %v pause_until %v", info.Paused, info.PauseRemaining, info.Config.PauseUntil)
	}
	if got := cxBodies(cxFetch(t, c, 2, time.Second)); !reflect.DeepEqual(got, []string{"m1", "m2"}) {
		t.Errorf("resumed consumer delivered %v", got)
	}

	// A pause in the past is a resume.
	resp, err = js.PauseConsumer(tctx(t), "ORDERS", "p", time.Now().Add(-time.Minute))
	if err != nil || resp.Paused {
		t.Errorf("pause in the past: %+v %v", resp, err)
	}
	// A short pause ends by itself; waiting pull requests are served then.
	jsPublish(t, js, "events.orders.x", "m3")
	start := time.Now()
	if _, err := js.PauseConsumer(tctx(t), "ORDERS", "p", time.Now().Add(400*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	msgs := cxFetch(t, c, 1, 3*time.Second)
	if len(msgs) != 1 || string(msgs[0].Data()) != "m3" {
		t.Fatalf("after a short pause: %v", cxBodies(msgs))
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("delivered %v after pausing for 400ms", d)
	}

	// A consumer created with pause_until in the future starts paused.
	future := time.Now().Add(time.Hour)
	c2 := cxCreate(t, js, "ORDERS", jetstream.ConsumerConfig{Durable: "born-paused", PauseUntil: &future})
	if info := c2.CachedInfo(); !info.Paused || info.PauseRemaining <= 0 {
		t.Errorf("created paused: paused %v remaining %v", info.Paused, info.PauseRemaining)
	}
	if msgs := cxNoWait(t, c2, 1); len(msgs) != 0 {
		t.Errorf("born-paused consumer delivered %v", cxBodies(msgs))
	}

	// Raw: the response shape, and errors.
	m := apiOK(t, nc, "$JS.API.CONSUMER.PAUSE.ORDERS.p", fmt.Sprintf(`{"pause_until":%q}`, until.Format(time.RFC3339Nano)), "consumer_pause_response")
	if m["paused"] != true || m["pause_until"] == nil || num(m["pause_remaining"]) <= 0 {
		t.Errorf("raw pause response: %v", m)
	}
	m = apiOK(t, nc, "$JS.API.CONSUMER.PAUSE.ORDERS.p", "", "consumer_pause_response")
	if _, ok := m["pause_remaining"]; m["paused"] != false || ok {
		t.Errorf("raw resume response: %v", m)
	}
	_, err = js.PauseConsumer(tctx(t), "ORDERS", "nope", until)
	if !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Errorf("pause of a missing consumer: %v, want ErrConsumerNotFound", err)
	}
	cxAPIErr(t, nc, "$JS.API.CONSUMER.PAUSE.ORDERS.nope", "", "consumer_pause_response", 404, 10014, "consumer not found")
	cxAPIErr(t, nc, "$JS.API.CONSUMER.PAUSE.NOPE.p", "", "consumer_pause_response", 404, 10059, "stream not found")
}

// ---------------------------------------------------------------------------
// pulling: Fetch, FetchNoWait, FetchBytes, Next, Consume, Messages

func TestConsumerFetch(t *testing.T) {
	u := startJS(t)
	_, js := jsConnect(t, u)
	createStream(t, js, ordersConfig(nil))
	cxPubN(t, js, "events.orders.%d", 10)
	c := cxCreate(t, js, "ORDERS", jetstream.ConsumerConfig{Durable: "f", AckPolicy: jetstream.AckExplicitPolicy})

	// A batch that is available returns at once, in order, with exact
	// metadata.
	start := time.Now()
	msgs := cxFetch(t, c, 4, 5*time.Second)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Fetch(4) of available messages took %v", d)
	}
	if got := cxBodies(msgs); !reflect.DeepEqual(got, []string{"m1", "m2", "m3", "m4"}) {
		t.Fatalf("Fetch(4) = %v", got)
	}
	for i, m := range msgs {
		md := cxMeta(t, m)
		if m.Subject() != fmt.Sprintf("events.orders.%d", i+1) || md.Sequence.Stream != uint64(i+1) ||
			md.Sequence.Consumer != uint64(i+1) || md.NumDelivered != 1 || md.NumPending != uint64(9-i) {
			t.Errorf("message %d: subject %s metadata %+v", i, m.Subject(), *md)
		}
		m.Ack()
	}
	// A larger batch than available: what there is, once the request
	// expires, without an error.
	start = time.Now()
	msgs = cxFetch(t, c, 10, 400*time.Millisecond)
	if got := cxBodies(msgs); !reflect.DeepEqual(got, []string{"m5", "m6", "m7", "m8", "m9", "m10"}) {
		t.Fatalf("Fetch(10) with 6 left = %v", got)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("Fetch(10) with 6 available returned after %v, before its expiry", d)
	}
	for _, m := range msgs {
		cxAckSync(t, m)
	}
	// Nothing left: an empty batch, no error.
	if msgs := cxFetch(t, c, 5, 300*time.Millisecond); len(msgs) != 0 {
		t.Errorf("Fetch with nothing pending = %v", cxBodies(msgs))
	}
	// FetchNoWait returns at once.
	start = time.Now()
	if msgs := cxNoWait(t, c, 5); len(msgs) != 0 {
		t.Errorf("FetchNoWait with nothing pending = %v", cxBodies(msgs))
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("FetchNoWait with nothing pending took %v", d)
	}
	cxPubN(t, js, "events.orders.new", 3)
	cxWaitPending(t, c, 3)
	start = time.Now()
	if got := cxBodies(cxNoWait(t, c, 5)); !reflect.DeepEqual(got, []string{"m1", "m2", "m3"}) {
		t.Errorf("FetchNoWait(5) with 3 pending = %v", got)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("FetchNoWait with 3 pending took %v", d)
	}
	// A waiting Fetch is served by a publish.
	done := make(chan []jetstream.Msg, 1)
	go func() {
		b, err := c.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			done <- nil
			return
		}
		var out []jetstream.Msg
		for m := range b.Messages() {
			out = append(out, m)
		}
		done <- out
	}()
	cxWaitInfo(t, c, "the fetch to wait", func(i *jetstream.ConsumerInfo) bool { return i.NumWaiting == 1 })
	jsPublish(t, js, "events.orders.late", "late")
	select {
	case got := <-done:
		if len(got) != 1 || string(got[0].Data()) != "late" {
			t.Errorf("waiting fetch got %v", cxBodies(got))
		}
	case <-time.After(cxWait):
		t.Fatal("waiting fetch not served by a publish")
	}

	// Next: one message, or ErrTimeout.
	jsPublish(t, js, "events.orders.next", "next")
	m, err := c.Next(jetstream.FetchMaxWait(2 * time.Second))
	if err != nil || string(m.Data()) != "next" {
		t.Fatalf("Next: %v %v", m, err)
	}
	if md := cxMeta(t, m); md.Sequence.Stream != 15 || md.NumPending != 0 {
		t.Errorf("Next metadata %+v", *md)
	}
	start = time.Now()
	if _, err := c.Next(jetstream.FetchMaxWait(300 * time.Millisecond)); !errors.Is(err, nats.ErrTimeout) {
		t.Errorf("Next with nothing pending: %v, want ErrTimeout", err)
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Errorf("Next with nothing pending returned after %v", d)
	}
}

func TestConsumerFetchBytes(t *testing.T) {
	u := startJS(t)
	_, js := jsConnect(t, u)
	createStream(t, js, ordersConfig(nil))
	payload := strings.Repeat("x", 100)
	for i := 0; i < 5; i++ {
		jsPublish(t, js, "events.orders.b", payload)
	}
	c := cxCreate(t, js, "ORDERS", jetstream.ConsumerConfig{Durable: "fb", AckPolicy: jetstream.AckNonePolicy})
	// Learn the size the server counts for one message: subject + reply +
	// payload (no headers here).
	probe := cxCreate(t, js, "ORDERS", jetstream.ConsumerConfig{Durable: "probe", AckPolicy: jetstream.AckNonePolicy})
	pm := cxFetch(t, probe, 1, time.Second)
	if len(pm) != 1 {
		t.Fatal("probe fetch got nothing")
	}
	size := len(pm[0].Subject()) + len(pm[0].Reply()) + len(pm[0].Data())

	// A budget of 2.5 messages: two fit, the third ends the request.
	b, err := c.FetchBytes(size*5/2, jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var got []jetstream.Msg
	for m := range b.Messages() {
		got = append(got, m)
	}
	if b.Error() != nil || len(got) != 2 {
		t.Errorf("FetchBytes(%d) with messages of %d bytes: %d messages, error %v; want 2, nil", size*5/2, size, len(got), b.Error())
	}
	// A budget too small for even one message delivers nothing.
	b, err = c.FetchBytes(size/2, jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	for m := range b.Messages() {
		got = append(got, m)
	}
	if len(got) != 0 {
		t.Errorf("FetchBytes(%d): %d messages", size/2, len(got))
	}
	// Fetch with FetchMaxBytes: whichever limit comes first.
	b, err = c.Fetch(10, jetstream.FetchMaxBytes(size*3/2), jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	for m := range b.Messages() {
		got = append(got, m)
	}
	if b.Error() != nil || len(got) != 1 {
		t.Errorf("Fetch(10, FetchMaxBytes(%d)): %d messages, error %v; want 1, nil", size*3/2, len(got), b.Error())
	}
	b, err = c.Fetch(2, jetstream.FetchMaxBytes(size*10), jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	for m := range b.Messages() {
		got = append(got, m)
	}
	if b.Error() != nil || len(got) != 2 {
		t.Errorf("Fetch(2, FetchMaxBytes(%d)): %d messages, error %v; want 2, nil", size*10, len(got), b.Error())
	}
	if info := cxInfo(t, c); info.NumPending != 0 || info.Delivered.Stream != 5 {
		t.Errorf("after fetching everything: num_pending %d delivered %+v", info.NumPending, info.Delivered)
	}
}

func TestConsumerConsume(t *testing.T) {
	u := startJS(t)
	nc, js := jsConnect(t, u)
	createStream(t, js, ordersConfig(nil))
	cxPubN(t, js, "events.orders.%d", 5)
	c := cxCreate(t, js, "ORDERS", jetstream.ConsumerConfig{Durable: "cons", AckPolicy: jetstream.AckExplicitPolicy})
	naked := subSync(t, nc, "$JS.EVENT.ADVISORY.CONSUMER.MSG_NAKED.ORDERS.cons")
	termed := subSync(t, nc, "$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.ORDERS.cons")
	flush(t, nc)

	type event struct {
		body      string
		delivered uint64
		cseq      uint64
		at        time.Time
	}
	var mu sync.Mutex
	var events []event
	var nakDelayAt time.Time
	cc, err := c.Consume(func(m jetstream.Msg) {
		md, err := m.Metadata()
		if err != nil {
			t.Errorf("metadata: %v", err)
			return
		}
		mu.Lock()
		events = append(events, event{string(m.Data()), md.NumDelivered, md.Sequence.Consumer, time.Now()})
		mu.Unlock()
		switch {
		case string(m.Data()) == "m2" && md.NumDelivered == 1:
			m.Nak()
		case string(m.Data()) == "m3" && md.NumDelivered == 1:
			mu.Lock()
			nakDelayAt = time.Now()
			mu.Unlock()
			m.NakWithDelay(400 * time.Millisecond)
		case string(m.Data()) == "m5":
			m.TermWithReason("unprocessable")
		case string(m.Data()) == "m4":
			// Work in progress, then the ack (see TestConsumerInProgress
			// for what +WPI does to the ack wait).
			if err := m.InProgress(); err != nil {
				t.Errorf("InProgress: %v", err)
			}
			m.Ack()
		default:
			m.Ack()
		}
	}, jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		t.Errorf("consume error: %v", err)
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Stop()

	waitFor(t, cxWait, "7 deliveries", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(events) >= 7
	})
	// No more: m5 was terminated, everything else acked.
	time.Sleep(200 * time.Millisecond)
	cc.Stop()
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 7 {
		t.Errorf("%d deliveries, want 7: %+v", len(events), events)
	}
	count := map[string][]uint64{}
	for i, e := range events {
		count[e.body] = append(count[e.body], e.delivered)
		if e.cseq != uint64(i+1) {
			t.Errorf("delivery %d has consumer sequence %d", i+1, e.cseq)
		}
	}
	want := map[string][]uint64{"m1": {1}, "m2": {1, 2}, "m3": {1, 2}, "m4": {1}, "m5": {1}}
	if !reflect.DeepEqual(count, want) {
		t.Errorf("deliveries per message (NumDelivered of each): %v, want %v", count, want)
	}
	for _, e := range events {
		if e.body == "m3" && e.delivered == 2 {
			if d := e.at.Sub(nakDelayAt); d < 350*time.Millisecond {
				t.Errorf("m3 redelivered %v after a NAK with a 400ms delay", d)
			}
		}
	}

	a := cxAdvisory(t, naked)
	if a["type"] != "io.nats.jetstream.advisory.v1.nak" || a["stream_seq"] != float64(2) || a["deliveries"] != float64(1) {
		t.Errorf("nak advisory: %v", a)
	}
	a = cxAdvisory(t, termed)
	if a["type"] != "io.nats.jetstream.advisory.v1.terminated" || a["stream_seq"] != float64(5) || a["reason"] != "unprocessable" ||
		a["stream"] != "ORDERS" || a["consumer"] != "cons" {
		t.Errorf("term advisory: %v", a)
	}

	info := cxWaitInfo(t, c, "all acked", func(i *jetstream.ConsumerInfo) bool { return i.NumAckPending == 0 })
	cxCounts(t, info, 0, 0, 0, info.NumWaiting)
	cxSeqInfo(t, "delivered", info.Delivered, 7, 5)
	cxSeqInfo(t, "ack_floor", info.AckFloor, 7, 5)
}

func TestConsumerInProgress(t *testing.T) {
	t.Parallel()
	u := startJS(t)
	_, js := jsConnect(t, u)
	createStream(t, js, ordersConfig(nil))
	jsPublish(t, js, "events.orders.1", "slow")
	c := cxCreate(t, js, "ORDERS", jetstream.ConsumerConfig{Durable: "wpi", AckWait: 500 * time.Millisecond})
	msgs := cxFetch(t, c, 1, time.Second)
	if len(msgs) != 1 {
		t.Fatal("nothing delivered")
	}
	// Keep working on it for twice the ack wait, reporting progress.
	for i := 0; i < 4; i++ {
		time.Sleep(250 * time.Millisecond)
		if err := msgs[0].InProgress(); err != nil {
			t.Fatal(err)
		}
	}
	if again := cxFetch(t, c, 1, 300*time.Millisecond); len(again) != 0 {
		t.Errorf("redelivered despite +WPI: NumDelivered %d", cxMeta(t, again[0]).NumDelivered)
	}
	cxAckSync(t, msgs[0])
	info := cxInfo(t, c)
	cxCounts(t, info, 0, 0, 0, 0)
	cxSeqInfo(t, "delivered", info.Delivered, 1, 1)
	// Without progress reports it is redelivered after the ack wait.
	jsPublish(t, js, "events.orders.2", "stalled")
	first := cxFetch(t, c, 1, time.Second)
	start := time.Now()
	again := cxFetch(t, c, 1, 2*time.Second)
	if len(first) != 1 || len(again) != 1 || string(again[0].Data()) != "stalled" || cxMeta(t, again[0]).NumDelivered != 2 {
		t.Fatalf("no redelivery after ack_wait: %v / %v", cxBodies(first), cxBodies(again))
	}
	if d := time.Since(start); d < 350*time.Millisecond {
		t.Errorf("redelivered %v after delivery, before the ack wait of 500ms", d)
	}
}

func TestConsumerMessages(t *testing.T) {
	u := startJS(t)
	_, js := jsConnect(t, u)
	createStream(t, js, ordersConfig(nil))
	cxPubN(t, js, "events.orders.%d", 5)
	c := cxCreate(t, js, "ORDERS", jetstream.ConsumerConfig{Durable: "it"})
	// nats.go v1.55.0 asks for more only when Next finds no pull request
	// in flight (fetchInProgress); when its pull goroutine is slow to clear
	// that after publishing (a loaded machine, -race), Next waits with
	// nothing requested until the heartbeat check fires. The check then
	// resets the iterator, which asks again, instead of failing Next (the
	// server's log showed it never received the missing request).
	it, err := c.Messages(jetstream.PullMaxMessages(2), jetstream.PullExpiry(5*time.Second),
		jetstream.PullHeartbeat(500*time.Millisecond), jetstream.WithMessagesErrOnMissingHeartbeat(false))
	if err != nil {
		t.Fatal(err)
	}
	defer it.Stop()
	var got []string
	for i := 0; i < 5; i++ {
		m, err := it.Next()
		if err != nil {
			t.Fatalf("Next %d: %v", i, err)
		}
		got = append(got, string(m.Data()))
		if err := m.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	cxPubN(t, js, "events.orders.more", 2)
	for i := 0; i < 2; i++ {
		m, err := it.Next()
		if err != nil {
			t.Fatalf("Next after publishing: %v", err)
		}
		got = append(got, string(m.Data()))
		cxAckSync(t, m)
	}
	if want := []string{"m1", "m2", "m3", "m4", "m5", "m1", "m2"}; !reflect.DeepEqual(got, want) {
		t.Errorf("iterated %v, want %v", got, want)
	}
	it.Stop()
	if _, err := it.Next(); !errors.Is(err, jetstream.ErrMsgIteratorClosed) {
		t.Errorf("Next after Stop: %v", err)
	}
	info := cxWaitInfo(t, c, "all acked", func(i *jetstream.ConsumerInfo) bool { return i.NumAckPending == 0 })
	cxSeqInfo(t, "ack_floor", info.AckFloor, 7, 7)
}

func TestConsumerOrdered(t *testing.T) {
	u := startJS(t)
	_, js := jsConnect(t, u)
	createStream(t, js, jetstream.StreamConfig{Name: "ORD", Subjects: []string{"ord.*"}})
	for i := 1; i <= 30; i++ {
		jsPublish(t, js, fmt.Sprintf("ord.%c", 'a'+i%3), strconv.Itoa(i))
	}

	// Everything, in stream order, through Fetch.
	oc, err := js.OrderedConsumer(tctx(t), "ORD", jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for len(seqs) < 30 {
		msgs := cxFetch(t, oc, min(7, 30-len(seqs)), time.Second)
		if len(msgs) == 0 {
			break
		}
		for _, m := range msgs {
			md := cxMeta(t, m)
			seqs = append(seqs, md.Sequence.Stream)
			if string(m.Data()) != strconv.Itoa(int(md.Sequence.Stream)) {
				t.Errorf("seq %d carries %q", md.Sequence.Stream, m.Data())
			}
		}
	}
	for i, s := range seqs {
		if s != uint64(i+1) {
			t.Fatalf("ordered fetch sequences %v", seqs)
		}
	}
	if len(seqs) != 30 {
		t.Fatalf("ordered fetch got %d messages", len(seqs))
	}
	// The server sees an ordinary consumer: ack none, in memory, R1.
	info := cxInfo(t, oc)
	if info.Config.AckPolicy != jetstream.AckNonePolicy || !info.Config.MemoryStorage || info.Config.Durable != "" {
		t.Errorf("ordered consumer config: %+v", info.Config)
	}
	cxCounts(t, info, 0, 0, 0, info.NumWaiting)
	// nats.go's ordered Fetch makes a new server consumer for each fetch,
	// starting after the last stream sequence it saw, so the consumer
	// sequences restart while the stream sequences continue.
	if info.Delivered.Stream != 30 || info.AckFloor.Stream != 30 || info.AckFloor.Consumer != info.Delivered.Consumer {
		t.Errorf("ordered consumer delivered %+v ack_floor %+v, want stream_seq 30 and ack floor = delivered", info.Delivered, info.AckFloor)
	}

	// A filtered ordered consumer through Consume survives the deletion
	// of its server-side consumer: it recreates it and continues from
	// where it was, without gaps or duplicates.
	oc2, err := js.OrderedConsumer(tctx(t), "ORD", jetstream.OrderedConsumerConfig{FilterSubjects: []string{"ord.a", "ord.b"}})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []uint64
	cc, err := oc2.Consume(func(m jetstream.Msg) {
		md, _ := m.Metadata()
		mu.Lock()
		got = append(got, md.Sequence.Stream)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Stop()
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(got) }
	waitFor(t, cxWait, "20 ordered deliveries", func() bool { return count() >= 20 })
	name := oc2.CachedInfo().Name
	if err := js.DeleteConsumer(tctx(t), "ORD", name); err != nil {
		t.Fatalf("delete the ordered consumer's server consumer %s: %v", name, err)
	}
	for i := 31; i <= 36; i++ {
		jsPublish(t, js, fmt.Sprintf("ord.%c", 'a'+i%3), strconv.Itoa(i))
	}
	waitFor(t, 10*time.Second, "24 ordered deliveries", func() bool { return count() >= 24 })
	time.Sleep(100 * time.Millisecond)
	cc.Stop()
	mu.Lock()
	defer mu.Unlock()
	var want []uint64
	for i := uint64(1); i <= 36; i++ {
		if i%3 != 2 { // ord.a and ord.b are i%3 == 0 and 1
			want = append(want, i)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("filtered ordered consumer delivered %v, want %v", got, want)
	}
}

// ---------------------------------------------------------------------------
// acks, redelivery and limits

func TestConsumerAckPolicies(t *testing.T) {
	u := startJS(t)
	nc, js := jsConnect(t, u)
	createStream(t, js, ordersConfig(nil))
	cxPubN(t, js, "events.orders.%d", 5)

	// none: nothing is pending after delivery; the ack floor follows.
	none := cxCreate(t, js, "ORDERS", jetstream.ConsumerConfig{Durable: "none", AckPolicy: jetstream.AckNonePolicy})
	if cfg := none.CachedInfo().Config; cfg.AckWait != 0 || cfg.MaxAckPending != 0 {
		// nats-server gives ack none no ack_wait and no max_ack_pending.
		t.Errorf("ack none config: ack_wait %v max_ack_pending %d", cfg.AckWait, cfg.MaxAckPending)
	}
	msgs := cxFetch(t, none, 5, time.Second)
	if len(msgs) != 5 {
		t.Fatalf("ack none fetched %d", len(msgs))
	}
	info := cxInfo(t, none)
	cxCounts(t, info, 0, 0, 0, 0)
	cxSeqInfo(t, "ack none delivered", info.Delivered, 5, 5)
	cxSeqInfo(t, "ack none ack_floor", info.AckFloor, 5, 5)
	// The ack reply is there anyway (metadata), but an ack gets no answer.
	if msgs[0].Reply() == "" {
		t.Errorf("ack none message without a reply subject")
	}
	// (nats-server does not even listen on the ack subjects of an ack none
	// consumer, so an ack sent as a request gets no-responders.)
	if _, err := nc.Request(msgs[0].Reply(), []byte("+ACK"), 300*time.Millisecond); !errors.Is(err, nats.ErrNoResponders) {
		t.Errorf("ack of an ack-none message: %v, want no responders", err)
	}

	// all: an ack covers everything up to it.
	all := cxCreate(t, js, "ORDERS", jetstream.ConsumerConfig{Durable: "all", AckPolicy: jetstream.AckAllPolicy})
	if cfg := all.CachedInfo().Config; cfg.AckWait != 30*time.Second || cfg.MaxAckPending != 1000 {
		t.Errorf("ack all config: ack_wait %v max_ack_pending %d", cfg.AckWait, cfg.MaxAckPending)
	}
	msgs = cxFetch(t, all, 5, time.Second)
	if len(msgs) != 5 {
		t.Fatalf("ack all fetched %d", len(msgs))
	}
	cxCounts(t, cxInfo(t, all), 0, 5, 0, 0)
	cxAckSync(t, msgs[2])
	info = cxInfo(t, all)
	cxCounts(t, info, 0, 2, 0, 0)
	cxSeqInfo(t, "ack all ack_floor", info.AckFloor, 3, 3)
	cxAckSync(t, msgs[4])
	info = cxInfo(t, all)
	cxCounts(t, info, 0, 0, 0, 0)
	cxSeqInfo(t, "ack all ack_floor", info.AckFloor, 5, 5)

	// explicit: each message on its own; the floor moves over contiguous
	// acks only.
	ex := cxCreate(t, js, "ORDERS", jetstream.ConsumerConfig{Durable: "explicit", AckPolicy: jetstream.AckExplicitPolicy})
	msgs = cxFetch(t, ex, 5, time.Second)
	if len(msgs) != 5 {
		t.Fatalf("explicit fetched %d", len(msgs))
	}
	cxAckSync(t, msgs[2])
	info = cxInfo(t, ex)
	cxCounts(t, info, 0, 4, 0, 0)
	cxSeqInfo(t, "explicit ack_floor", info.AckFloor, 0, 0)
	cxAckSync(t, msgs[0])
	cxSeqInfo(t, "explicit ack_floor", cxInfo(t, ex).AckFloor, 1, 1)
	cxAckSync(t, msgs[1])
	info = cxInfo(t, ex)
	cxCounts(t, info, 0, 2, 0, 0)
	cxSeqInfo(t, "explicit ack_floor", info.AckFloor, 3, 3)
	cxAckSync(t, msgs[4])
	cxAckSync(t, msgs[3])
	info = cxInfo(t, ex)
	cxCounts(t, info, 0, 0, 0, 0)
	cxSeqInfo(t, "explicit ack_floor", info.AckFloor, 5, 5)
	if info.AckFloor.Last == nil || info.Delivered.Last == nil {
		t.Errorf("last_active not set after delivery and acks: delivered %v ack_floor %v", info.Delivered.Last, info.AckFloor.Last)
	}
}

func TestConsumerDoubleAck(t *testing.T) {
	u := startJS(t)
	nc, js := jsConnect(t, u)
	createStream(t, js, ordersConfig(nil))
	cxPubN(t, js, "events.orders.%d", 3)
	c := cxCreate(t, js, "ORDERS", jetstream.ConsumerConfig{Durable: "dbl"})
	msgs := cxFetch(t, c, 3, time.Second)
	if len(msgs) != 3 {
		t.Fatalf("fetched %d", len(msgs))
	}
	// AckSync: the server answers with an empty message once it has
	// processed the ack.
	if err := msgs[0].DoubleAck(tctx(t)); err != nil {
		t.Fatalf("DoubleAck: %v", err)
	}
	reply, err := nc.Request(msgs[1].Reply(), []byte("+ACK"), time.Second)
	if err != nil || len(reply.Data) != 0 || len(reply.Header) != 0 {
		t.Fatalf("ack with a reply subject: %v %+v", err, reply)
	}
	// Acking an already acked message changes nothing and is answered.
	reply, err = nc.Request(msgs[1].Reply(), []byte("+ACK"), time.Second)
	if err != nil || len(reply.Data) != 0 {
		t.Errorf("second ack of the same message: %v", err)
	}
	// An empty payload is an ack too; so are -NAK, +WPI and +TERM with a
	// reply subject.
	if _, err := nc.Request(msgs[2].Reply(), []byte("+WPI"), time.Second); err != nil {
		t.Errorf("+WPI with a reply subject: %v", err)
	}
	if _, err := nc.Request(msgs[2].Reply(), nil, time.Second); err != nil {
		t.Errorf("empty ack with a reply subject: %v", err)
	}
	info := cxInfo(t, c)
	cxCounts(t, info, 0, 0, 0, 0)
	cxSeqInfo(t, "ack_floor", info.AckFloor, 3, 3)
	jsPublish(t, js, "events.orders.4", "m4")
	m := cxFetch(t, c, 1, time.Second)
	if len(m) != 1 {
		t.Fatal("nothing fetched")
	}
	if _, err := nc.Request(m[0].Reply(), []byte("-NAK"), time.Second); err != nil {
		t.Errorf("-NAK with a reply subject: %v", err)
	}
	m = cxFetch(t, c, 1, time.Second)
	if len(m) != 1 || cxMeta(t, m[0]).NumDelivered != 2 {
		t.Fatalf("not redelivered after -NAK: %v", cxBodies(m))
	}
	if _, err := nc.Request(m[0].Reply(), []byte("+TERM"), time.Second); err != nil {
		t.Errorf("+TERM with a reply subject: %v", err)
	}
	if m := cxFetch(t, c, 1, 300*time.Millisecond); len(m) != 0 {
		t.Errorf("redelivered after +TERM")
	}
	cxCounts(t, cxInfo(t, c), 0, 0, 0, 0)
	// nats.go refuses a second ack of the same message on its side.
	if err := msgs[0].DoubleAck(tctx(t)); !errors.Is(err, jetstream.ErrMsgAlreadyAckd) {
		t.Errorf("DoubleAck of an acked message: %v, want ErrMsgAlreadyAckd", err)
	}
}

func TestConsumerAckWaitRedelivery(t *testing.T) {
	t.Parallel()
	u := startJS(t)
	_, js := jsConnect(t, u)
	createStream(t, js, ordersConfig(nil))
	cxPubN(t, js, "events.orders.%d", 2)
	c := cxCreate(t, js, "ORDERS", jetstream.ConsumerConfig{Durable: "aw", AckWait: 500 * time.Millisecond})
	if c.CachedInfo().Config.AckWait != 500*time.Millisecond {
		t.Errorf("ack_wait %v", c.CachedInfo().Config.AckWait)
	}
	first := cxFetch(t, c, 2, time.Second)
	if len(first) != 2 {
		t.Fatalf("fetched %d", len(first))
	}
	delivered := time.Now()
	cxAckSync(t, first[1])
	info := cxInfo(t, c)
	cxCounts(t, info, 0, 1, 0, 0)

	// m1 is not acked: it comes back after the ack wait, with a new
	// consumer sequence and NumDelivered 2.
	again := cxFetch(t, c, 1, 3*time.Second)
	if len(again) != 1 {
		t.Fatal("not redelivered")
	}
	if d := time.Since(delivered); d < 400*time.Millisecond {
		t.Errorf("redelivered after %v, before the ack wait of 500ms", d)
	}
	md := cxMeta(t, again[0])
	if string(again[0].Data()) != "m1" || md.NumDelivered != 2 || md.Sequence.Stream != 1 || md.Sequence.Consumer != 3 || md.NumPending != 0 {
		t.Errorf("redelivery: %q metadata %+v", again[0].Data(), *md)
	}
	info = cxInfo(t, c)
	cxCounts(t, info, 0, 1, 1, 0)
	cxSeqInfo(t, "delivered", info.Delivered, 3, 2)
	cxSeqInfo(t, "ack_floor", info.AckFloor, 0, 0)
	// Acking the first delivery's reply acks the message too.
	cxAckSync(t, first[0])
	info = cxInfo(t, c)
	cxCounts(t, info, 0, 0, 0, 0)
	cxSeqInfo(t, "ack_floor", info.AckFloor, 3, 2)
}

func TestConsumerBackoff(t *testing.T) {
	t.Parallel()
	u := startJS(t)
	nc, js := jsConnect(t, u)
	createStream(t, js, ordersConfig(nil))
	jsPublish(t, js, "events.orders.1", "retry")
	c := cxCreate(t, js, "ORDERS", jetstream.ConsumerConfig{
		Durable: "bo", MaxDeliver: 3, BackOff: []time.Duration{200 * time.Millisecond, 700 * time.Millisecond},
	})
	if cfg := c.CachedInfo().Config; cfg.AckWait != 200*time.Millisecond ||
		!reflect.DeepEqual(cfg.BackOff, []time.Duration{200 * time.Millisecond, 700 * time.Millisecond}) {
		t.Errorf("backoff config: ack_wait %v backoff %v, want ack_wait = backoff[0]", cfg.AckWait, cfg.BackOff)
	}
	maxd := subSync(t, nc, "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.ORDERS.bo")
	flush(t, nc)
	var at []time.Time
	for i := 1; i <= 3; i++ {
		msgs := cxFetch(t, c, 1, 3*time.Second)
		if len(msgs) != 1 {
			t.Fatalf("delivery %d missing", i)
		}
		at = append(at, time.Now())
		if md := cxMeta(t, msgs[0]); md.NumDelivered != uint64(i) {
			t.Errorf("delivery %d has NumDelivered %d", i, md.NumDelivered)
		}
	}
	if d := at[1].Sub(at[0]); d < 150*time.Millisecond || d > 650*time.Millisecond {
		t.Errorf("second delivery %v after the first, want about 200ms (backoff[0])", d)
	}
	if d := at[2].Sub(at[1]); d < 600*time.Millisecond {
		t.Errorf("third delivery %v after the second, want about 700ms (backoff[1])", d)
	}
	// max_deliver 3: no fourth delivery, an advisory instead.
	if msgs := cxFetch(t, c, 1, time.Second); len(msgs) != 0 {
		t.Errorf("delivered a 4th time with max_deliver 3")
	}
	a := cxAdvisory(t, maxd)
	if a["type"] != "io.nats.jetstream.advisory.v1.max_deliver" || a["stream_seq"] != float64(1) || a["deliveries"] != float64(3) {
		t.Errorf("max deliveries advisory: %v", a)
	}
	// Backoff longer than max_deliver is refused.
	_, err := js.CreateConsumer(tctx(t), "ORDERS", jetstream.ConsumerConfig{
		Durable: "bo2", MaxDeliver: 1, BackOff: []time.Duration{time.Second, 2 * time.Second},
	})
	wantAPIError(t, err, 400, 10116, "max deliver is required to be > length of backoff values")
}

func TestConsumerMaxDeliver(t *testing.T) {
	t.Parallel()
	u := startJS(t)
	nc, js := jsConnect(t, u)
	s := createStream(t, js, ordersConfig(nil))
	jsPublish(t, js, "events.orders.1", "poison")
	c := cxCreate(t, js, "ORDERS", jetstream.ConsumerConfig{Durable: "md", MaxDeliver: 2, AckWait: 300 * time.Millisecond})
	if c.CachedInfo().Config.MaxDeliver != 2 {
		t.Errorf("max_deliver %d", c.CachedInfo().Config.MaxDeliver)
	}
	adv := subSync(t, nc, "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.ORDERS.md")
	flush(t, nc)

	d1 := cxFetch(t, c, 1, time.Second)
	d2 := cxFetch(t, c, 1, 2*time.Second)
	if len(d1) != 1 || len(d2) != 1 || cxMeta(t, d2[0]).NumDelivered != 2 {
		t.Fatalf("deliveries: %v %v", cxBodies(d1), cxBodies(d2))
	}
	// After the second ack wait: no third delivery, and the advisory.
	// (nats-server notices the exhausted message when the consumer next
	// looks for something to deliver, i.e. with a pull request waiting;
	// until then it still counts as ack pending.)
	if msgs := cxFetch(t, c, 1, time.Second); len(msgs) != 0 {
		t.Errorf("delivered a third time with max_deliver 2: NumDelivered %d", cxMeta(t, msgs[0]).NumDelivered)
	}
	a := cxAdvisory(t, adv)
	if a["$subject"] != "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.ORDERS.md" || a["type"] != "io.nats.jetstream.advisory.v1.max_deliver" ||
		a["stream"] != "ORDERS" || a["consumer"] != "md" || a["stream_seq"] != float64(1) || a["deliveries"] != float64(2) {
		t.Errorf("max deliveries advisory: %v", a)
	}
	// It is no longer pending, but num_redelivered counts it, and the
	// ack floor stays below it.
	info := cxInfo(t, c)
	cxCounts(t, info, 0, 0, 1, 0)
	cxSeqInfo(t, "delivered", info.Delivered, 2, 1)
	cxSeqInfo(t, "ack floor", info.AckFloor, 0, 0)
	// The message stays in the stream, and the consumer goes on with the
	// next one.
	if n := streamInfo(t, s).State.Msgs; n != 1 {
		t.Errorf("stream holds %d messages, want 1", n)
	}
	jsPublish(t, js, "events.orders.2", "fine")
	msgs := cxFetch(t, c, 1, time.Second)
	if len(msgs) != 1 || string(msgs[0].Data()) != "fine" {
		t.Fatalf("next message: %v", cxBodies(msgs))
	}
	cxAckSync(t, msgs[0])
	// A NAK on the last allowed delivery ends it the same way.
	jsPublish(t, js, "events.orders.3", "naked")
	for i := 1; i <= 2; i++ {
		msgs := cxFetch(t, c, 1, time.Second)
		if len(msgs) != 1 || cxMeta(t, msgs[0]).NumDelivered != uint64(i) {
			t.Fatalf("nak round %d: %v", i, cxBodies(msgs))
		}
		msgs[0].Nak()
	}
	if msgs := cxFetch(t, c, 1, 300*time.Millisecond); len(msgs) != 0 {
		t.Errorf("delivered a third time after NAKs")
	}
	a = cxAdvisory(t, adv)
	if a["stream_seq"] != float64(3) || a["deliveries"] != float64(2) {
		t.Errorf("max deliveries advisory after NAKs: %v", a)
	}
	info = cxInfo(t, c)
	cxCounts(t, info, 0, 0, 2, 0)
}

func TestConsumerMaxAckPending(t *testing.T) {
	t.Parallel()
	u := startJS(t)
	_, js := jsConnect(t, u)
	createStream(t, js, ordersConfig(nil))
	cxPubN(t, js, "events.orders.%d", 5)
	c := cxCreate(t, js, "ORDERS", jetstream.ConsumerConfig{Durable: "map", MaxAckPending: 2})
	msgs := cxFetch(t, c, 5, 300*time.Millisecond)
	if got := cxBodies(msgs); !reflect.DeepEqual(got, []string{"m1", "m2"}) {
		t.Fatalf("with max_ack_pending 2, fetched %v", got)
	}
	info := cxInfo(t, c)
	cxCounts(t, info, 3, 2, 0, 0)
	// Still blocked without acks.
	if more := cxFetch(t, c, 5, 300*time.Millisecond); len(more) != 0 {
		t.Errorf("delivered beyond max_ack_pending: %v", cxBodies(more))
	}
	cxAckSync(t, msgs[0])
	more := cxFetch(t, c, 5, 300*time.Millisecond)
	if got := cxBodies(more); !reflect.DeepEqual(got, []string{"m3"}) {
		t.Errorf("after one ack, fetched %v, want [m3]", got)
	}
	// A waiting request is served as soon as acks make room.
	done := make(chan []string, 1)
	go func() {
		b, err := c.Fetch(2, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			done <- nil
			return
		}
		var got []string
		for m := range b.Messages() {
			got = append(got, string(m.Data()))
		}
		done <- got
	}()
	cxWaitInfo(t, c, "the fetch to wait", func(i *jetstream.ConsumerInfo) bool { return i.NumWaiting == 1 })
	cxAckSync(t, msgs[1])
	cxAckSync(t, more[0])
	select {
	case got := <-done:
		if !reflect.DeepEqual(got, []string{"m4", "m5"}) {
			t.Errorf("waiting fetch got %v, want [m4 m5]", got)
		}
	case <-time.After(cxWait):
		t.Fatal("acks did not unblock delivery")
	}
	// -1 is unlimited.
	u2 := cxCreate(t, js, "ORDERS", jetstream.ConsumerConfig{Durable: "unl", MaxAckPending: -1})
	if u2.CachedInfo().Config.MaxAckPending != -1 {
		t.Errorf("max_ack_pending -1 became %d", u2.CachedInfo().Config.MaxAckPending)
	}
	if n := len(cxFetch(t, u2, 5, time.Second)); n != 5 {
		t.Errorf("unlimited consumer fetched %d", n)
	}
}

// ---------------------------------------------------------------------------
// where delivery starts, what is delivered

func TestConsumerDeliverPolicies(t *testing.T) {
	u := startJS(t)
	nc, js := jsConnect(t, u)
	s := createStream(t, js, jetstream.StreamConfig{Name: "DP", Subjects: []string{"dp.*"}})
	for i, subj := range []string{"dp.a", "dp.b", "dp.a", "dp.b", "dp.a"} {
		jsPublish(t, js, subj, fmt.Sprintf("%s-%d", subj, i+1))
		time.Sleep(2 * time.Millisecond) // distinct timestamps
	}
	m3, err := s.GetMsg(tctx(t), 3)
	if err != nil {
		t.Fatal(err)
	}
	start3 := m3.Time

	cases := []struct {
		name        string
		cfg         jetstream.ConsumerConfig
		pending     uint64
		deliveredSq uint64 // delivered.stream_seq of the fresh consumer
		seqs        []uint64
	}{
		{"all", jetstream.ConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy}, 5, 0, []uint64{1, 2, 3, 4, 5}},
		{"last", jetstream.ConsumerConfig{DeliverPolicy: jetstream.DeliverLastPolicy}, 1, 4, []uint64{5}},
		{"last-b", jetstream.ConsumerConfig{DeliverPolicy: jetstream.DeliverLastPolicy, FilterSubject: "dp.b"}, 1, 3, []uint64{4}},
		{"new", jetstream.ConsumerConfig{DeliverPolicy: jetstream.DeliverNewPolicy}, 0, 5, nil},
		{"seq", jetstream.ConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: 4}, 2, 3, []uint64{4, 5}},
		{"seq-b", jetstream.ConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: 3, FilterSubject: "dp.b"}, 1, 2, []uint64{4}},
		{"time", jetstream.ConsumerConfig{DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &start3}, 3, 2, []uint64{3, 4, 5}},
		{"lps", jetstream.ConsumerConfig{DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy, FilterSubject: "dp.*"}, 2, 3, []uint64{4, 5}},
		{"lps-a", jetstream.ConsumerConfig{DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy, FilterSubjects: []string{"dp.a"}}, 1, 4, []uint64{5}},
	}
	consumers := map[string]jetstream.Consumer{}
	for _, tc := range cases {
		cfg := tc.cfg
		cfg.Durable = tc.name
		cfg.AckPolicy = jetstream.AckExplicitPolicy
		c := cxCreate(t, js, "DP", cfg)
		consumers[tc.name] = c
		info := c.CachedInfo()
		if info.NumPending != tc.pending || info.Delivered.Stream != tc.deliveredSq || info.Delivered.Consumer != 0 {
			t.Errorf("%s: fresh num_pending %d delivered %+v, want %d and stream_seq %d", tc.name, info.NumPending, info.Delivered, tc.pending, tc.deliveredSq)
		}
		if info.Config.DeliverPolicy != tc.cfg.DeliverPolicy {
			t.Errorf("%s: deliver policy echoed as %v", tc.name, info.Config.DeliverPolicy)
		}
	}
	for _, tc := range cases {
		msgs := cxNoWait(t, consumers[tc.name], 10)
		got := cxSeqs(t, msgs)
		if !reflect.DeepEqual(got, tc.seqs) && !(len(got) == 0 && len(tc.seqs) == 0) {
			t.Errorf("%s: delivered sequences %v, want %v", tc.name, got, tc.seqs)
		}
		for i, m := range msgs {
			if md := cxMeta(t, m); md.NumPending != uint64(len(msgs)-1-i) {
				t.Errorf("%s: message %d (seq %d) pending %d, want %d", tc.name, i, md.Sequence.Stream, md.NumPending, len(msgs)-1-i)
			}
		}
	}
	// Everything continues with new messages.
	jsPublish(t, js, "dp.a", "dp.a-6")
	for _, tc := range cases {
		want := uint64(6)
		if tc.name == "last-b" || tc.name == "seq-b" {
			continue // filtered on dp.b
		}
		cxWaitPending(t, consumers[tc.name], 1)
		msgs := cxNoWait(t, consumers[tc.name], 10)
		if got := cxSeqs(t, msgs); len(got) != 1 || got[0] != want {
			t.Errorf("%s: after a publish delivered %v, want [6]", tc.name, got)
		}
	}
	// The start options echo in the raw config.
	m := apiOK(t, nc, "$JS.API.CONSUMER.INFO.DP.seq", "", "consumer_info_response")
	if cfg := jsonObj(m, "config"); cfg["deliver_policy"] != "by_start_sequence" || cfg["opt_start_seq"] != float64(4) {
		t.Errorf("by_start_sequence config: %v", cfg)
	}
	m = apiOK(t, nc, "$JS.API.CONSUMER.INFO.DP.time", "", "consumer_info_response")
	if cfg := jsonObj(m, "config"); cfg["deliver_policy"] != "by_start_time" || cfg["opt_start_time"] == nil {
		t.Errorf("by_start_time config: %v", cfg)
	}
	m = apiOK(t, nc, "$JS.API.CONSUMER.INFO.DP.lps", "", "consumer_info_response")
	if cfg := jsonObj(m, "config"); cfg["deliver_policy"] != "last_per_subject" {
		t.Errorf("last_per_subject config: %v", cfg)
	}
	// A start sequence beyond the end waits for that sequence.
	c := cxCreate(t, js, "DP", jetstream.ConsumerConfig{Durable: "future", DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: 8})
	if info := c.CachedInfo(); info.NumPending != 0 || info.Delivered.Stream != 7 {
		t.Errorf("start beyond the end: num_pending %d delivered %+v", info.NumPending, info.Delivered)
	}
	jsPublish(t, js, "dp.a", "7")
	jsPublish(t, js, "dp.a", "8")
	cxWaitPending(t, c, 1)
	if got := cxSeqs(t, cxNoWait(t, c, 10)); !reflect.DeepEqual(got, []uint64{8}) {
		t.Errorf("start at 8 delivered %v", got)
	}
	// A start sequence below the stream's first starts at the first, as
	// nats-server reports it (delivered and ack floor first-1).
	if err := s.Purge(tctx(t), jetstream.WithPurgeSequence(7)); err != nil {
		t.Fatal(err)
	}
	c = cxCreate(t, js, "DP", jetstream.ConsumerConfig{Durable: "gone", DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: 2, AckPolicy: jetstream.AckExplicitPolicy})
	if info := c.CachedInfo(); info.NumPending != 2 || info.Delivered.Stream != 6 || info.AckFloor.Stream != 6 {
		t.Errorf("start below the first sequence 7: num_pending %d delivered %+v ack floor %+v, want 2, stream 6, 6", info.NumPending, info.Delivered, info.AckFloor)
	}
}

func TestConsumerHeadersOnly(t *testing.T) {
	u := startJS(t)
	_, js := jsConnect(t, u)
	createStream(t, js, ordersConfig(nil))
	m := nats.NewMsg("events.orders.h")
	m.Header.Set("X-A", "1")
	m.Data = []byte("hello world")
	jsPublishMsg(t, js, m)
	jsPublish(t, js, "events.orders.p", "abc")
	jsPublish(t, js, "events.orders.e", "")

	c := cxCreate(t, js, "ORDERS", jetstream.ConsumerConfig{Durable: "ho", HeadersOnly: true})
	if !c.CachedInfo().Config.HeadersOnly {
		t.Errorf("headers_only not echoed")
	}
	msgs := cxFetch(t, c, 3, time.Second)
	if len(msgs) != 3 {
		t.Fatalf("fetched %d", len(msgs))
	}
	want := []struct {
		subj, size, xa string
	}{{"events.orders.h", "11", "1"}, {"events.orders.p", "3", ""}, {"events.orders.e", "0", ""}}
	for i, w := range want {
		got := msgs[i]
		if got.Subject() != w.subj || len(got.Data()) != 0 || got.Headers().Get("Nats-Msg-Size") != w.size || got.Headers().Get("X-A") != w.xa {
			t.Errorf("headers-only message %d: subject %s data %q headers %v, want %s Nats-Msg-Size %s X-A %q",
				i, got.Subject(), got.Data(), got.Headers(), w.subj, w.size, w.xa)
		}
		cxAckSync(t, got)
	}
	// A normal consumer gets the payload and no Nats-Msg-Size.
	full := cxCreate(t, js, "ORDERS", jetstream.ConsumerConfig{Durable: "full"})
	msgs = cxFetch(t, full, 1, time.Second)
	if len(msgs) != 1 || string(msgs[0].Data()) != "hello world" || msgs[0].Headers().Get("Nats-Msg-Size") != "" ||
		msgs[0].Headers().Get("X-A") != "1" {
		t.Errorf("normal delivery: %q %v", msgs[0].Data(), msgs[0].Headers())
	}
}

func TestConsumerMetadata(t *testing.T) {
	u := startJS(t)
	_, js := jsConnect(t, u)
	s := createStream(t, js, jetstream.StreamConfig{Name: "META", Subjects: []string{"meta.*"}})
	for _, subj := range []string{"meta.a", "meta.b", "meta.a", "meta.a", "meta.b"} {
		jsPublish(t, js, subj, subj)
	}
	c := cxCreate(t, js, "META", jetstream.ConsumerConfig{Durable: "md", FilterSubject: "meta.a"})
	msgs := cxFetch(t, c, 3, time.Second)
	if len(msgs) != 3 {
		t.Fatalf("fetched %d", len(msgs))
	}
	ackRe := regexp.MustCompile(`^\$JS\.ACK\.META\.md\.(\d+)\.(\d+)\.(\d+)\.(\d+)\.(\d+)$`)
	wantSeq := []uint64{1, 3, 4}
	for i, m := range msgs {
		md := cxMeta(t, m)
		stored, err := s.GetMsg(tctx(t), wantSeq[i])
		if err != nil {
			t.Fatal(err)
		}
		if md.Stream != "META" || md.Consumer != "md" || md.Domain != "" || md.Sequence.Stream != wantSeq[i] ||
			md.Sequence.Consumer != uint64(i+1) || md.NumDelivered != 1 || md.NumPending != uint64(2-i) ||
			!md.Timestamp.Equal(stored.Time) {
			t.Errorf("message %d metadata %+v, want stream seq %d consumer seq %d pending %d time %v",
				i, *md, wantSeq[i], i+1, 2-i, stored.Time)
		}
		// The reply subject: $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts ns>.<pending>
		sm := ackRe.FindStringSubmatch(m.Reply())
		if sm == nil {
			t.Fatalf("ack reply %q does not have the 9-token form", m.Reply())
		}
		if sm[1] != "1" || sm[2] != strconv.FormatUint(wantSeq[i], 10) || sm[3] != strconv.Itoa(i+1) ||
			sm[4] != strconv.FormatInt(stored.Time.UnixNano(), 10) || sm[5] != strconv.Itoa(2-i) {
			t.Errorf("ack reply %q", m.Reply())
		}
	}
	// A redelivery: delivered 2, a new consumer sequence; pending counts
	// only what was never delivered.
	msgs[1].Nak()
	again := cxFetch(t, c, 1, time.Second)
	if len(again) != 1 {
		t.Fatal("no redelivery")
	}
	if md := cxMeta(t, again[0]); md.Sequence.Stream != 3 || md.Sequence.Consumer != 4 || md.NumDelivered != 2 || md.NumPending != 0 {
		t.Errorf("redelivery metadata %+v", *md)
	}
	// Pending in the metadata tracks new publishes.
	jsPublish(t, js, "meta.a", "x")
	jsPublish(t, js, "meta.b", "y")
	jsPublish(t, js, "meta.a", "z")
	cxWaitPending(t, c, 2)
	msgs = cxFetch(t, c, 1, time.Second)
	if md := cxMeta(t, msgs[0]); md.Sequence.Stream != 6 || md.NumPending != 1 || md.Sequence.Consumer != 5 {
		t.Errorf("metadata after publishes %+v", *md)
	}
}

func TestConsumerInfoCounters(t *testing.T) {
	u := startJS(t)
	nc, js := jsConnect(t, u)
	createStream(t, js, ordersConfig(nil))
	cxPubN(t, js, "events.orders.%d", 6)
	c := cxCreate(t, js, "ORDERS", jetstream.ConsumerConfig{Durable: "cnt"})
	cxCounts(t, c.CachedInfo(), 6, 0, 0, 0)

	msgs := cxFetch(t, c, 4, time.Second)
	info := cxInfo(t, c)
	cxCounts(t, info, 2, 4, 0, 0)
	cxSeqInfo(t, "delivered", info.Delivered, 4, 4)
	cxSeqInfo(t, "ack_floor", info.AckFloor, 0, 0)
	if info.Delivered.Last == nil || time.Since(*info.Delivered.Last) > time.Minute || info.AckFloor.Last != nil {
		t.Errorf("last_active: delivered %v ack_floor %v", info.Delivered.Last, info.AckFloor.Last)
	}
	// NAK two: they are redelivered and count as redelivered while
	// pending.
	cxNakSync(t, nc, msgs[0])
	cxNakSync(t, nc, msgs[1])
	again := cxFetch(t, c, 2, time.Second)
	if got := cxSeqs(t, again); !reflect.DeepEqual(got, []uint64{1, 2}) {
		t.Fatalf("redelivered %v, want [1 2] (redeliveries come before new messages)", got)
	}
	info = cxInfo(t, c)
	cxCounts(t, info, 2, 4, 2, 0)
	cxSeqInfo(t, "delivered", info.Delivered, 6, 4)
	cxAckSync(t, again[0])
	cxAckSync(t, again[1])
	// The floor's consumer sequence stays below the oldest unacked
	// delivery (3, of stream seq 3).
	info = cxInfo(t, c)
	cxCounts(t, info, 2, 2, 0, 0)
	cxSeqInfo(t, "ack_floor", info.AckFloor, 2, 2)

	// Waiting pull requests.
	inbox := nats.NewInbox()
	sub := subSync(t, nc, inbox)
	req := `{"batch":5,"expires":3000000000}`
	for i := 0; i < 2; i++ {
		if err := nc.PublishRequest("$JS.API.CONSUMER.MSG.NEXT.ORDERS.cnt", inbox, []byte(req)); err != nil {
			t.Fatal(err)
		}
	}
	flush(t, nc)
	// The first request takes the two remaining messages and keeps
	// waiting for 3 more.
	for i := 0; i < 2; i++ {
		nextMsg(t, sub)
	}
	info = cxWaitInfo(t, c, "two waiting requests", func(i *jetstream.ConsumerInfo) bool { return i.NumWaiting == 2 })
	cxCounts(t, info, 0, 4, 0, 2)
	cxSeqInfo(t, "delivered", info.Delivered, 8, 6)
	// Publishing 8 messages: 3 to the first request, 5 to the second.
	cxPubN(t, js, "events.orders.more", 8)
	for i := 0; i < 8; i++ {
		m := nextMsg(t, sub)
		if m.Header.Get("Status") != "" {
			t.Fatalf("status %s %s while 8 messages were owed", m.Header.Get("Status"), m.Header.Get("Description"))
		}
	}
	info = cxWaitInfo(t, c, "no waiting requests", func(i *jetstream.ConsumerInfo) bool { return i.NumWaiting == 0 })
	cxCounts(t, info, 0, 12, 0, 0)
	cxSeqInfo(t, "delivered", info.Delivered, 16, 14)
}

// ---------------------------------------------------------------------------
// durability and retention

func TestConsumerRestart(t *testing.T) {
	t.Parallel()
	opts := jsIn(t.TempDir())
	u, stop := startServerStoppable(t, opts)
	nc, js := jsConnect(t, u)
	createStream(t, js, ordersConfig(nil))
	cxPubN(t, js, "events.orders.%d", 6)
	cfg := jetstream.ConsumerConfig{Durable: "keep", Description: "survives", AckWait: time.Second,
		FilterSubjects: []string{"events.orders.*"}, MaxDeliver: 5, Metadata: map[string]string{"k": "v"}}
	c := cxCreate(t, js, "ORDERS", cfg)
	cxCreate(t, js, "ORDERS", jetstream.ConsumerConfig{Durable: "all-acked", AckPolicy: jetstream.AckAllPolicy})
	msgs := cxFetch(t, c, 4, time.Second)
	if len(msgs) != 4 {
		t.Fatalf("fetched %d", len(msgs))
	}
	cxAckSync(t, msgs[0])
	cxAckSync(t, msgs[1])
	cxAckSync(t, msgs[3]) // 3 stays unacked
	before := cxInfo(t, c)
	cxCounts(t, before, 2, 1, 0, 0)
	cxSeqInfo(t, "delivered", before.Delivered, 4, 4)
	cxSeqInfo(t, "ack_floor", before.AckFloor, 2, 2)
	aa, err := js.Consumer(tctx(t), "ORDERS", "all-acked")
	if err != nil {
		t.Fatal(err)
	}
	all := cxFetch(t, aa, 6, time.Second)
	cxAckSync(t, all[5])
	nc.Close()
	stop()

	u2, _ := startServerStoppable(t, opts)
	_, js2 := jsConnect(t, u2)
	c2, err := js2.Consumer(tctx(t), "ORDERS", "keep")
	if err != nil {
		t.Fatalf("durable after restart: %v", err)
	}
	after := c2.CachedInfo()
	if !reflect.DeepEqual(after.Config, before.Config) || !after.Created.Equal(before.Created) {
		t.Errorf("after restart:\n config %+v created %v\nwant   %+v created %v", after.Config, after.Created, before.Config, before.Created)
	}
	cxCounts(t, after, 2, 1, 0, 0)
	cxSeqInfo(t, "delivered after restart", after.Delivered, 4, 4)
	cxSeqInfo(t, "ack_floor after restart", after.AckFloor, 2, 2)

	// The unacked message comes back (redelivered once its ack wait has
	// passed, so its place among the new ones depends on timing), the
	// new ones follow, the acked ones never come back.
	got := cxFetch(t, c2, 3, 5*time.Second)
	byStream := map[uint64]*jetstream.MsgMetadata{}
	var cseqs []uint64
	for _, m := range got {
		md := cxMeta(t, m)
		byStream[md.Sequence.Stream] = md
		cseqs = append(cseqs, md.Sequence.Consumer)
		cxAckSync(t, m)
	}
	if len(got) != 3 || byStream[3] == nil || byStream[5] == nil || byStream[6] == nil {
		t.Fatalf("after restart delivered %v, want 3, 5 and 6", cxSeqs(t, got))
	}
	if byStream[3].NumDelivered != 2 || byStream[5].NumDelivered != 1 || byStream[6].NumDelivered != 1 {
		t.Errorf("NumDelivered after restart: seq 3 %d, 5 %d, 6 %d; want 2 1 1",
			byStream[3].NumDelivered, byStream[5].NumDelivered, byStream[6].NumDelivered)
	}
	if !reflect.DeepEqual(cseqs, []uint64{5, 6, 7}) {
		t.Errorf("consumer sequences after restart %v, want [5 6 7]", cseqs)
	}
	if more := cxFetch(t, c2, 5, 300*time.Millisecond); len(more) != 0 {
		t.Errorf("delivered again after everything was acked: %v", cxSeqs(t, more))
	}
	info := cxInfo(t, c2)
	cxCounts(t, info, 0, 0, 0, 0)
	cxSeqInfo(t, "ack_floor", info.AckFloor, 7, 6)

	// The ack-all consumer kept its floor.
	aa2, err := js2.Consumer(tctx(t), "ORDERS", "all-acked")
	if err != nil {
		t.Fatal(err)
	}
	ai := aa2.CachedInfo()
	cxCounts(t, ai, 0, 0, 0, 0)
	cxSeqInfo(t, "ack-all floor after restart", ai.AckFloor, 6, 6)
	if more := cxNoWait(t, aa2, 5); len(more) != 0 {
		t.Errorf("ack-all consumer redelivered %v after restart", cxSeqs(t, more))
	}
}

func TestConsumerInterestRetention(t *testing.T) {
	u := startJS(t)
	_, js := jsConnect(t, u)
	s := createStream(t, js, jetstream.StreamConfig{Name: "INT", Subjects: []string{"int.>"}, Retention: jetstream.InterestPolicy})

	// Nobody interested: the message gets a sequence but is not kept.
	wantAck(t, jsPublish(t, js, "int.a", "lost"), "INT", 1, false)
	wantState(t, streamInfo(t, s).State, 0, 2, 1)

	ca := cxCreate(t, js, "INT", jetstream.ConsumerConfig{Durable: "A", FilterSubject: "int.>"})
	cb := cxCreate(t, js, "INT", jetstream.ConsumerConfig{Durable: "B", FilterSubject: "int.b"})
	jsPublish(t, js, "int.a", "a2") // 2: only A
	jsPublish(t, js, "int.b", "b3") // 3: A and B
	cxWaitMsgs(t, s, 2)

	am := cxFetch(t, ca, 2, time.Second)
	if len(am) != 2 {
		t.Fatalf("A fetched %d", len(am))
	}
	cxAckSync(t, am[0])
	cxAckSync(t, am[1])
	// int.a is gone (A was its only consumer); int.b waits for B.
	cxWaitMsgs(t, s, 1)
	if _, err := s.GetMsg(tctx(t), 2); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Errorf("seq 2 after its only consumer acked: %v", err)
	}
	bm := cxFetch(t, cb, 1, time.Second)
	if len(bm) != 1 || string(bm[0].Data()) != "b3" {
		t.Fatalf("B fetched %v", cxBodies(bm))
	}
	// A NAK or an unacked delivery keeps it.
	bm[0].Nak()
	bm = cxFetch(t, cb, 1, time.Second)
	if len(bm) != 1 {
		t.Fatal("no redelivery to B")
	}
	if n := streamInfo(t, s).State.Msgs; n != 1 {
		t.Errorf("stream holds %d after a NAK, want 1", n)
	}
	cxAckSync(t, bm[0])
	cxWaitMsgs(t, s, 0)

	// Both interested; A acks; deleting B removes what only B still
	// needed.
	jsPublish(t, js, "int.b", "b4")
	jsPublish(t, js, "int.b", "b5")
	am = cxFetch(t, ca, 2, time.Second)
	if len(am) != 2 {
		t.Fatalf("A fetched %d", len(am))
	}
	cxAckSync(t, am[0])
	cxAckSync(t, am[1])
	if n := streamInfo(t, s).State.Msgs; n != 2 {
		t.Errorf("stream holds %d while B has not acked, want 2", n)
	}
	if err := js.DeleteConsumer(tctx(t), "INT", "B"); err != nil {
		t.Fatal(err)
	}
	cxWaitMsgs(t, s, 0)

	// Ack-none consumers: delivery is enough.
	cn := cxCreate(t, js, "INT", jetstream.ConsumerConfig{Durable: "N", AckPolicy: jetstream.AckNonePolicy, FilterSubject: "int.n"})
	jsPublish(t, js, "int.n", "n")
	msgs := cxFetch(t, ca, 1, time.Second)
	cxAckSync(t, msgs[0])
	if n := streamInfo(t, s).State.Msgs; n != 1 {
		t.Errorf("stream holds %d before the ack-none consumer got it, want 1", n)
	}
	if len(cxFetch(t, cn, 1, time.Second)) != 1 {
		t.Fatal("ack-none consumer got nothing")
	}
	cxWaitMsgs(t, s, 0)
}

// An interest stream drops what no consumer can want any more: at once
// when an update narrows a consumer's filter (as nats-server does). An
// ephemeral consumer of a file stream survives a restart with what it
// has yet to get (as in nats-server v2.15.2), and deleting it then drops
// what only it held.
func TestInterestRetentionAfterRefilterAndRestart(t *testing.T) {
	opts := jsIn(t.TempDir())
	u, stop := startServerStoppable(t, opts)
	nc, js := jsConnect(t, u)
	s := createStream(t, js, jetstream.StreamConfig{Name: "IF", Subjects: []string{"if.>"}, Retention: jetstream.InterestPolicy})
	cxCreate(t, js, "IF", jetstream.ConsumerConfig{Durable: "C", FilterSubject: "if.a"})
	for range 5 {
		jsPublish(t, js, "if.a", "x")
	}
	cxWaitMsgs(t, s, 5)
	if _, err := js.UpdateConsumer(tctx(t), "IF", jetstream.ConsumerConfig{Durable: "C", FilterSubject: "if.z", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	cxWaitMsgs(t, s, 0)

	eph, err := s.CreateOrUpdateConsumer(tctx(t), jetstream.ConsumerConfig{FilterSubject: "if.b", AckPolicy: jetstream.AckExplicitPolicy, InactiveThreshold: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	name := eph.CachedInfo().Name
	for range 3 {
		jsPublish(t, js, "if.b", "y")
	}
	cxWaitMsgs(t, s, 3)
	nc.Close()
	stop()
	u, _ = startServerStoppable(t, opts)
	_, js = jsConnect(t, u)
	s, err = js.Stream(tctx(t), "IF")
	if err != nil {
		t.Fatal(err)
	}
	if info := streamInfo(t, s); info.State.Msgs != 3 || info.State.Consumers != 2 {
		t.Fatalf("after the restart: %d messages, %d consumers; want 3 and both consumers", info.State.Msgs, info.State.Consumers)
	}
	if err := s.DeleteConsumer(tctx(t), name); err != nil {
		t.Fatal(err)
	}
	cxWaitMsgs(t, s, 0)
}

func TestConsumerWorkQueue(t *testing.T) {
	u := startJS(t)
	nc, js := jsConnect(t, u)
	s := createStream(t, js, jetstream.StreamConfig{Name: "WQ", Subjects: []string{"wq.>"}, Retention: jetstream.WorkQueuePolicy})
	const typ = "consumer_create_response"

	wa := cxCreate(t, js, "WQ", jetstream.ConsumerConfig{Durable: "wa", FilterSubject: "wq.a"})
	// Same filter, or one that overlaps: 10100.
	_, err := js.CreateConsumer(tctx(t), "WQ", jetstream.ConsumerConfig{Durable: "wa2", FilterSubject: "wq.a"})
	wantAPIError(t, err, 400, 10100, "filtered consumer not unique on workqueue stream")
	_, err = js.CreateConsumer(tctx(t), "WQ", jetstream.ConsumerConfig{Durable: "wstar", FilterSubject: "wq.*"})
	wantAPIError(t, err, 400, 10100, "filtered consumer not unique on workqueue stream")
	// An unfiltered consumer overlaps every filter. (nats-server answers
	// 10099 here, although the existing consumer is filtered.)
	_, err = js.CreateConsumer(tctx(t), "WQ", jetstream.ConsumerConfig{Durable: "wall"})
	wantAPIError(t, err, 400, 10099, "multiple non-filtered consumers not allowed on workqueue stream")
	// The same consumer again is fine, and so is a disjoint filter.
	if _, err := js.CreateConsumer(tctx(t), "WQ", jetstream.ConsumerConfig{Durable: "wa", FilterSubject: "wq.a"}); err != nil {
		t.Errorf("identical re-create on a workqueue: %v", err)
	}
	wb := cxCreate(t, js, "WQ", jetstream.ConsumerConfig{Durable: "wb", FilterSubjects: []string{"wq.b", "wq.c.>"}})

	// Ack and deliver policy rules.
	apiErr(t, nc, "$JS.API.CONSUMER.CREATE.WQ.none.wq.x", cxCreateBody("WQ", "", `{"durable_name":"none","filter_subject":"wq.x","ack_policy":"none"}`), typ,
		400, 10084, "consumer in pull mode requires explicit ack policy on workqueue stream")
	apiErr(t, nc, "$JS.API.CONSUMER.CREATE.WQ.all.wq.x", cxCreateBody("WQ", "", `{"durable_name":"all","filter_subject":"wq.x","ack_policy":"all"}`), typ,
		400, 10098, "workqueue stream requires explicit ack")
	apiErr(t, nc, "$JS.API.CONSUMER.CREATE.WQ.pnone.wq.x", cxCreateBody("WQ", "", `{"durable_name":"pnone","filter_subject":"wq.x","ack_policy":"none","deliver_subject":"d.pnone"}`), typ,
		400, 10098, "workqueue stream requires explicit ack")
	apiErr(t, nc, "$JS.API.CONSUMER.CREATE.WQ.last.wq.x", cxCreateBody("WQ", "", `{"durable_name":"last","filter_subject":"wq.x","ack_policy":"explicit","deliver_policy":"last"}`), typ,
		400, 10101, "consumer must be deliver all on workqueue stream")

	// Two unfiltered consumers: 10099.
	createStream(t, js, jetstream.StreamConfig{Name: "WQ2", Subjects: []string{"wq2.>"}, Retention: jetstream.WorkQueuePolicy})
	cxCreate(t, js, "WQ2", jetstream.ConsumerConfig{Durable: "first"})
	_, err = js.CreateConsumer(tctx(t), "WQ2", jetstream.ConsumerConfig{Durable: "second"})
	wantAPIError(t, err, 400, 10099, "multiple non-filtered consumers not allowed on workqueue stream")

	// Messages leave on ack.
	jsPublish(t, js, "wq.a", "a1")
	jsPublish(t, js, "wq.a", "a2")
	jsPublish(t, js, "wq.b", "b1")
	jsPublish(t, js, "wq.z", "nobody") // no consumer: it waits
	wantState(t, streamInfo(t, s).State, 4, 1, 4)
	msgs := cxFetch(t, wa, 2, time.Second)
	if got := cxBodies(msgs); !reflect.DeepEqual(got, []string{"a1", "a2"}) {
		t.Fatalf("wa fetched %v", got)
	}
	if n := streamInfo(t, s).State.Msgs; n != 4 {
		t.Errorf("delivery alone removed a message: %d left", n)
	}
	cxAckSync(t, msgs[1])
	cxWaitMsgs(t, s, 3)
	if _, err := s.GetMsg(tctx(t), 2); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Errorf("acked seq 2 still there: %v", err)
	}
	msgs[0].Term() // a terminated message leaves too
	cxWaitMsgs(t, s, 2)
	bm := cxFetch(t, wb, 1, time.Second)
	cxAckSync(t, bm[0])
	cxWaitMsgs(t, s, 1)
	wantState(t, streamInfo(t, s).State, 1, 4, 4)

	// Deleting a consumer frees its filter (the messages stay).
	jsPublish(t, js, "wq.a", "a3")
	if err := js.DeleteConsumer(tctx(t), "WQ", "wa"); err != nil {
		t.Fatal(err)
	}
	if n := streamInfo(t, s).State.Msgs; n != 2 {
		t.Errorf("after deleting the consumer %d messages, want 2", n)
	}
	wa2 := cxCreate(t, js, "WQ", jetstream.ConsumerConfig{Durable: "wa2", FilterSubject: "wq.a"})
	if got := cxBodies(cxFetch(t, wa2, 1, time.Second)); !reflect.DeepEqual(got, []string{"a3"}) {
		t.Errorf("new consumer on wq.a got %v", got)
	}
}

// ---------------------------------------------------------------------------
// push consumers

func TestConsumerPushLegacy(t *testing.T) {
	u := startJS(t)
	nc, js := jsConnect(t, u)
	createStream(t, js, jetstream.StreamConfig{Name: "PUSH", Subjects: []string{"push.>"}})
	cxPubN(t, js, "push.%d", 5)
	jsl, err := nc.JetStream()
	if err != nil {
		t.Fatal(err)
	}

	// A synchronous durable push subscription.
	sub, err := jsl.SubscribeSync("push.>", nats.Durable("sync"))
	if err != nil {
		t.Fatalf("SubscribeSync: %v", err)
	}
	for i := 1; i <= 5; i++ {
		m := nextMsg(t, sub)
		md, err := m.Metadata()
		if err != nil {
			t.Fatalf("legacy metadata: %v", err)
		}
		if m.Subject != fmt.Sprintf("push.%d", i) || string(m.Data) != fmt.Sprintf("m%d", i) || md.Stream != "PUSH" ||
			md.Consumer != "sync" || md.Sequence.Stream != uint64(i) || md.Sequence.Consumer != uint64(i) ||
			md.NumDelivered != 1 || md.NumPending != uint64(5-i) {
			t.Errorf("push delivery %d: %s %q %+v", i, m.Subject, m.Data, *md)
		}
		if i == 2 {
			if err := m.Nak(); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := m.AckSync(); err != nil {
			t.Fatalf("AckSync: %v", err)
		}
	}
	// The NAKed message comes back.
	m := nextMsg(t, sub)
	if md, _ := m.Metadata(); string(m.Data) != "m2" || md.NumDelivered != 2 || md.Sequence.Consumer != 6 {
		t.Errorf("redelivery after NAK: %q %+v", m.Data, md)
	}
	if err := m.AckSync(); err != nil {
		t.Fatal(err)
	}
	ci, err := sub.ConsumerInfo()
	if err != nil {
		t.Fatal(err)
	}
	if !ci.PushBound || ci.Config.DeliverSubject == "" || ci.Config.FilterSubject != "push.>" || ci.NumAckPending != 0 ||
		ci.Delivered.Consumer != 6 || ci.Delivered.Stream != 5 || ci.AckFloor.Stream != 5 {
		t.Errorf("push consumer info: %+v", ci)
	}
	// Live messages arrive as they are published.
	jsPublish(t, js, "push.live", "live")
	if m := nextMsg(t, sub); string(m.Data) != "live" {
		t.Errorf("live push delivery %q", m.Data)
	} else {
		m.AckSync()
	}
	if err := sub.Unsubscribe(); err != nil {
		t.Fatal(err)
	}

	// An asynchronous subscription starting with new messages.
	got := make(chan *nats.Msg, 10)
	asub, err := jsl.Subscribe("push.>", func(m *nats.Msg) { got <- m; m.Ack() }, nats.DeliverNew(), nats.ManualAck())
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	defer asub.Unsubscribe()
	jsPublish(t, js, "push.new", "new")
	select {
	case m := <-got:
		if string(m.Data) != "new" || m.Subject != "push.new" {
			t.Errorf("async push got %s %q", m.Subject, m.Data)
		}
	case <-time.After(cxWait):
		t.Fatal("async push subscription got nothing")
	}

	// A queue group shares the messages: each goes to exactly one member.
	var mu sync.Mutex
	seen := map[string]int{}
	members := map[int]int{}
	handler := func(member int) nats.MsgHandler {
		return func(m *nats.Msg) {
			mu.Lock()
			seen[string(m.Data)]++
			members[member]++
			mu.Unlock()
			m.Ack()
		}
	}
	q1, err := jsl.QueueSubscribe("push.q.*", "workers", handler(1), nats.Durable("q"), nats.ManualAck())
	if err != nil {
		t.Fatalf("QueueSubscribe: %v", err)
	}
	defer q1.Unsubscribe()
	q2, err := jsl.QueueSubscribe("push.q.*", "workers", handler(2), nats.Durable("q"), nats.ManualAck())
	if err != nil {
		t.Fatalf("second QueueSubscribe: %v", err)
	}
	defer q2.Unsubscribe()
	for i := 0; i < 40; i++ {
		jsPublish(t, js, fmt.Sprintf("push.q.%d", i), fmt.Sprintf("q%d", i))
	}
	waitFor(t, cxWait, "40 queue deliveries", func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) == 40 })
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	for k, n := range seen {
		if n != 1 {
			t.Errorf("%s delivered %d times to the queue group", k, n)
		}
	}
	if members[1] == 0 || members[2] == 0 {
		t.Errorf("queue members got %d and %d messages, want both some", members[1], members[2])
	}
	mu.Unlock()
	qi, err := q1.ConsumerInfo()
	if err != nil {
		t.Fatal(err)
	}
	if qi.Config.DeliverGroup != "workers" || !qi.PushBound {
		t.Errorf("queue consumer: deliver_group %q push_bound %v", qi.Config.DeliverGroup, qi.PushBound)
	}
}

func TestConsumerPushFlowControlLegacy(t *testing.T) {
	u := startJS(t)
	nc, js := jsConnect(t, u)
	createStream(t, js, jetstream.StreamConfig{Name: "BIG", Subjects: []string{"big.>"}})
	payload := strings.Repeat("z", 100*1024)
	const n = 40 // 4 MB: beyond the server's first flow-control window
	for i := 0; i < n; i++ {
		jsPublish(t, js, "big.x", payload)
	}
	jsl, err := nc.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	var count, bad int
	var mu sync.Mutex
	sub, err := jsl.Subscribe("big.>", func(m *nats.Msg) {
		mu.Lock()
		defer mu.Unlock()
		count++
		if md, err := m.Metadata(); err != nil || md.Sequence.Stream != uint64(count) || len(m.Data) != len(payload) {
			bad++
		}
	}, nats.IdleHeartbeat(200*time.Millisecond), nats.EnableFlowControl(), nats.AckNone())
	if err != nil {
		t.Fatalf("Subscribe with flow control: %v", err)
	}
	defer sub.Unsubscribe()
	sub.SetPendingLimits(-1, -1)
	waitFor(t, 10*time.Second, "all messages through flow control", func() bool { mu.Lock(); defer mu.Unlock(); return count == n })
	mu.Lock()
	if bad != 0 {
		t.Errorf("%d deliveries out of order or damaged", bad)
	}
	mu.Unlock()
	ci, err := sub.ConsumerInfo()
	if err != nil {
		t.Fatal(err)
	}
	if !ci.Config.FlowControl || ci.Config.Heartbeat != 200*time.Millisecond || ci.Delivered.Stream != n {
		t.Errorf("flow-controlled consumer: %+v", ci)
	}
	// Heartbeats keep coming while idle; nats.go consumes them silently
	// (a missed heartbeat would be reported as an async error).
	time.Sleep(500 * time.Millisecond)

	// The ordered push subscription (what KV watchers use): everything
	// in stream order, through an ephemeral flow-controlled consumer.
	osub, err := jsl.SubscribeSync("big.>", nats.OrderedConsumer())
	if err != nil {
		t.Fatalf("ordered SubscribeSync: %v", err)
	}
	defer osub.Unsubscribe()
	osub.SetPendingLimits(-1, -1)
	for i := 1; i <= n; i++ {
		m := nextMsg(t, osub)
		md, err := m.Metadata()
		if err != nil || md.Sequence.Stream != uint64(i) || md.Sequence.Consumer != uint64(i) || md.NumPending != uint64(n-i) {
			t.Fatalf("ordered delivery %d: %+v %v", i, md, err)
		}
	}
	oi, err := osub.ConsumerInfo()
	if err != nil {
		t.Fatal(err)
	}
	if oi.Config.AckPolicy != nats.AckNonePolicy || !oi.Config.FlowControl || oi.Config.Heartbeat <= 0 || !oi.Config.MemoryStorage ||
		oi.Config.Durable != "" || oi.Config.MaxDeliver != 1 {
		t.Errorf("ordered push consumer config: %+v", oi.Config)
	}
}

func TestConsumerPushRaw(t *testing.T) {
	u := startJS(t)
	nc, js := jsConnect(t, u)
	createStream(t, js, jetstream.StreamConfig{Name: "PR", Subjects: []string{"pr.>"}})
	jsPublish(t, js, "pr.one", "first")

	pc, err := js.CreatePushConsumer(tctx(t), "PR", jetstream.ConsumerConfig{
		Durable: "hb", DeliverSubject: "deliver.hb", IdleHeartbeat: 200 * time.Millisecond, AckPolicy: jetstream.AckExplicitPolicy,
	})
	if err != nil {
		t.Fatalf("CreatePushConsumer: %v", err)
	}
	if info := pc.CachedInfo(); info.PushBound || info.Config.DeliverSubject != "deliver.hb" || info.Config.MaxWaiting != 0 {
		t.Errorf("fresh push consumer: push_bound %v deliver_subject %q max_waiting %d", info.PushBound, info.Config.DeliverSubject, info.Config.MaxWaiting)
	}
	// Without interest nothing is delivered; with a subscriber it is bound
	// and delivers, with the stored subject on the MSG line.
	c := rawConnect(t, u, defaultConnect)
	c.send("SUB deliver.hb 1\r\n")
	f := cxRawFrame(c)
	if !regexp.MustCompile(`^MSG pr\.one 1 \$JS\.ACK\.PR\.hb\.1\.1\.1\.\d{19}\.0 5\r\nfirst\r\n$`).MatchString(f) {
		t.Errorf("push delivery frame %q", f)
	}
	waitFor(t, cxWait, "push_bound", func() bool {
		i, err := pc.Info(tctx(t))
		return err == nil && i.PushBound
	})
	// Idle: heartbeats to the deliver subject, naming the last delivery.
	hb := "HMSG deliver.hb 1 75 75\r\nNATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 1\r\nNats-Last-Stream: 1\r\n\r\n\r\n"
	if f := cxRawFrame(c); f != hb {
		t.Errorf("heartbeat frame %q, want %q", f, hb)
	}
	start := time.Now()
	if f := cxRawFrame(c); f != hb {
		t.Errorf("second heartbeat frame %q, want %q", f, hb)
	}
	if d := time.Since(start); d < 150*time.Millisecond || d > 2*time.Second {
		t.Errorf("heartbeats at 200ms came %v apart", d)
	}
	// Unacked: it is still pending; heartbeats continue after a new
	// delivery with the new sequences.
	jsPublish(t, js, "pr.two", "second")
	for {
		f := cxRawFrame(c)
		if strings.HasPrefix(f, "HMSG deliver.hb 1 75 75\r\nNATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 1\r\n") {
			continue // a heartbeat sent before the publish
		}
		if !regexp.MustCompile(`^MSG pr\.two 1 \$JS\.ACK\.PR\.hb\.1\.2\.2\.\d{19}\.0 6\r\nsecond\r\n$`).MatchString(f) {
			t.Fatalf("second push delivery frame %q", f)
		}
		break
	}
	hb2 := "HMSG deliver.hb 1 75 75\r\nNATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 2\r\nNats-Last-Stream: 2\r\n\r\n\r\n"
	if f := cxRawFrame(c); f != hb2 {
		t.Errorf("heartbeat after the second delivery %q, want %q", f, hb2)
	}
	// A pull request to a push consumer.
	c.send("SUB _INBOX.pr.* 2\r\nPUB $JS.API.CONSUMER.MSG.NEXT.PR.hb _INBOX.pr.1 0\r\n\r\n")
	for {
		f := cxRawFrame(c)
		if strings.HasPrefix(f, "HMSG deliver.hb ") {
			continue
		}
		if want := "HMSG _INBOX.pr.1 2 39 39\r\nNATS/1.0 409 Consumer is push based\r\n\r\n\r\n"; f != want {
			t.Errorf("pull from a push consumer: %q, want %q", f, want)
		}
		break
	}
	// Unsubscribing unbinds it.
	c.send("UNSUB 1\r\n")
	waitFor(t, cxWait, "push_bound to clear", func() bool {
		i, err := pc.Info(tctx(t))
		return err == nil && !i.PushBound
	})

	// deliver_group: queue subscribers share the deliveries.
	_, err = js.CreatePushConsumer(tctx(t), "PR", jetstream.ConsumerConfig{
		Durable: "grp", DeliverSubject: "deliver.grp", DeliverGroup: "g", AckPolicy: jetstream.AckNonePolicy,
	})
	if err != nil {
		t.Fatal(err)
	}
	g1, err := nc.QueueSubscribeSync("deliver.grp", "g")
	if err != nil {
		t.Fatal(err)
	}
	g2, err := nc.QueueSubscribeSync("deliver.grp", "g")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		jsPublish(t, js, "pr.g", strconv.Itoa(i))
	}
	seen := map[string]bool{}
	waitFor(t, cxWait, "22 group deliveries", func() bool {
		for _, s := range []*nats.Subscription{g1, g2} {
			for {
				m, err := s.NextMsg(time.Millisecond)
				if err != nil {
					break
				}
				if seen[string(m.Data)] {
					t.Errorf("%q delivered twice to the group", m.Data)
				}
				seen[string(m.Data)] = true
			}
		}
		return len(seen) == 22
	})
}

func TestConsumerPushFlowControlRaw(t *testing.T) {
	u := startJS(t)
	nc, js := jsConnect(t, u)
	createStream(t, js, jetstream.StreamConfig{Name: "FCS", Subjects: []string{"fcs.>"}})
	payload := strings.Repeat("y", 100*1024)
	const n = 40
	for i := 0; i < n; i++ {
		jsPublish(t, js, "fcs.x", payload)
	}
	_, err := js.CreatePushConsumer(tctx(t), "FCS", jetstream.ConsumerConfig{
		Durable: "fc", DeliverSubject: "deliver.fc", FlowControl: true, IdleHeartbeat: 300 * time.Millisecond,
		AckPolicy: jetstream.AckNonePolicy,
	})
	if err != nil {
		t.Fatal(err)
	}
	sub := subSync(t, nc, "deliver.fc")
	sub.SetPendingLimits(-1, -1)

	// Read without answering flow control: delivery stalls before the
	// end, and the idle heartbeat names the unanswered request.
	var data int
	var fcReply string
	deadline := time.Now().Add(cxWait)
	for {
		if time.Now().After(deadline) {
			t.Fatalf("no stalled heartbeat; %d messages, flow control request %q", data, fcReply)
		}
		m, err := sub.NextMsg(cxWait)
		if err != nil {
			t.Fatalf("after %d messages: %v", data, err)
		}
		if m.Header.Get("Status") == "" {
			data++
			if md, _ := m.Metadata(); md == nil || md.Sequence.Stream != uint64(data) || m.Subject != "fcs.x" {
				t.Fatalf("data message %d: %s %+v", data, m.Subject, md)
			}
			continue
		}
		if m.Subject != "deliver.fc" || len(m.Data) != 0 || m.Header.Get("Status") != "100" {
			t.Fatalf("control message: subject %s header %v data %q", m.Subject, m.Header, m.Data)
		}
		switch m.Header.Get("Description") {
		case "FlowControl Request":
			if !regexp.MustCompile(`^\$JS\.FC\.FCS\.fc\.[A-Za-z0-9]+$`).MatchString(m.Reply) {
				t.Errorf("flow control reply subject %q", m.Reply)
			}
			fcReply = m.Reply
			continue
		case "Idle Heartbeat":
			if m.Reply != "" {
				t.Errorf("heartbeat with a reply subject %q", m.Reply)
			}
			stalled := m.Header.Get("Nats-Consumer-Stalled")
			if stalled == "" {
				continue
			}
			if fcReply == "" || stalled != fcReply {
				t.Errorf("Nats-Consumer-Stalled %q, want the flow control reply %q", stalled, fcReply)
			}
			if m.Header.Get("Nats-Last-Consumer") != strconv.Itoa(data) || m.Header.Get("Nats-Last-Stream") != strconv.Itoa(data) {
				t.Errorf("stalled heartbeat %v after %d messages", m.Header, data)
			}
		default:
			t.Fatalf("unexpected control message %v", m.Header)
		}
		break
	}
	if data == 0 || data >= n {
		t.Fatalf("stalled after %d of %d messages", data, n)
	}
	// Answering resumes delivery; later requests are answered too.
	if err := nc.Publish(fcReply, nil); err != nil {
		t.Fatal(err)
	}
	for data < n {
		m, err := sub.NextMsg(cxWait)
		if err != nil {
			t.Fatalf("after answering flow control, stuck at %d of %d: %v", data, n, err)
		}
		if m.Header.Get("Status") == "" {
			data++
			continue
		}
		if m.Header.Get("Description") == "FlowControl Request" {
			nc.Publish(m.Reply, nil)
		}
	}
}

// ---------------------------------------------------------------------------
// raw pull requests and their status frames

// cxRawFrame reads the next MSG or HMSG frame from c, whole, answering
// any PING the server sends in between.
func cxRawFrame(c *rawClient) string {
	c.t.Helper()
	for {
		line := c.readLine()
		if line == "PING\r\n" {
			c.send("PONG\r\n")
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || (f[0] != "MSG" && f[0] != "HMSG") {
			c.t.Fatalf("want a MSG or HMSG frame, got %q", line)
		}
		size, err := strconv.Atoi(f[len(f)-1])
		if err != nil {
			c.t.Fatalf("bad frame line %q", line)
		}
		deadline := time.Now().Add(readTimeout)
		for len(c.pending) < size+2 {
			if err := c.fill(deadline); err != nil {
				c.t.Fatalf("frame %q: payload incomplete: %v", line, err)
			}
		}
		frame := line + string(c.pending[:size+2])
		c.pending = c.pending[size+2:]
		return frame
	}
}

// cxRawSync sends PING and expects PONG before any other frame.
func cxRawSync(c *rawClient) {
	c.t.Helper()
	c.send("PING\r\n")
	for {
		line := c.readLine()
		switch line {
		case "PING\r\n":
			c.send("PONG\r\n")
		case "PONG\r\n":
			return
		default:
			c.t.Fatalf("want PONG, got %q%s", line, trunc(string(c.pending)))
		}
	}
}

// cxRawPull publishes a pull request with reply inbox.
func cxRawPull(c *rawClient, stream, consumer, inbox, body string) {
	c.send(fmt.Sprintf("PUB $JS.API.CONSUMER.MSG.NEXT.%s.%s %s %d\r\n%s\r\n", stream, consumer, inbox, len(body), body))
}

// cxStatus is the frame of a status message with the given header lines
// (after the status line) sent to inbox on sid 1.
func cxStatus(inbox, status string, hdrs ...string) string {
	h := "NATS/1.0 " + status + "\r\n"
	for _, l := range hdrs {
		h += l + "\r\n"
	}
	h += "\r\n"
	return fmt.Sprintf("HMSG %s 1 %d %d\r\n%s\r\n", inbox, len(h), len(h), h)
}

func TestConsumerPullRequestStatus(t *testing.T) {
	u := startJS(t)
	_, js := jsConnect(t, u)
	createStream(t, js, jetstream.StreamConfig{Name: "S", Subjects: []string{"raw.>"}})
	jsPublish(t, js, "raw.a", "one")
	jsPublish(t, js, "raw.b", "two")
	p := cxCreate(t, js, "S", jetstream.ConsumerConfig{Durable: "P", MaxRequestBatch: 10, AckPolicy: jetstream.AckExplicitPolicy})
	cxCreate(t, js, "S", jetstream.ConsumerConfig{Durable: "LIM", MaxRequestExpires: time.Second, MaxRequestMaxBytes: 100})
	cxCreate(t, js, "S", jetstream.ConsumerConfig{Durable: "W1", MaxWaiting: 1, FilterSubject: "raw.none"})

	c := rawConnect(t, u, defaultConnect)
	c.send("SUB _INBOX.r.* 1\r\n")
	cxRawSync(c)
	msgRe := func(subj, sseq, cseq, pending, data string) *regexp.Regexp {
		return regexp.MustCompile(fmt.Sprintf(`^MSG %s 1 \$JS\.ACK\.S\.P\.1\.%s\.%s\.(\d{19})\.%s %d\r\n%s\r\n$`,
			regexp.QuoteMeta(subj), sseq, cseq, pending, len(data), data))
	}

	// batch 1 without expiry: one message, nothing more. The MSG line has
	// the stored subject and the 9-token ack reply.
	cxRawPull(c, "S", "P", "_INBOX.r.1", `{"batch":1}`)
	if f := cxRawFrame(c); !msgRe("raw.a", "1", "1", "1", "one").MatchString(f) {
		t.Errorf("batch 1: %q", f)
	}
	cxRawSync(c)
	// no_wait: what there is, then 404 No Messages.
	cxRawPull(c, "S", "P", "_INBOX.r.2", `{"batch":5,"no_wait":true}`)
	if f := cxRawFrame(c); !msgRe("raw.b", "2", "2", "0", "two").MatchString(f) {
		t.Errorf("no_wait delivery: %q", f)
	}
	if f, want := cxRawFrame(c), cxStatus("_INBOX.r.2", "404 No Messages"); f != want {
		t.Errorf("no_wait end: %q, want %q", f, want)
	}
	cxRawSync(c)
	// no_wait with nothing: 404 at once.
	cxRawPull(c, "S", "P", "_INBOX.r.3", `{"batch":5,"no_wait":true}`)
	if f, want := cxRawFrame(c), cxStatus("_INBOX.r.3", "404 No Messages"); f != want {
		t.Errorf("no_wait with nothing: %q, want %q", f, want)
	}
	// expires with nothing: 408 Request Timeout with what is still owed.
	start := time.Now()
	cxRawPull(c, "S", "P", "_INBOX.r.4", `{"batch":3,"expires":200000000}`)
	if f, want := cxRawFrame(c), cxStatus("_INBOX.r.4", "408 Request Timeout", "Nats-Pending-Messages: 3", "Nats-Pending-Bytes: 0"); f != want {
		t.Errorf("expired request: %q, want %q", f, want)
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Errorf("408 after %v for a 200ms request", d)
	}
	// no_wait with expires: waits, then 408 (not 404).
	cxRawPull(c, "S", "P", "_INBOX.r.5", `{"batch":2,"no_wait":true,"expires":200000000}`)
	if f, want := cxRawFrame(c), cxStatus("_INBOX.r.5", "408 Request Timeout", "Nats-Pending-Messages: 2", "Nats-Pending-Bytes: 0"); f != want {
		t.Errorf("no_wait with expires: %q, want %q", f, want)
	}
	// Limits of the consumer.
	cxRawPull(c, "S", "P", "_INBOX.r.6", `{"batch":11}`)
	if f, want := cxRawFrame(c), cxStatus("_INBOX.r.6", "409 Exceeded MaxRequestBatch of 10"); f != want {
		t.Errorf("batch over max_batch: %q, want %q", f, want)
	}
	cxRawPull(c, "S", "LIM", "_INBOX.r.7", `{"batch":1,"expires":2000000000}`)
	if f, want := cxRawFrame(c), cxStatus("_INBOX.r.7", "409 Exceeded MaxRequestExpires of 1s"); f != want {
		t.Errorf("expires over max_expires: %q, want %q", f, want)
	}
	cxRawPull(c, "S", "LIM", "_INBOX.r.8", `{"batch":1,"max_bytes":200}`)
	if f, want := cxRawFrame(c), cxStatus("_INBOX.r.8", "409 Exceeded MaxRequestMaxBytes of 100"); f != want {
		t.Errorf("max_bytes over the consumer's: %q, want %q", f, want)
	}
	// A message larger than the byte budget ends the request.
	jsPublish(t, js, "raw.c", strings.Repeat("0123456789", 4))
	cxRawPull(c, "S", "P", "_INBOX.r.9", `{"batch":2,"max_bytes":50}`)
	if f, want := cxRawFrame(c), cxStatus("_INBOX.r.9", "409 Message Size Exceeds MaxBytes", "Nats-Pending-Messages: 2", "Nats-Pending-Bytes: 50"); f != want {
		t.Errorf("message over max_bytes: %q, want %q", f, want)
	}
	// Batch done with bytes to spare: 409 Batch Completed with what is
	// left of the budget (the size counted is subject + reply + payload).
	cxRawPull(c, "S", "P", "_INBOX.r.10", `{"batch":1,"max_bytes":5000,"expires":2000000000}`)
	f := cxRawFrame(c)
	sm := regexp.MustCompile(`^MSG raw\.c 1 (\$JS\.ACK\.S\.P\.1\.3\.3\.\d{19}\.0) 40\r\n`).FindStringSubmatch(f)
	if sm == nil {
		t.Fatalf("delivery within max_bytes: %q", f)
	}
	left := 5000 - len("raw.c") - len(sm[1]) - 40
	if f, want := cxRawFrame(c), cxStatus("_INBOX.r.10", "409 Batch Completed", "Nats-Pending-Messages: 0", fmt.Sprintf("Nats-Pending-Bytes: %d", left)); f != want {
		t.Errorf("batch completed: %q, want %q", f, want)
	}
	// Idle heartbeats while a request waits, then 408.
	start = time.Now()
	cxRawPull(c, "S", "P", "_INBOX.r.11", `{"batch":1,"expires":700000000,"idle_heartbeat":200000000}`)
	hb := cxStatus("_INBOX.r.11", "100 Idle Heartbeat", "Nats-Last-Consumer: 3", "Nats-Last-Stream: 3")
	timeout := cxStatus("_INBOX.r.11", "408 Request Timeout", "Nats-Pending-Messages: 1", "Nats-Pending-Bytes: 0")
	var hbs int
	for {
		f := cxRawFrame(c)
		if f == hb {
			hbs++
			continue
		}
		if f != timeout {
			t.Errorf("pull with heartbeats: %q, want %q or %q", f, hb, timeout)
		}
		break
	}
	if hbs < 2 || hbs > 4 {
		t.Errorf("%d heartbeats in a 700ms request at 200ms", hbs)
	}
	if d := time.Since(start); d < 600*time.Millisecond {
		t.Errorf("request with heartbeats ended after %v", d)
	}
	// Bad requests.
	cxRawPull(c, "S", "P", "_INBOX.r.12", `{"batch":1,"expires":300000000,"idle_heartbeat":200000000}`)
	if f, want := cxRawFrame(c), cxStatus("_INBOX.r.12", "400 Bad Request - heartbeat value too large"); f != want {
		t.Errorf("heartbeat over half the expiry: %q, want %q", f, want)
	}
	// A consumer that does not exist: no responders.
	cxRawPull(c, "S", "NOPE", "_INBOX.r.13", `{"batch":1}`)
	if f, want := cxRawFrame(c), cxStatus("_INBOX.r.13", "503", "Nats-Subject: $JS.API.CONSUMER.MSG.NEXT.S.NOPE"); f != want {
		t.Errorf("pull from a missing consumer: %q, want %q", f, want)
	}
	cxRawSync(c)
	// max_waiting 1: a second waiting request is refused.
	cxRawPull(c, "S", "W1", "_INBOX.r.14", `{"batch":1,"expires":5000000000}`)
	cxRawPull(c, "S", "W1", "_INBOX.r.15", `{"batch":1,"expires":5000000000}`)
	if f, want := cxRawFrame(c), cxStatus("_INBOX.r.15", "409 Exceeded MaxWaiting"); f != want {
		t.Errorf("second request with max_waiting 1: %q, want %q", f, want)
	}
	// Waiting requests (one with an empty body: batch 1, no expiry) get
	// 409 Consumer Deleted when the consumer goes.
	cxRawPull(c, "S", "P", "_INBOX.r.16", "")
	cxRawPull(c, "S", "P", "_INBOX.r.17", `{"batch":4,"expires":5000000000}`)
	cxRawSync(c)
	cxWaitInfo(t, p, "two waiting requests", func(i *jetstream.ConsumerInfo) bool { return i.NumWaiting == 2 })
	if err := js.DeleteConsumer(tctx(t), "S", "P"); err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteConsumer(tctx(t), "S", "W1"); err != nil {
		t.Fatal(err)
	}
	got := []string{cxRawFrame(c), cxRawFrame(c), cxRawFrame(c)}
	sort.Strings(got)
	want := []string{
		cxStatus("_INBOX.r.14", "409 Consumer Deleted"),
		cxStatus("_INBOX.r.16", "409 Consumer Deleted"),
		cxStatus("_INBOX.r.17", "409 Consumer Deleted"),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("waiting requests on deletion:\n got %q\nwant %q", got, want)
	}
	cxRawSync(c)
}

func TestConsumerPullRequestBodies(t *testing.T) {
	u := startJS(t)
	_, js := jsConnect(t, u)
	createStream(t, js, jetstream.StreamConfig{Name: "S", Subjects: []string{"raw.>"}})
	cxPubN(t, js, "raw.%d", 6)
	cxCreate(t, js, "S", jetstream.ConsumerConfig{Durable: "N", AckPolicy: jetstream.AckNonePolicy})
	x := cxCreate(t, js, "S", jetstream.ConsumerConfig{Durable: "X", AckPolicy: jetstream.AckExplicitPolicy})
	c := rawConnect(t, u, defaultConnect)
	c.send("SUB _INBOX.n.* 1\r\n")
	// A plain number is a batch size.
	cxRawPull(c, "S", "N", "_INBOX.n.1", "3")
	for i := 1; i <= 3; i++ {
		re := regexp.MustCompile(fmt.Sprintf(`^MSG raw\.%d 1 \$JS\.ACK\.S\.N\.1\.%d\.%d\.\d{19}\.%d 2\r\nm%d\r\n$`, i, i, i, 6-i, i))
		if f := cxRawFrame(c); !re.MatchString(f) {
			t.Errorf("delivery %d for batch \"3\": %q", i, f)
		}
	}
	cxRawSync(c)
	// A request whose batch is filled ends without a status.
	cxRawPull(c, "S", "N", "_INBOX.n.2", `{"batch":2,"no_wait":true}`)
	for i := 4; i <= 5; i++ {
		if f, want := cxRawFrame(c), fmt.Sprintf("MSG raw.%d 1 $JS.ACK.S.N.1.%d.%d.", i, i, i); !strings.HasPrefix(f, want) {
			t.Errorf("delivery %d: %q, want prefix %q", i, f, want)
		}
	}
	cxRawSync(c)

	// +NXT acks and pulls the next message to the ack's reply subject.
	cxRawPull(c, "S", "X", "_INBOX.n.3", "")
	f := cxRawFrame(c)
	sm := regexp.MustCompile(`^MSG raw\.1 1 (\$JS\.ACK\.S\.X\.1\.1\.1\.\d{19}\.5) 2\r\nm1\r\n$`).FindStringSubmatch(f)
	if sm == nil {
		t.Fatalf("first delivery of X: %q", f)
	}
	c.send(fmt.Sprintf("PUB %s _INBOX.n.4 4\r\n+NXT\r\n", sm[1]))
	f = cxRawFrame(c)
	sm = regexp.MustCompile(`^MSG raw\.2 1 (\$JS\.ACK\.S\.X\.1\.2\.2\.\d{19}\.4) 2\r\nm2\r\n$`).FindStringSubmatch(f)
	if sm == nil {
		t.Fatalf("delivery for +NXT: %q", f)
	}
	// +NXT with a batch size.
	c.send(fmt.Sprintf("PUB %s _INBOX.n.5 6\r\n+NXT 2\r\n", sm[1]))
	for i := 3; i <= 4; i++ {
		if f, want := cxRawFrame(c), fmt.Sprintf("MSG raw.%d 1 $JS.ACK.S.X.1.%d.%d.", i, i, i); !strings.HasPrefix(f, want) {
			t.Errorf("+NXT 2 delivery %d: %q, want prefix %q", i, f, want)
		}
	}
	cxRawSync(c)
	info := cxInfo(t, x)
	cxCounts(t, info, 2, 2, 0, 0)
	cxSeqInfo(t, "ack_floor after +NXT", info.AckFloor, 2, 2)
}
