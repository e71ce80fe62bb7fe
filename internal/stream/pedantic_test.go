package stream

import (
	"encoding/json"
	"testing"
)

// pedanticCases are stream create bodies with "pedantic": true and what
// CheckPedantic answers: the error nats-server v2.15.2 gave for the same
// body, or "ok" where it went on to create the stream.
var pedanticCases = []struct {
	name, in, want string
}{
	{"max_msgs below -1", `{"name":"P1","max_msgs":-5}`, `{"code":400,"err_code":10157,"description":"pedantic mode: max_msgs must be set to -1"}`},
	{"per subject before bytes", `{"name":"P2","max_msgs_per_subject":-3,"max_bytes":-3}`, `{"code":400,"err_code":10157,"description":"pedantic mode: max_msgs_per_subject must be set to -1"}`},
	{"max_msg_size below -1", `{"name":"P3","max_msg_size":-2}`, `{"code":400,"err_code":10157,"description":"pedantic mode: max_msg_size must be set to -1"}`},
	{"max_consumers below -1", `{"name":"PMC","max_consumers":-5}`, `{"code":400,"err_code":10157,"description":"pedantic mode: max_consumers must be set to -1"}`},
	{"max_age under the default window", `{"name":"P4","max_age":60000000000}`, `{"code":400,"err_code":10157,"description":"pedantic mode: duplicate window cannot be bigger than max age"}`},
	{"window set under max_age", `{"name":"P5","max_age":60000000000,"duplicate_window":30000000000}`, `ok`},
	{"limits before max_age", `{"name":"P6","max_age":-1,"max_msgs":-4}`, `{"code":400,"err_code":10157,"description":"pedantic mode: max_msgs must be set to -1"}`},
	{"negative max_age", `{"name":"P7","max_age":-1}`, `{"code":500,"err_code":10052,"description":"max age can not be negative"}`},
	{"short max_age", `{"name":"P16","max_age":50000000}`, `{"code":500,"err_code":10052,"description":"max age needs to be \u003e= 100ms"}`},
	{"markers without TTLs", `{"name":"P8","subject_delete_marker_ttl":2000000000}`, `{"code":500,"err_code":10052,"description":"subject delete marker cannot be set if message TTLs are disabled"}`},
	{"markers without rollups", `{"name":"P9","subject_delete_marker_ttl":2000000000,"allow_msg_ttl":true}`, `{"code":500,"err_code":10052,"description":"subject delete marker cannot be set if roll-ups are disabled"}`},
	{"markers with both", `{"name":"P10","subject_delete_marker_ttl":2000000000,"allow_msg_ttl":true,"allow_rollup_hdrs":true}`, `ok`},
	{"markers with deny_purge", `{"name":"P18","subject_delete_marker_ttl":2000000000,"deny_purge":true,"allow_rollup_hdrs":true}`, `{"code":500,"err_code":10052,"description":"roll-ups require the purge permission"}`},
	{"republish without source", `{"name":"P11","subjects":["p11"],"republish":{"dest":"rp.>"}}`, `{"code":400,"err_code":10157,"description":"pedantic mode: republish source can not be empty"}`},
	{"implicit republish", `{"name":"P12","subjects":["p12.>"],"subject_transform":{"src":"p12.>","dest":"t12.>"},"republish":{"src":">","dest":">"}}`, `{"code":400,"err_code":10157,"description":"pedantic mode: implicit republish based on subject transform"}`},
	{"replicas before limits", `{"name":"P15","num_replicas":-1,"max_msgs":-5}`, `{"code":400,"err_code":10133,"description":"replicas count cannot be negative"}`},
	{"schedules without rollups", `{"name":"SC7","subjects":["sc7.>"],"allow_msg_schedules":true}`, `{"code":500,"err_code":10052,"description":"message scheduling cannot be set if roll-ups are disabled"}`},
	{"schedules with rollups", `{"name":"SC9","subjects":["sc9.>"],"allow_msg_schedules":true,"allow_rollup_hdrs":true}`, `ok`},
	{"unlimited is fine", `{"name":"P20","max_consumers":-1,"max_msgs":-1}`, `ok`},
	{"defaults are fine", `{"name":"PSD"}`, `ok`},
}

func TestCheckPedantic(t *testing.T) {
	for _, tc := range pedanticCases {
		t.Run(tc.name, func(t *testing.T) {
			var c Config
			if err := json.Unmarshal([]byte(tc.in), &c); err != nil {
				t.Fatal(err)
			}
			got := "ok"
			if err := c.CheckPedantic(); err != nil {
				b, _ := json.Marshal(err)
				got = string(b)
			}
			if got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestCheckPedanticLeavesConfig checks that CheckPedantic reads the
// config only: SetDefaults still fixes what a non-pedantic request gets
// fixed.
func TestCheckPedanticLeavesConfig(t *testing.T) {
	c := Config{Name: "S", MaxMsgs: -5}
	_ = c.CheckPedantic()
	if c.MaxMsgs != -5 || c.Replicas != 0 {
		t.Fatalf("config changed: %+v", c)
	}
}
