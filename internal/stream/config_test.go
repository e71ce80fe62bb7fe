package stream

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/store"
)

// roundTrips are configs as the clients send them (nats.go v1.55.0
// jetstream and legacy API, the Node nats 2.29.3 client) and the "config"
// nats-server v2.15.2 returned for each in its stream_create_response
// (nats-server v2.15.2 STREAM.CREATE, jsStreamCreateRequest; nats-server v2.15.2 StreamConfig; nats-server v2.15.2 defaults, setStreamConfigDefaults and setConsumerConfigDefaults), byte for byte.
// A config sent back as returned gives the same bytes again, except
// where noted in echoDiffers.
var roundTrips = []struct {
	name, in, want string
	echoDiffers    bool
}{
	{
		name: "nats.go jetstream minimal",
		in:   `{"name":"ORDERS","subjects":["orders.\u003e"],"retention":"limits","max_consumers":0,"max_msgs":0,"max_bytes":0,"discard":"old","max_age":0,"max_msgs_per_subject":0,"storage":"file","num_replicas":0,"compression":"none","allow_direct":false,"mirror_direct":false,"consumer_limits":{}}`,
		want: `{"name":"ORDERS","subjects":["orders.\u003e"],"retention":"limits","max_consumers":-1,"max_msgs":-1,"max_bytes":-1,"max_age":0,"max_msgs_per_subject":-1,"max_msg_size":-1,"discard":"old","storage":"file","num_replicas":1,"duplicate_window":120000000000,"compression":"none","allow_direct":false,"mirror_direct":false,"sealed":false,"deny_delete":false,"deny_purge":false,"allow_rollup_hdrs":false,"consumer_limits":{},"allow_msg_ttl":false,"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.2"}}`,
	},
	{
		name: "nats.go jetstream full",
		in:   `{"name":"WORK","description":"d","subjects":["work.*","ship.\u003e"],"retention":"workqueue","max_consumers":0,"max_msgs":100,"max_bytes":0,"discard":"new","discard_new_per_subject":true,"max_age":3600000000000,"max_msgs_per_subject":5,"max_msg_size":1024,"storage":"memory","num_replicas":0,"duplicate_window":30000000000,"placement":{"cluster":"c1","tags":["ssd"]},"compression":"s2","first_seq":42,"allow_direct":false,"mirror_direct":false,"consumer_limits":{"inactive_threshold":60000000000,"max_ack_pending":10},"metadata":{"owner":"ops"}}`,
		want: `{"name":"WORK","description":"d","subjects":["work.*","ship.\u003e"],"retention":"workqueue","max_consumers":-1,"max_msgs":100,"max_bytes":-1,"max_age":3600000000000,"max_msgs_per_subject":5,"max_msg_size":1024,"discard":"new","storage":"memory","num_replicas":1,"duplicate_window":30000000000,"placement":{"cluster":"c1","tags":["ssd"]},"compression":"s2","first_seq":42,"allow_direct":false,"mirror_direct":false,"discard_new_per_subject":true,"sealed":false,"deny_delete":false,"deny_purge":false,"allow_rollup_hdrs":false,"consumer_limits":{"inactive_threshold":60000000000,"max_ack_pending":10},"allow_msg_ttl":false,"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.2","owner":"ops"}}`,
	},
	{
		name: "nats.go legacy js.AddStream",
		in:   `{"name":"LEGACY","subjects":["legacy.\u003e"],"retention":"limits","max_consumers":0,"max_msgs":0,"max_bytes":0,"discard":"old","max_age":30000000000,"max_msgs_per_subject":0,"storage":"file","num_replicas":0,"compression":"none","allow_direct":false,"mirror_direct":false,"consumer_limits":{},"allow_msg_ttl":false}`,
		want: `{"name":"LEGACY","subjects":["legacy.\u003e"],"retention":"limits","max_consumers":-1,"max_msgs":-1,"max_bytes":-1,"max_age":30000000000,"max_msgs_per_subject":-1,"max_msg_size":-1,"discard":"old","storage":"file","num_replicas":1,"duplicate_window":30000000000,"compression":"none","allow_direct":false,"mirror_direct":false,"sealed":false,"deny_delete":false,"deny_purge":false,"allow_rollup_hdrs":false,"consumer_limits":{},"allow_msg_ttl":false,"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.2"}}`,
	},
	{
		name: "nats.go KV bucket",
		in:   `{"name":"KV_cfg","subjects":["$KV.cfg.\u003e"],"retention":"limits","max_consumers":-1,"max_msgs":-1,"max_bytes":-1,"discard":"new","max_age":0,"max_msgs_per_subject":1,"max_msg_size":-1,"storage":"file","num_replicas":1,"duplicate_window":120000000000,"deny_delete":true,"allow_rollup_hdrs":true,"compression":"none","allow_direct":true,"mirror_direct":false,"consumer_limits":{}}`,
		want: `{"name":"KV_cfg","subjects":["$KV.cfg.\u003e"],"retention":"limits","max_consumers":-1,"max_msgs":-1,"max_bytes":-1,"max_age":0,"max_msgs_per_subject":1,"max_msg_size":-1,"discard":"new","storage":"file","num_replicas":1,"duplicate_window":120000000000,"compression":"none","allow_direct":true,"mirror_direct":false,"sealed":false,"deny_delete":true,"deny_purge":false,"allow_rollup_hdrs":true,"consumer_limits":{},"allow_msg_ttl":false,"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.2"}}`,
	},
	{
		name: "Node add minimal",
		in:   `{"name":"NODE","subjects":["node.>"]}`,
		want: `{"name":"NODE","subjects":["node.\u003e"],"retention":"limits","max_consumers":-1,"max_msgs":-1,"max_bytes":-1,"max_age":0,"max_msgs_per_subject":-1,"max_msg_size":-1,"discard":"old","storage":"file","num_replicas":1,"duplicate_window":120000000000,"compression":"none","allow_direct":false,"mirror_direct":false,"sealed":false,"deny_delete":false,"deny_purge":false,"allow_rollup_hdrs":false,"consumer_limits":{},"allow_msg_ttl":false,"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.2"}}`,
	},
	{
		name: "Node KV bucket",
		in:   `{"name":"KV_ncfg","retention":"limits","max_msgs_per_subject":1,"max_bytes":-1,"max_msg_size":-1,"storage":"file","subjects":["$KV.ncfg.>"],"discard":"new","allow_direct":true,"num_replicas":1,"allow_rollup_hdrs":true}`,
		want: `{"name":"KV_ncfg","subjects":["$KV.ncfg.\u003e"],"retention":"limits","max_consumers":-1,"max_msgs":-1,"max_bytes":-1,"max_age":0,"max_msgs_per_subject":1,"max_msg_size":-1,"discard":"new","storage":"file","num_replicas":1,"duplicate_window":120000000000,"compression":"none","allow_direct":true,"mirror_direct":false,"sealed":false,"deny_delete":false,"deny_purge":false,"allow_rollup_hdrs":true,"consumer_limits":{},"allow_msg_ttl":false,"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.2"}}`,
	},
	{
		name: "Node update echoing a returned config",
		in:   `{"name":"ECHO","subjects":["echo.>"],"retention":"limits","max_consumers":-1,"max_msgs":-1,"max_bytes":-1,"max_age":0,"max_msgs_per_subject":-1,"max_msg_size":-1,"discard":"old","storage":"file","num_replicas":1,"duplicate_window":120000000000,"compression":"none","allow_direct":false,"mirror_direct":false,"sealed":false,"deny_delete":false,"deny_purge":false,"allow_rollup_hdrs":false,"consumer_limits":{},"allow_msg_ttl":false,"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.2","team":"a"},"description":"x<y&z"}`,
		want: `{"name":"ECHO","description":"x\u003cy\u0026z","subjects":["echo.\u003e"],"retention":"limits","max_consumers":-1,"max_msgs":-1,"max_bytes":-1,"max_age":0,"max_msgs_per_subject":-1,"max_msg_size":-1,"discard":"old","storage":"file","num_replicas":1,"duplicate_window":120000000000,"compression":"none","allow_direct":false,"mirror_direct":false,"sealed":false,"deny_delete":false,"deny_purge":false,"allow_rollup_hdrs":false,"consumer_limits":{},"allow_msg_ttl":false,"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.2","team":"a"}}`,
	},
	{
		name: "placement with empty tags",
		in:   `{"name":"PL","subjects":["pl"],"placement":{"tags":[]},"max_age":60000000000}`,
		want: `{"name":"PL","subjects":["pl"],"retention":"limits","max_consumers":-1,"max_msgs":-1,"max_bytes":-1,"max_age":60000000000,"max_msgs_per_subject":-1,"max_msg_size":-1,"discard":"old","storage":"file","num_replicas":1,"duplicate_window":60000000000,"placement":{},"compression":"none","allow_direct":false,"mirror_direct":false,"sealed":false,"deny_delete":false,"deny_purge":false,"allow_rollup_hdrs":false,"consumer_limits":{},"allow_msg_ttl":false,"metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.2"}}`,
		// Non-nil empty tags keep the placement (nats-server compares with
		// reflect.DeepEqual); the echoed "placement":{} is then dropped.
		echoDiffers: true,
	},
}

// TestConfigRoundTrip decodes each client config, prepares it as the API
// layer does (SetStaticMetadata, SetDefaults, Validate,
// WithServerMetadata) and compares the encoding with nats-server's.
func TestConfigRoundTrip(t *testing.T) {
	for _, tc := range roundTrips {
		t.Run(tc.name, func(t *testing.T) {
			got := prepare(t, tc.in)
			if got != tc.want {
				t.Errorf("config\n got %s\nwant %s", got, tc.want)
			}
			// A client that sends back what it got (the Node update)
			// gets the same bytes again.
			if again := prepare(t, got); again != tc.want && !tc.echoDiffers {
				t.Errorf("second round\n got %s\nwant %s", again, tc.want)
			}
		})
	}
}

// prepare returns the config nats-server would return for the request
// body in.
func prepare(t *testing.T, in string) string {
	t.Helper()
	var c Config
	if err := json.Unmarshal([]byte(in), &c); err != nil {
		t.Fatalf("decode: %v", err)
	}
	c.SetStaticMetadata()
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	out := c.WithServerMetadata("2.15.2", 5)
	b, err := json.Marshal(&out)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	return string(b)
}

// TestConfigUnknownKeys: unknown keys are ignored (nats-server v2.15.2
// item 3), including template_owner, which v2.15.2 no longer knows.
func TestConfigUnknownKeys(t *testing.T) {
	var c Config
	in := `{"name":"S","template_owner":"T","future_key":{"a":[1,2]},"pedantic":true}`
	if err := json.Unmarshal([]byte(in), &c); err != nil {
		t.Fatal(err)
	}
	if c.Name != "S" {
		t.Errorf("name %q", c.Name)
	}
}

// TestEnumJSON checks the enumeration strings both ways and the decode
// errors, whose text nats-server reports in 10025 (nats-server v2.15.2's enumerations).
func TestEnumJSON(t *testing.T) {
	tests := []struct {
		in      string
		want    string // re-encoded config fragment, or the decode error
		wantErr bool
	}{
		{`{"retention":"interest"}`, `"retention":"interest"`, false},
		{`{"retention":"workqueue"}`, `"retention":"workqueue"`, false},
		{`{"retention":"Limits"}`, `can not unmarshal "\"Limits\""`, true},
		{`{"retention":null}`, `can not unmarshal "null"`, true},
		{`{"storage":"memory"}`, `"storage":"memory"`, false},
		{`{"storage":"disk"}`, `can not unmarshal "\"disk\""`, true},
		{`{"discard":"NEW"}`, `"discard":"new"`, false},
		{`{"discard":"Old"}`, `"discard":"old"`, false},
		{`{"discard":"newest"}`, `can not unmarshal "\"newest\""`, true},
		{`{"compression":"s2"}`, `"compression":"s2"`, false},
		{`{"compression":"S2"}`, `unknown compression algorithm`, true},
		{`{"compression":"\u0073\u0032"}`, `"compression":"s2"`, false},
		// nats-server names its own types here: "... Go struct field
		// StreamConfigRequest.StreamConfig.compression of type string".
		{`{"compression":5}`, `json: cannot unmarshal number into Go struct field Config.compression of type string`, true},
		{`{"persist_mode":""}`, `"compression":"none"`, false},
		{`{"persist_mode":"default"}`, `"compression":"none"`, false},
		{`{"persist_mode":"async"}`, `"persist_mode":"async"`, false},
		{`{"persist_mode":"sync"}`, `can not unmarshal "\"sync\""`, true},
		{`{"persist_mode":"ASYNC"}`, `can not unmarshal "\"ASYNC\""`, true},
		{`{"persist_mode":1}`, `can not unmarshal "1"`, true},
		{`{"persist_mode":null}`, `can not unmarshal "null"`, true},
	}
	for _, tc := range tests {
		var c Config
		err := json.Unmarshal([]byte(tc.in), &c)
		if tc.wantErr {
			if err == nil || err.Error() != tc.want {
				t.Errorf("%s: error %v, want %q", tc.in, err, tc.want)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		b, _ := json.Marshal(&c)
		if !strings.Contains(string(b), tc.want) {
			t.Errorf("%s: encoded %s, want it to contain %s", tc.in, b, tc.want)
		}
	}
}

// TestEnumMarshalOutOfRange: a value set in Go outside the enumeration
// does not encode.
func TestEnumMarshalOutOfRange(t *testing.T) {
	for _, v := range []json.Marshaler{RetentionPolicy(7), StorageType(-1), DiscardPolicy(2), Compression(9), PersistMode(3)} {
		if _, err := v.MarshalJSON(); err == nil {
			t.Errorf("%T(%v): no error", v, v)
		}
	}
}

// TestEnumString: String gives the JSON name, and says when a value is
// out of range.
func TestEnumString(t *testing.T) {
	for _, tc := range []struct {
		v    interface{ String() string }
		want string
	}{
		{WorkQueuePolicy, "workqueue"}, {MemoryStorage, "memory"}, {DiscardNew, "new"},
		{S2Compression, "s2"}, {AsyncPersist, "async"}, {RetentionPolicy(9), "unknown(9)"},
	} {
		if got := tc.v.String(); got != tc.want {
			t.Errorf("%#v.String() = %q, want %q", tc.v, got, tc.want)
		}
	}
}

// TestSetDefaults covers each default of nats-server v2.15.2 defaults, setStreamConfigDefaults and setConsumerConfigDefaults.
func TestSetDefaults(t *testing.T) {
	tests := []struct {
		name  string
		in    Config
		check func(c Config) bool
	}{
		{"limits to -1", Config{Name: "S", MaxMsgs: -5, MaxBytes: 0, MaxMsgsPerSubject: -2, MaxMsgSize: -9, MaxConsumers: -3},
			func(c Config) bool {
				return c.MaxMsgs == -1 && c.MaxBytes == -1 && c.MaxMsgsPerSubject == -1 && c.MaxMsgSize == -1 && c.MaxConsumers == -1
			}},
		{"limits kept", Config{Name: "S", MaxMsgs: 5, MaxBytes: 6, MaxMsgsPerSubject: 7, MaxMsgSize: 8, MaxConsumers: 9},
			func(c Config) bool {
				return c.MaxMsgs == 5 && c.MaxBytes == 6 && c.MaxMsgsPerSubject == 7 && c.MaxMsgSize == 8 && c.MaxConsumers == 9
			}},
		{"replicas 1", Config{Name: "S"}, func(c Config) bool { return c.Replicas == 1 }},
		{"replicas kept", Config{Name: "S", Replicas: 3}, func(c Config) bool { return c.Replicas == 3 }},
		{"window 2m", Config{Name: "S"}, func(c Config) bool { return c.DuplicateWindow == 2*time.Minute }},
		{"window capped by max_age", Config{Name: "S", MaxAge: time.Minute}, func(c Config) bool { return c.DuplicateWindow == time.Minute }},
		{"window not capped by a longer max_age", Config{Name: "S", MaxAge: time.Hour}, func(c Config) bool { return c.DuplicateWindow == 2*time.Minute }},
		{"window kept", Config{Name: "S", DuplicateWindow: time.Second}, func(c Config) bool { return c.DuplicateWindow == time.Second }},
		{"mirror: no window, no subjects", Config{Name: "S", Mirror: &Source{Name: "O"}},
			func(c Config) bool { return c.DuplicateWindow == 0 && c.Subjects == nil }},
		{"sources: no window, no subjects", Config{Name: "S", Sources: []*Source{{Name: "O"}}},
			func(c Config) bool { return c.DuplicateWindow == 0 && c.Subjects == nil }},
		{"subjects [name]", Config{Name: "S"}, func(c Config) bool { return len(c.Subjects) == 1 && c.Subjects[0] == "S" }},
		{"subjects kept", Config{Name: "S", Subjects: []string{"a", "b"}}, func(c Config) bool { return len(c.Subjects) == 2 }},
		{"empty placement dropped", Config{Name: "S", Placement: &Placement{}}, func(c Config) bool { return c.Placement == nil }},
		{"placement with empty tags kept", Config{Name: "S", Placement: &Placement{Tags: []string{}}}, func(c Config) bool { return c.Placement != nil }},
		{"republish source >", Config{Name: "S", RePublish: &RePublish{Destination: "x"}}, func(c Config) bool { return c.RePublish.Source == ">" }},
		{"enums at their defaults", Config{Name: "S"}, func(c Config) bool {
			return c.Retention == LimitsPolicy && c.Storage == FileStorage && c.Discard == DiscardOld && c.Compression == NoCompression
		}},
	}
	for _, tc := range tests {
		c := tc.in
		c.SetDefaults()
		if !tc.check(c) {
			t.Errorf("%s: got %+v", tc.name, c)
		}
	}
}

// TestStoreConfig: -1 (unlimited) becomes the store's 0.
func TestStoreConfig(t *testing.T) {
	c := Config{Name: "S", MaxMsgs: 10, MaxAge: time.Hour, Discard: DiscardNew, DiscardNewPerSubject: true, MaxMsgsPerSubject: 2, FirstSeq: 5}
	c.SetDefaults()
	got := c.StoreConfig()
	want := store.Config{MaxMsgs: 10, MaxAge: time.Hour, MaxMsgsPerSubject: 2, Discard: store.DiscardNew, DiscardNewPerSubject: true, FirstSeq: 5}
	if got != want {
		t.Errorf("StoreConfig %+v, want %+v", got, want)
	}
	c = Config{Name: "S", MaxBytes: 100, MaxMsgSize: 50}
	c.SetDefaults()
	if got := c.StoreConfig(); got.MaxBytes != 100 || got.MaxMsgSize != 50 || got.MaxMsgs != 0 || got.Discard != store.DiscardOld || got.Compress {
		t.Errorf("StoreConfig %+v", got)
	}
	c.Compression = S2Compression
	if got := c.StoreConfig(); !got.Compress {
		t.Errorf("compression s2: StoreConfig %+v, want Compress", got)
	}
}

// TestCloneAndEqual: a clone shares nothing and is Equal.
func TestCloneAndEqual(t *testing.T) {
	start := time.Unix(1, 0).UTC()
	c := Config{
		Name: "S", Subjects: []string{"a"}, Placement: &Placement{Tags: []string{"t"}},
		Mirror:           &Source{Name: "M", OptStartTime: &start, SubjectTransforms: []SubjectTransform{{"a", "b"}}, External: &ExternalStream{"p", "d"}, Consumer: &SourceConsumer{"c", "d"}},
		Sources:          []*Source{{Name: "X"}},
		SubjectTransform: &SubjectTransform{"a", "b"}, RePublish: &RePublish{Destination: "d"},
		Metadata: map[string]string{"k": "v"},
	}
	n := c.Clone()
	if !c.Equal(&n) {
		t.Fatal("clone not Equal")
	}
	n.Subjects[0] = "z"
	n.Placement.Tags[0] = "z"
	n.Mirror.SubjectTransforms[0].Source = "z"
	*n.Mirror.OptStartTime = time.Unix(2, 0)
	n.Mirror.External.APIPrefix = "z"
	n.Mirror.Consumer.Name = "z"
	n.Sources[0].Name = "z"
	n.SubjectTransform.Source = "z"
	n.RePublish.Source = "z"
	n.Metadata["k"] = "z"
	if c.Subjects[0] != "a" || c.Placement.Tags[0] != "t" || c.Mirror.SubjectTransforms[0].Source != "a" ||
		!c.Mirror.OptStartTime.Equal(start) || c.Mirror.External.APIPrefix != "p" || c.Mirror.Consumer.Name != "c" ||
		c.Sources[0].Name != "X" || c.SubjectTransform.Source != "a" || c.RePublish.Source != "" || c.Metadata["k"] != "v" {
		t.Errorf("clone shares state with the original: %+v", c)
	}
	if c.Equal(&n) {
		t.Error("changed clone still Equal")
	}
}

// TestMetadata covers the versioning keys (nats-server
// jetstream_versioning.go): a create stores _nats.req.level, a response
// adds _nats.ver and _nats.level, an echoed config loses them again.
func TestMetadata(t *testing.T) {
	c := Config{Name: "S", Metadata: map[string]string{MetaServerVersion: "x", MetaServerLevel: "9", "a": "b"}}
	c.SetStaticMetadata()
	if len(c.Metadata) != 2 || c.Metadata[MetaRequiredLevel] != "0" || c.Metadata["a"] != "b" {
		t.Errorf("static metadata %v", c.Metadata)
	}
	out := c.WithServerMetadata("2.15.2", 5)
	if out.Metadata[MetaServerVersion] != "2.15.2" || out.Metadata[MetaServerLevel] != "5" || len(c.Metadata) != 2 {
		t.Errorf("response metadata %v, stored %v", out.Metadata, c.Metadata)
	}
	var empty Config
	if m := empty.WithServerMetadata("v", 0).Metadata; len(m) != 2 {
		t.Errorf("metadata of an empty config %v", m)
	}
	for _, tc := range []struct {
		c    Config
		want int
	}{
		{Config{}, 0},
		{Config{AllowMsgTTL: true}, 1},
		{Config{SubjectDeleteMarkerTTL: time.Second}, 1},
		{Config{AllowMsgCounter: true, AllowMsgTTL: true}, 2},
		{Config{AllowAtomicPublish: true}, 2},
		{Config{AllowMsgSchedules: true}, 2},
		{Config{PersistMode: AsyncPersist}, 2},
		{Config{AllowBatchPublish: true, AllowMsgTTL: true}, 4},
	} {
		if got := tc.c.RequiredAPILevel(); got != tc.want {
			t.Errorf("RequiredAPILevel(%+v) = %d, want %d", tc.c, got, tc.want)
		}
	}
}

// TestCopyVersionMetadata: an identical re-create compares equal whatever
// versioning keys the request carried (nats-server copyStreamMetadata).
func TestCopyVersionMetadata(t *testing.T) {
	old := Config{Name: "S", Metadata: map[string]string{MetaRequiredLevel: "0"}}
	n := Config{Name: "S", Metadata: map[string]string{MetaRequiredLevel: "3", MetaServerVersion: "v"}}
	n.CopyVersionMetadata(&old)
	if !n.Equal(&old) {
		t.Errorf("after copy %v, want %v", n.Metadata, old.Metadata)
	}
	n = Config{Name: "S", Metadata: map[string]string{MetaRequiredLevel: "0"}}
	n.CopyVersionMetadata(&Config{Name: "S"})
	if n.Metadata != nil {
		t.Errorf("metadata %v, want nil", n.Metadata)
	}
	n = Config{Name: "S"}
	n.CopyVersionMetadata(&old)
	if n.Metadata[MetaRequiredLevel] != "0" {
		t.Errorf("metadata %v", n.Metadata)
	}
}
