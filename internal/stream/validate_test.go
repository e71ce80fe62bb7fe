package stream

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/jserr"
)

// validateCases are stream create bodies and the error object nats-server
// v2.15.2 answered each with (nats-server v2.15.2 STREAM.CREATE, jsStreamCreateRequest; nats-server v2.15.2 validation, checkStreamCfg and checkConsumerCfg), or "ok".
// The ones marked cairn are deliberate differences: features cairn
// refuses rather than accepts without honouring.
var validateCases = []struct {
	name, in, want string
}{
	{"ok", `{"name":"S","subjects":["a.>","b"]}`, `ok`},
	{"name missing", `{"subjects":["a"]}`, `{"code":500,"err_code":10052,"description":"stream name is required and can not contain '.', '*', '\u003e', '\\', '/'"}`},
	{"name with a dot", `{"name":"a.b"}`, `{"code":500,"err_code":10052,"description":"stream name is required and can not contain '.', '*', '\u003e', '\\', '/'"}`},
	{"name with a space", `{"name":"a b"}`, `{"code":500,"err_code":10052,"description":"stream name is required and can not contain '.', '*', '\u003e', '\\', '/'"}`},
	{"name with a slash", `{"name":"a/b"}`, `{"code":400,"err_code":10128,"description":"Stream name can not contain path separators"}`},
	{"name too long", `{"name":"` + strings.Repeat("x", 256) + `"}`, `{"code":500,"err_code":10052,"description":"stream name is too long, maximum allowed is 255"}`},
	{"description too long", `{"name":"V2","description":"` + strings.Repeat("d", 4097) + `"}`, `{"code":500,"err_code":10052,"description":"stream description is too long, maximum allowed is 4096"}`},
	{"metadata too long", `{"name":"V3","metadata":{"k":"` + strings.Repeat("v", 131072) + `"}}`, `{"code":500,"err_code":10052,"description":"stream metadata exceeds maximum size of 131072 bytes"}`},
	{"sealed on create", `{"name":"C19","sealed":true}`, `{"code":500,"err_code":10052,"description":"stream configuration for create can not be sealed"}`},
	{"mirror_direct without mirror", `{"name":"C20","mirror_direct":true}`, `{"code":500,"err_code":10052,"description":"stream has no mirror but does have mirror direct"}`},
	{"replicas 6", `{"name":"C18","num_replicas":6}`, `{"code":500,"err_code":10052,"description":"maximum replicas is 5"}`},
	{"replicas negative", `{"name":"C17","num_replicas":-1}`, `{"code":400,"err_code":10133,"description":"replicas count cannot be negative"}`},
	{"replicas 3", `{"name":"C16","num_replicas":3}`, `{"code":500,"err_code":10074,"description":"replicas \u003e 1 not supported in non-clustered mode"}`},
	{"max_age negative", `{"name":"C2","max_age":-1}`, `{"code":500,"err_code":10052,"description":"max age can not be negative"}`},
	{"max_age 50ms", `{"name":"C3","max_age":50000000}`, `{"code":500,"err_code":10052,"description":"max age needs to be \u003e= 100ms"}`},
	{"max_age 100ms", `{"name":"C30","max_age":100000000}`, `ok`},
	{"window negative", `{"name":"C4","duplicate_window":-5}`, `{"code":500,"err_code":10052,"description":"duplicates window can not be negative"}`},
	{"window 5ns", `{"name":"C5","duplicate_window":5,"max_age":0}`, `{"code":500,"err_code":10052,"description":"duplicates window needs to be \u003e= 100ms"}`},
	{"window 50ms", `{"name":"C31","duplicate_window":50000000}`, `{"code":500,"err_code":10052,"description":"duplicates window needs to be \u003e= 100ms"}`},
	{"window over max_age", `{"name":"C6","duplicate_window":7200000000000,"max_age":3600000000000}`, `{"code":500,"err_code":10052,"description":"duplicates window can not be larger then max age"}`},
	{"window over 2m without max_age", `{"name":"V15","duplicate_window":200000000000,"max_age":0}`, `ok`},
	{"deny_purge with rollups", `{"name":"C7","deny_purge":true,"allow_rollup_hdrs":true}`, `{"code":500,"err_code":10052,"description":"roll-ups require the purge permission"}`},
	{"discard new per subject, discard old", `{"name":"C8","discard_new_per_subject":true}`, `{"code":500,"err_code":10052,"description":"discard new per subject requires discard new policy to be set"}`},
	{"discard new per subject, no per subject limit", `{"name":"C9","discard_new_per_subject":true,"discard":"NEW"}`, `{"code":500,"err_code":10052,"description":"discard new per subject requires max msgs per subject \u003e 0"}`},
	{"delete marker TTL 500ms", `{"name":"V7","subject_delete_marker_ttl":500000000}`, `{"code":500,"err_code":10052,"description":"subject delete marker TTL must be at least 1 second"}`},
	{"delete marker TTL negative", `{"name":"V8","subject_delete_marker_ttl":-1}`, `{"code":500,"err_code":10052,"description":"subject delete marker TTL must not be negative"}`},
	{"mirror with first_seq", `{"name":"V4","mirror":{"name":"O"},"first_seq":5}`, `{"code":400,"err_code":10143,"description":"stream mirrors can not have first sequence configured"}`},
	{"mirror with subjects", `{"name":"V5","mirror":{"name":"O"},"subjects":["x"]}`, `{"code":400,"err_code":10034,"description":"stream mirrors can not contain subjects"}`},
	{"mirror with sources", `{"name":"V6","mirror":{"name":"O"},"sources":[{"name":"P"}]}`, `{"code":400,"err_code":10031,"description":"stream mirrors can not also contain other sources"}`},
	{"subjects overlap", `{"name":"C10","subjects":["a.>","a.b"]}`, `{"code":500,"err_code":10052,"description":"subject \"a.\u003e\" overlaps with \"a.b\""}`},
	{"subjects overlap with wildcards", `{"name":"V9","subjects":["a.*","*.b"]}`, `{"code":500,"err_code":10052,"description":"subject \"a.*\" overlaps with \"*.b\""}`},
	{"subjects repeated", `{"name":"C12","subjects":["x","x"]}`, `{"code":500,"err_code":10052,"description":"subject \"x\" overlaps with \"x\""}`},
	{"subject invalid", `{"name":"C11","subjects":["a..b"]}`, `{"code":500,"err_code":10052,"description":"invalid subject"}`},
	{"subject with a space", `{"name":"V13","subjects":["a b"]}`, `{"code":500,"err_code":10052,"description":"invalid subject"}`},
	{"all subjects", `{"name":"C13","subjects":[">"]}`, `{"code":500,"err_code":10052,"description":"capturing all subjects requires no-ack to be true"}`},
	{"all subjects R3", `{"name":"X","subjects":[">"],"no_ack":true,"num_replicas":3}`, `{"code":500,"err_code":10052,"description":"capturing all subjects requires replicas of 1"}`},
	{"all subjects beside another", `{"name":"V1","subjects":["a",">"],"no_ack":true,"num_replicas":3}`, `{"code":500,"err_code":10052,"description":"subject \"a\" overlaps with \"\u003e\""}`},
	{"JS API space", `{"name":"C14","subjects":["$JS.API.>"]}`, `{"code":500,"err_code":10052,"description":"subjects that overlap with jetstream api require no-ack to be true"}`},
	{"JSC space", `{"name":"V10","subjects":["$JSC.x"]}`, `{"code":500,"err_code":10052,"description":"subjects that overlap with jetstream api require no-ack to be true"}`},
	{"JS events allowed", `{"name":"C29","subjects":["$JS.EVENT.x"]}`, `ok`},
	{"NRG space with no_ack", `{"name":"V12","subjects":["$NRG.>"],"no_ack":true}`, `ok`},
	{"SYS space", `{"name":"C15","subjects":["$SYS.x"]}`, `{"code":500,"err_code":10052,"description":"subjects that overlap with system api require no-ack to be true"}`},
	{"SYS account space allowed", `{"name":"V11","subjects":["$SYS.ACCOUNT.x"]}`, `ok`},
	{"republish cycle", `{"name":"C33","subjects":["foo"],"republish":{"dest":"foo"}}`, `{"code":500,"err_code":10052,"description":"stream configuration for republish destination forms a cycle"}`},
	{"placement preferred", `{"name":"C22","placement":{"preferred":"x"}}`, `{"code":500,"err_code":10052,"description":"preferred server not permitted in placement"}`},
	{"placement cluster and tags", `{"name":"C26","placement":{"cluster":"c","tags":["t"]}}`, `ok`},
	{"mirror", `{"name":"M","mirror":{"name":"O"}}`, `ok`},
	{"sources", `{"name":"Y","sources":[{"name":"O"}]}`, `ok`},
	{"durable source", `{"name":"DS1","sources":[{"name":"O","consumer":{"name":"C","deliver_subject":"dlv"}}]}`, `ok`},
	{"durable source bad name", `{"name":"DS2","sources":[{"name":"O","consumer":{"name":"a.b","deliver_subject":"dlv"}}]}`, `{"code":400,"err_code":10215,"description":"stream source consumer config is invalid"}`},
	{"durable source wildcard deliver", `{"name":"DS3","sources":[{"name":"O","consumer":{"name":"C","deliver_subject":"dlv.*"}}]}`, `{"code":400,"err_code":10215,"description":"stream source consumer config is invalid"}`},
	{"durable source start seq", `{"name":"DS4","sources":[{"name":"O","opt_start_seq":5,"consumer":{"name":"C","deliver_subject":"dlv"}}]}`, `{"code":400,"err_code":10215,"description":"stream source consumer config is invalid"}`},
	{"durable source filter", `{"name":"DS5","sources":[{"name":"O","filter_subject":"a","consumer":{"name":"C","deliver_subject":"dlv"}}]}`, `{"code":400,"err_code":10215,"description":"stream source consumer config is invalid"}`},
	{"durable source consumer twice", `{"name":"DS6","sources":[{"name":"O","consumer":{"name":"C","deliver_subject":"dlv"}},{"name":"O","subject_transforms":[{"src":"a","dest":"b"}],"consumer":{"name":"C","deliver_subject":"dlv2"}}]}`, `{"code":400,"err_code":10216,"description":"duplicate stream source consumer detected"}`},
	{"durable sources, two consumers", `{"name":"DS7","sources":[{"name":"O","consumer":{"name":"C","deliver_subject":"dlv"}},{"name":"O","consumer":{"name":"D","deliver_subject":"dlv2"}}]}`, `ok`},
	{"durable source no deliver subject", `{"name":"DS8","sources":[{"name":"O","consumer":{"name":"C"}}]}`, `{"code":400,"err_code":10215,"description":"stream source consumer config is invalid"}`},
	{"durable mirror", `{"name":"DS9","mirror":{"name":"O","consumer":{"name":"C","deliver_subject":"dlv"}}}`, `ok`},
	{"durable mirror filter", `{"name":"DS10","mirror":{"name":"O","filter_subject":"a","consumer":{"name":"C","deliver_subject":"dlv"}}}`, `{"code":400,"err_code":10213,"description":"stream mirror consumer config is invalid"}`},
	{"durable mirror no name", `{"name":"DS11","mirror":{"name":"O","consumer":{"name":"","deliver_subject":"dlv"}}}`, `{"code":400,"err_code":10213,"description":"stream mirror consumer config is invalid"}`},
	{"durable source same twice", `{"name":"DS12","sources":[{"name":"O","consumer":{"name":"C","deliver_subject":"dlv"}},{"name":"O","consumer":{"name":"C","deliver_subject":"dlv"}}]}`, `{"code":400,"err_code":10140,"description":"duplicate source configuration detected"}`},
	{"durable source start time", `{"name":"DS13","sources":[{"name":"O","opt_start_time":"2024-01-01T00:00:00Z","consumer":{"name":"C","deliver_subject":"dlv"}}]}`, `{"code":400,"err_code":10215,"description":"stream source consumer config is invalid"}`},
	{"mirror name invalid", `{"name":"V20","mirror":{"name":"a.b"}}`, `{"code":400,"err_code":10142,"description":"mirrored stream name is invalid"}`},
	{"source name invalid", `{"name":"V21","sources":[{"name":"a b"}]}`, `{"code":400,"err_code":10141,"description":"sourced stream name is invalid"}`},
	{"source twice", `{"name":"V22","sources":[{"name":"X"},{"name":"X"}]}`, `{"code":400,"err_code":10140,"description":"duplicate source configuration detected"}`},
	{"source twice, other filters", `{"name":"V23","sources":[{"name":"X","filter_subject":"a"},{"name":"X","filter_subject":"b"}]}`, `ok`},
	{"source filter and transforms", `{"name":"V24","sources":[{"name":"X","filter_subject":"a","subject_transforms":[{"src":"b","dest":"c"}]}]}`, `{"code":400,"err_code":10144,"description":"source with multiple subject transforms cannot also have a single subject filter"}`},
	{"source transform bad subject", `{"name":"V25","sources":[{"name":"X","subject_transforms":[{"src":"a..b","dest":"c"}]}]}`, `{"code":400,"err_code":10145,"description":"source transform source: invalid subject a..b"}`},
	{"source transform bad index", `{"name":"V26","sources":[{"name":"X","subject_transforms":[{"src":"a.*","dest":"c.{{wildcard(2)}}"}]}]}`, `{"code":400,"err_code":10146,"description":"source transform: invalid mapping destination: wildcard index out of range in {{wildcard(2)}}: [2]"}`},
	{"source transforms overlap", `{"name":"V27","sources":[{"name":"X","subject_transforms":[{"src":"a.>","dest":""},{"src":"a.b","dest":""}]}]}`, `{"code":400,"err_code":10147,"description":"source filters can not overlap"}`},
	{"mirror filter and transforms", `{"name":"V28","mirror":{"name":"X","filter_subject":"a","subject_transforms":[{"src":"b","dest":"c"}]}}`, `{"code":400,"err_code":10150,"description":"mirror with multiple subject transforms cannot also have a single subject filter"}`},
	{"mirror transforms overlap", `{"name":"V29","mirror":{"name":"X","subject_transforms":[{"src":"a.*","dest":""},{"src":"*.b","dest":""}]}}`, `{"code":400,"err_code":10152,"description":"mirror subject filters can not overlap"}`},
	{"mirror transform unknown function", `{"name":"V30","mirror":{"name":"X","subject_transforms":[{"src":"a","dest":"{{foo()}}"}]}}`, `{"code":400,"err_code":10154,"description":"mirror transform: invalid mapping destination: unknown function in {{foo()}}"}`},
	{"mirror with delete markers", `{"name":"V31","mirror":{"name":"X"},"subject_delete_marker_ttl":5000000000}`, `{"code":500,"err_code":10052,"description":"subject delete markers forbidden on mirrors"}`},
	{"mirror with start seq and time", `{"name":"V32","mirror":{"name":"X","opt_start_seq":5,"opt_start_time":"2024-01-01T00:00:00Z"}}`, `ok`},
	{"external source", `{"name":"V33","sources":[{"name":"X","external":{"api":"$JS.hub.API"}}]}`, `ok`},
	{"subject transform", `{"name":"T","subject_transform":{"src":"a","dest":"b"}}`, `ok`},
	{"republish > to a literal", `{"name":"R","subjects":["a"],"republish":{"dest":"b"}}`, `{"code":500,"err_code":10052,"description":"stream configuration for republish with transform from '\u003e' to 'b' not valid"}`},
	{"republish", `{"name":"R2","subjects":["r2.>"],"republish":{"src":"r2.>","dest":"rp2.>"}}`, `ok`},
	{"republish headers only with a wildcard", `{"name":"R3","subjects":["r3.*"],"republish":{"src":"r3.*","dest":"rp3.{{wildcard(1)}}","headers_only":true}}`, `ok`},
	{"message TTLs", `{"name":"T","allow_msg_ttl":true}`, `ok`},
	{"delete markers", `{"name":"T","subject_delete_marker_ttl":1000000000}`, `ok`},
	{"delete markers with deny_purge", `{"name":"T","subject_delete_marker_ttl":1000000000,"deny_purge":true}`, `ok`},
	{"delete markers, deny_purge and rollups", `{"name":"T","subject_delete_marker_ttl":1000000000,"deny_purge":true,"allow_rollup_hdrs":true}`, `{"code":500,"err_code":10052,"description":"roll-ups require the purge permission"}`},
	{"counters", `{"name":"CC","subjects":["cc.>"],"allow_msg_counter":true,"allow_direct":true}`, `ok`},
	{"counters, discard new", `{"name":"C1","subjects":["c1.>"],"allow_msg_counter":true,"discard":"new"}`, `{"code":500,"err_code":10052,"description":"counter stream cannot use discard new"}`},
	{"counters, TTLs", `{"name":"C2","subjects":["c2.>"],"allow_msg_counter":true,"allow_msg_ttl":true}`, `{"code":500,"err_code":10052,"description":"counter stream cannot use message TTLs"}`},
	{"counters, schedules", `{"name":"C3","subjects":["c3.>"],"allow_msg_counter":true,"allow_msg_schedules":true}`, `{"code":500,"err_code":10052,"description":"counter stream cannot use message schedules"}`},
	{"counters, workqueue", `{"name":"C4","subjects":["c4.>"],"allow_msg_counter":true,"retention":"workqueue"}`, `{"code":500,"err_code":10052,"description":"counter stream can only use limits retention"}`},
	{"counters, delete markers turn TTLs on after the check", `{"name":"C5","subjects":["c5.>"],"allow_msg_counter":true,"subject_delete_marker_ttl":5000000000}`, `ok`},
	{"counters, mirror", `{"name":"C6","allow_msg_counter":true,"mirror":{"name":"C1"}}`, `{"code":400,"err_code":10173,"description":"stream mirrors can not also calculate counters"}`},
	{"counters, deny_purge with rollups", `{"name":"C7","subjects":["c7.>"],"allow_msg_counter":true,"deny_purge":true,"allow_rollup_hdrs":true}`, `{"code":500,"err_code":10052,"description":"roll-ups require the purge permission"}`},
	{"schedules", `{"name":"SCH","subjects":["sch.>","orders.>"],"allow_msg_schedules":true,"allow_msg_ttl":true}`, `ok`},
	{"schedules, discard new", `{"name":"SC2","subjects":["sc2.>"],"allow_msg_schedules":true,"discard":"new"}`, `{"code":500,"err_code":10052,"description":"message scheduling cannot use discard new"}`},
	{"schedules, source", `{"name":"SC4","subjects":["sc4.>"],"allow_msg_schedules":true,"sources":[{"name":"SCH"}]}`, `{"code":400,"err_code":10187,"description":"stream source can not also schedule messages"}`},
	{"schedules, mirror", `{"name":"SC5","allow_msg_schedules":true,"mirror":{"name":"SCH"}}`, `{"code":400,"err_code":10186,"description":"stream mirrors can not also schedule messages"}`},
	{"async persist", `{"name":"A","persist_mode":"async"}`, `ok`},
	{"async persist, memory", `{"name":"B","persist_mode":"async","storage":"memory"}`, `{"code":500,"err_code":10052,"description":"async persist mode is only supported on file storage"}`},
	{"async persist, replicas 3", `{"name":"C","persist_mode":"async","num_replicas":3}`, `{"code":500,"err_code":10052,"description":"async persist mode is not supported on replicated streams"}`},
	{"async persist, atomic batches", `{"name":"D","persist_mode":"async","allow_atomic":true}`, `{"code":500,"err_code":10052,"description":"async persist mode is not supported with atomic batch publish"}`},
	{"async persist, memory, atomic, replicas 3", `{"name":"M","persist_mode":"async","storage":"memory","allow_atomic":true,"num_replicas":3}`, `{"code":500,"err_code":10052,"description":"async persist mode is only supported on file storage"}`},
	{"async persist, replicas 3, atomic", `{"name":"N","persist_mode":"async","num_replicas":3,"allow_atomic":true}`, `{"code":500,"err_code":10052,"description":"async persist mode is not supported on replicated streams"}`},
	{"async persist, fast batches", `{"name":"K","persist_mode":"async","allow_batched":true}`, `ok`},
	{"async persist, counters", `{"name":"L","persist_mode":"async","allow_msg_counter":true}`, `ok`},
	{"async persist, mirror", `{"name":"O","persist_mode":"async","mirror":{"name":"A"}}`, `ok`},
	{"default persist", `{"name":"H","persist_mode":"default"}`, `ok`},
}

// TestValidate runs each create body through the API layer's steps
// (SetStaticMetadata, CheckCreate, SetDefaults, Validate) and compares the
// error object with nats-server's.
// TestValidateSchedulesForceRollups: schedules turn on roll-ups with the
// purge permission, as nats-server v2.15.2 answered for
// {"name":"SC3","subjects":["sc3.>"],"allow_msg_schedules":true,"deny_purge":true}.
func TestValidateSchedulesForceRollups(t *testing.T) {
	c := mustConfig(t, `{"name":"SC3","subjects":["sc3.>"],"allow_msg_schedules":true,"deny_purge":true}`)
	if !c.AllowRollup || c.DenyPurge {
		t.Fatalf("allow_rollup_hdrs %v deny_purge %v, want true false", c.AllowRollup, c.DenyPurge)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range validateCases {
		t.Run(tc.name, func(t *testing.T) {
			var c Config
			if err := json.Unmarshal([]byte(tc.in), &c); err != nil {
				t.Fatal(err)
			}
			if got := errJSON(createCheck(&c)); got != tc.want {
				t.Errorf("\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// createCheck is the create path of the doc comment, without the other
// streams.
func createCheck(c *Config) *jserr.Error {
	c.SetStaticMetadata()
	if err := c.CheckCreate(); err != nil {
		return err
	}
	c.SetDefaults()
	return c.Validate()
}

func errJSON(e *jserr.Error) string {
	if e == nil {
		return "ok"
	}
	b, err := json.Marshal(e)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// TestValidateWithoutDefaults reaches the checks SetDefaults makes
// unreachable: a config with no subject and enumeration values set in Go.
func TestValidateWithoutDefaults(t *testing.T) {
	tests := []struct {
		c    Config
		want string
	}{
		{Config{Name: "S", Replicas: 1}, "stream needs at least one configured subject or be a source/mirror"},
		{Config{Name: "S", Subjects: []string{"a"}, Retention: 3}, "invalid retention"},
		{Config{Name: "S", Subjects: []string{"a"}, Discard: -1}, "invalid discard policy"},
		{Config{Name: "S", Subjects: []string{"a"}, Compression: 2}, "invalid compression"},
		{Config{Name: "S", Subjects: []string{"a"}, Storage: 5}, "invalid storage type"},
	}
	for _, tc := range tests {
		err := tc.c.Validate()
		if err == nil || err.ErrCode != uint16(jserr.StreamInvalidConfig) || err.Description != tc.want {
			t.Errorf("%+v: %v, want 10052 %q", tc.c, err, tc.want)
		}
	}
}

// updateCases are stream updates of the stream created with base, and
// nats-server v2.15.2's answers (nats-server v2.15.2 configUpdateCheck, what an update may change).
var updateCases = []struct {
	name, in, want string
}{
	{"same", `{"name":"U","subjects":["u.>"],"retention":"interest","deny_delete":true,"deny_purge":true,"max_age":3600000000000}`, `ok`},
	{"limits and subjects may change", `{"name":"U","subjects":["v.>"],"retention":"limits","deny_delete":true,"deny_purge":true,"max_msgs":5}`, `ok`},
	{"name", `{"name":"V","subjects":["u.>"],"retention":"interest","deny_delete":true,"deny_purge":true}`, `{"code":500,"err_code":10052,"description":"stream configuration name must match original"}`},
	{"storage", `{"name":"U","subjects":["u.>"],"retention":"interest","deny_delete":true,"deny_purge":true,"storage":"memory"}`, `{"code":500,"err_code":10052,"description":"stream configuration update can not change storage type"}`},
	{"to workqueue", `{"name":"U","subjects":["u.>"],"retention":"workqueue","deny_delete":true,"deny_purge":true}`, `{"code":500,"err_code":10052,"description":"stream configuration update can not change retention policy to/from workqueue"}`},
	{"cancel deny_delete", `{"name":"U","subjects":["u.>"],"retention":"limits","deny_delete":false,"deny_purge":true}`, `{"code":500,"err_code":10052,"description":"stream configuration update can not cancel deny message deletes"}`},
	{"cancel deny_purge", `{"name":"U","subjects":["u.>"],"retention":"limits","deny_delete":true,"deny_purge":false}`, `{"code":500,"err_code":10052,"description":"stream configuration update can not cancel deny purge"}`},
	{"replicas", `{"name":"U","subjects":["u.>"],"num_replicas":3,"deny_delete":true,"deny_purge":true}`, `{"code":500,"err_code":10074,"description":"replicas \u003e 1 not supported in non-clustered mode"}`},
}

// TestCheckUpdate runs each update through SetDefaults, Validate and
// CheckUpdate against the created base config.
func TestCheckUpdate(t *testing.T) {
	base := mustConfig(t, `{"name":"U","subjects":["u.>"],"retention":"interest","deny_delete":true,"deny_purge":true,"max_age":3600000000000}`)
	for _, tc := range updateCases {
		t.Run(tc.name, func(t *testing.T) {
			var n Config
			if err := json.Unmarshal([]byte(tc.in), &n); err != nil {
				t.Fatal(err)
			}
			n.SetDefaults()
			err := n.Validate()
			if err == nil {
				err = CheckUpdate(&base, &n)
			}
			if got := errJSON(err); got != tc.want {
				t.Errorf("\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestCheckUpdatePersistMode: updates of an async stream A and of a
// default stream H, with nats-server v2.15.2's answers (ADR-56: the mode
// cannot change; the create checks on the new config come first).
func TestCheckUpdatePersistMode(t *testing.T) {
	bases := map[string]Config{
		"A": mustConfig(t, `{"name":"A","persist_mode":"async"}`),
		"H": mustConfig(t, `{"name":"H","persist_mode":"default"}`),
	}
	changeMode := `{"code":500,"err_code":10052,"description":"stream configuration update can not change persist mode"}`
	for _, tc := range []struct{ name, in, want string }{
		{"A", `{"name":"A"}`, changeMode},
		{"A", `{"name":"A","persist_mode":"default"}`, changeMode},
		{"H", `{"name":"H","persist_mode":"async"}`, changeMode},
		{"A", `{"name":"A","persist_mode":"async","allow_atomic":true}`, `{"code":500,"err_code":10052,"description":"async persist mode is not supported with atomic batch publish"}`},
		{"A", `{"name":"A","persist_mode":"async","storage":"memory"}`, `{"code":500,"err_code":10052,"description":"async persist mode is only supported on file storage"}`},
		{"A", `{"name":"A","persist_mode":"async","num_replicas":3}`, `{"code":500,"err_code":10052,"description":"async persist mode is not supported on replicated streams"}`},
		{"H", `{"name":"H","persist_mode":"async","num_replicas":3}`, `{"code":500,"err_code":10052,"description":"async persist mode is not supported on replicated streams"}`},
		{"H", `{"name":"H","storage":"memory","persist_mode":"async"}`, `{"code":500,"err_code":10052,"description":"async persist mode is only supported on file storage"}`},
		{"A", `{"name":"A","persist_mode":"async","max_msgs":10}`, `ok`},
		{"H", `{"name":"H","max_msgs":10}`, `ok`},
	} {
		var n Config
		if err := json.Unmarshal([]byte(tc.in), &n); err != nil {
			t.Fatal(err)
		}
		n.SetDefaults()
		err := n.Validate()
		if err == nil {
			base := bases[tc.name]
			err = CheckUpdate(&base, &n)
		}
		if got := errJSON(err); got != tc.want {
			t.Errorf("update %s with %s:\n got %s\nwant %s", tc.name, tc.in, got, tc.want)
		}
	}
}

// mustConfig returns the defaulted, valid config decoded from in.
func mustConfig(t *testing.T, in string) Config {
	t.Helper()
	var c Config
	if err := json.Unmarshal([]byte(in), &c); err != nil {
		t.Fatal(err)
	}
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCheckUpdateSeal: sealing rewrites the config as nats-server's
// stream_update_response shows; unsealing is refused.
func TestCheckUpdateSeal(t *testing.T) {
	base := mustConfig(t, `{"name":"U","subjects":["u.>"],"deny_delete":true,"deny_purge":true,"max_age":3600000000000,"allow_rollup_hdrs":false}`)
	n := base.Clone()
	n.Sealed = true
	if err := CheckUpdate(&base, &n); err != nil {
		t.Fatal(err)
	}
	if n.MaxAge != 0 || n.Discard != DiscardNew || !n.DenyDelete || !n.DenyPurge || n.AllowRollup {
		t.Errorf("sealed config %+v", n)
	}
	if n.DuplicateWindow != 2*time.Minute {
		t.Errorf("duplicate window %v changed", n.DuplicateWindow)
	}
	back := n.Clone()
	back.Sealed = false
	want := `{"code":500,"err_code":10052,"description":"stream configuration update can not unseal a sealed stream"}`
	if got := errJSON(CheckUpdate(&n, &back)); got != want {
		t.Errorf("unseal: %s", got)
	}
}

// TestCheckUpdateFeatures reaches the update checks that Validate cannot
// make unreachable by itself: configs are built in Go.
func TestCheckUpdateFeatures(t *testing.T) {
	base := Config{Name: "S", Replicas: 1}
	tests := []struct {
		name     string
		old, new func(c *Config)
		want     string
	}{
		{"disable TTL", func(c *Config) { c.AllowMsgTTL = true }, func(c *Config) {}, "message TTL status can not be disabled"},
		{"change counters", func(c *Config) {}, func(c *Config) { c.AllowMsgCounter = true }, "stream configuration update can not change message counter setting"},
		{"disable schedules", func(c *Config) { c.AllowMsgSchedules = true }, func(c *Config) {}, "message schedules can not be disabled"},
		{"persist mode", func(c *Config) {}, func(c *Config) { c.PersistMode = AsyncPersist }, "stream configuration update can not change persist mode"},
		{"discard new per subject", func(c *Config) {}, func(c *Config) { c.DiscardNewPerSubject = true }, "discard new per subject requires discard new policy to be set"},
		{"discard new per subject limit", func(c *Config) {}, func(c *Config) { c.DiscardNewPerSubject, c.Discard = true, DiscardNew },
			"discard new per subject requires max msgs per subject > 0"},
	}
	for _, tc := range tests {
		old, n := base.Clone(), base.Clone()
		tc.old(&old)
		tc.new(&n)
		err := CheckUpdate(&old, &n)
		if err == nil || err.ErrCode != uint16(jserr.StreamInvalidConfig) || err.Description != tc.want {
			t.Errorf("%s: %v, want 10052 %q", tc.name, err, tc.want)
		}
	}
}

// TestCheckUpdateReplicas: CheckUpdate refuses replicas by itself too.
func TestCheckUpdateReplicas(t *testing.T) {
	old, n := Config{Name: "S", Replicas: 1}, Config{Name: "S", Replicas: 3}
	if err := CheckUpdate(&old, &n); err == nil || err.ErrCode != uint16(jserr.StreamReplicasNotSupported) {
		t.Errorf("%v, want 10074", err)
	}
}

// TestCheckUpdateMirror: a mirror may be removed but not changed (10055).
func TestCheckUpdateMirror(t *testing.T) {
	old := Config{Name: "S", Replicas: 1, Mirror: &Source{Name: "O"}}
	removed := Config{Name: "S", Replicas: 1}
	if err := CheckUpdate(&old, &removed); err != nil {
		t.Errorf("remove mirror: %v", err)
	}
	same := Config{Name: "S", Replicas: 1, Mirror: &Source{Name: "O"}}
	if err := CheckUpdate(&old, &same); err != nil {
		t.Errorf("same mirror: %v", err)
	}
	for _, n := range []Config{
		{Name: "S", Replicas: 1, Mirror: &Source{Name: "P"}},
		{Name: "S", Replicas: 1, Mirror: &Source{Name: "O", FilterSubject: "x"}},
	} {
		want := `{"code":400,"err_code":10055,"description":"stream mirror configuration can not be updated"}`
		if got := errJSON(CheckUpdate(&old, &n)); got != want {
			t.Errorf("change mirror to %+v: %s", n.Mirror, got)
		}
	}
	added := Config{Name: "S", Replicas: 1, Mirror: &Source{Name: "O"}}
	if err := CheckUpdate(&removed, &added); err == nil || err.ErrCode != uint16(jserr.StreamMirrorNotUpdatable) {
		t.Errorf("add mirror: %v", err)
	}
}

// TestValidName covers the characters a stream name may not hold.
func TestValidName(t *testing.T) {
	for _, bad := range []string{"", "a.b", "a*", "a>", `a\b`, "a/b", "a b", "a\tb", "a\rb", "a\nb", "a\fb"} {
		if ValidName(bad) {
			t.Errorf("ValidName(%q) = true", bad)
		}
	}
	for _, good := range []string{"ORDERS", "KV_cfg", "a-b", "ünïcode", "A<B"} {
		if !ValidName(good) {
			t.Errorf("ValidName(%q) = false", good)
		}
	}
}

// subject_delete_marker_ttl turns on what markers need, as nats-server
// v2.15.2 checkStreamCfg does outside pedantic mode: allow_msg_ttl, and
// roll-ups with the purge permission.
func TestMarkerFlagsForced(t *testing.T) {
	c := Config{Name: "M", SubjectDeleteMarkerTTL: time.Second, DenyPurge: true}
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if !c.AllowMsgTTL || !c.AllowRollup || c.DenyPurge {
		t.Fatalf("allow_msg_ttl %v, allow_rollup_hdrs %v, deny_purge %v; want true, true, false", c.AllowMsgTTL, c.AllowRollup, c.DenyPurge)
	}
	sc := c.StoreConfig()
	if !sc.MsgTTL || !sc.SubjectDeleteMarkers {
		t.Fatalf("store config %+v: want MsgTTL and SubjectDeleteMarkers", sc)
	}
}

// A clustered JetStream takes durable source and mirror consumers and
// external mirrors and sources (their sourcers run on the stream's
// leader, docs/cluster.md "Sourcing in a cluster"), with nats-server's
// own checks of them.
func TestValidateClusteredDurableSources(t *testing.T) {
	for in, want := range map[string]string{
		`{"name":"E","sources":[{"name":"O","external":{"api":"RI.JS.API","deliver":"RI.D"}}]}`:                                                                                                        `ok`,
		`{"name":"F","mirror":{"name":"O","external":{"api":"$JS.hub.API"}}}`:                                                                                                                          `ok`,
		`{"name":"A","sources":[{"name":"O","consumer":{"name":"C","deliver_subject":"d"}}]}`:                                                                                                          `ok`,
		`{"name":"B","mirror":{"name":"O","consumer":{"name":"C","deliver_subject":"d"}}}`:                                                                                                             `ok`,
		`{"name":"C","mirror":{"name":"O","consumer":{"name":"C","deliver_subject":"d.*"}}}`:                                                                                                           `{"code":400,"err_code":10213,"description":"stream mirror consumer config is invalid"}`,
		`{"name":"D","sources":[{"name":"O","consumer":{"name":"C"}}]}`:                                                                                                                                `{"code":400,"err_code":10215,"description":"stream source consumer config is invalid"}`,
		`{"name":"G","sources":[{"name":"O","consumer":{"name":"C","deliver_subject":"d"}},{"name":"O","subject_transforms":[{"src":"a","dest":"b"}],"consumer":{"name":"C","deliver_subject":"e"}}]}`: `{"code":400,"err_code":10216,"description":"duplicate stream source consumer detected"}`,
	} {
		var c Config
		if err := json.Unmarshal([]byte(in), &c); err != nil {
			t.Fatal(err)
		}
		c.SetDefaults()
		if got := errJSON(c.ValidateClustered()); got != want {
			t.Errorf("%s:\n got %s\nwant %s", in, got, want)
		}
	}
}

// A durable source's index name carries the hash of its consumer's name
// (nats-server v2.15.2 composeIName), so that two sources of one origin
// through two consumers are two sources.
func TestIndexNameDurable(t *testing.T) {
	s := Source{Name: "O", Consumer: &SourceConsumer{Name: "C", DeliverSubject: "d"}}
	if got, want := s.IndexName(), "O:C="+Hash8("C")+" > >"; got != want {
		t.Fatalf("IndexName %q, want %q", got, want)
	}
	if Hash8("C") == Hash8("D") || len(Hash8("C")) != 8 {
		t.Fatalf("Hash8 %q %q", Hash8("C"), Hash8("D"))
	}
}

// An external mirror's or source's prefixes are checked as nats-server
// v2.15.2 checkStreamCfg checks them: a deliver prefix with a wildcard
// (10024) or under which an origin's subject collides (10022), an api
// prefix with a wildcard (10052) or overlapping $JS.API (10021).
func TestCheckOriginsExternalPrefixes(t *testing.T) {
	origins := func(name string) (Config, bool) {
		if name == "L" {
			return Config{Name: "L", Subjects: []string{"d.>"}}, true
		}
		return Config{}, false
	}
	for in, want := range map[string]string{
		`{"name":"A","sources":[{"name":"O","external":{"api":"RI.JS.API","deliver":"RI.D"}}]}`:           `ok`,
		`{"name":"A","mirror":{"name":"O","external":{"api":"$JS.hub.API"}}}`:                             `ok`,
		`{"name":"A","sources":[{"name":"O","external":{"api":"RI.JS.API","deliver":"RI.*"}}]}`:           `{"code":400,"err_code":10024,"description":"stream external delivery prefix RI.* must not contain wildcards"}`,
		`{"name":"A","sources":[{"name":"L"},{"name":"O","external":{"api":"RI.JS.API","deliver":"d"}}]}`: `{"code":400,"err_code":10022,"description":"stream external delivery prefix d overlaps with stream subject d.\u003e"}`,
		`{"name":"A","mirror":{"name":"O","external":{"api":"RI.>"}}}`:                                    `{"code":500,"err_code":10052,"description":"stream external api prefix \"RI.\u003e\" must be a valid subject without wildcards"}`,
		`{"name":"A","sources":[{"name":"O","external":{"api":"$JS.API","deliver":"x"}}]}`:                `{"code":400,"err_code":10021,"description":"stream external api prefix $JS.API must not overlap with $JS.API"}`,
	} {
		var c Config
		if err := json.Unmarshal([]byte(in), &c); err != nil {
			t.Fatal(err)
		}
		c.SetDefaults()
		if got := errJSON(c.CheckOrigins(origins, false)); got != want {
			t.Errorf("%s:\n got %s\nwant %s", in, got, want)
		}
	}
}
