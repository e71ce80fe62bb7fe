package monitor

import (
	"encoding/json"
	"strings"
	"testing"
)

func sysReply(t *testing.T, m *Monitor, subject, body string) map[string]any {
	t.Helper()
	b, ok := m.SysRequest(subject, []byte(body))
	if !ok {
		t.Fatalf("%s %s: no reply", subject, body)
	}
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v in %s", subject, err, b)
	}
	return v
}

// The $SYS request API answers with nats-server's envelopes: statsz for
// PING, {"server":..., "data":...} for PING.<X> and <id>.<X>, an error
// with code 400 for a body that is not JSON; a filter that does not name
// this server, or another server's id, gets no reply at all.
func TestSysRequests(t *testing.T) {
	s, m := startMonitored(t, nil)
	ping := sysReply(t, m, "$SYS.REQ.SERVER.PING", "")
	server, _ := ping["server"].(map[string]any)
	statsz, _ := ping["statsz"].(map[string]any)
	if server["id"] != s.ID() || server["ver"] == "" || statsz == nil || statsz["connections"] == nil || statsz["active_servers"] != float64(1) {
		t.Fatalf("PING: %v", ping)
	}
	varz := sysReply(t, m, "$SYS.REQ.SERVER.PING.VARZ", `{"server_name":"`+s.Options().ServerName+`","exact_match":true}`)
	if data, _ := varz["data"].(map[string]any); data["server_id"] != s.ID() {
		t.Fatalf("PING.VARZ: %v", varz)
	}
	connz := sysReply(t, m, "$SYS.REQ.SERVER."+s.ID()+".CONNZ", `{"subscriptions":true,"auth":true,"limit":1024}`)
	if data, _ := connz["data"].(map[string]any); data["limit"] != float64(1024) {
		t.Fatalf("<id>.CONNZ: %v", connz)
	}
	jsz := sysReply(t, m, "$SYS.REQ.SERVER.PING.JSZ", `{"raft":true}`)
	if data, _ := jsz["data"].(map[string]any); data["disabled"] != true {
		t.Fatalf("PING.JSZ without JetStream: %v", jsz)
	}
	for _, ep := range []string{"HEALTHZ", "SUBSZ", "ROUTEZ", "ACCOUNTZ", "LEAFZ", "GATEWAYZ", "STATSZ"} {
		sysReply(t, m, "$SYS.REQ.SERVER.PING."+ep, "")
	}
	bad := sysReply(t, m, "$SYS.REQ.SERVER.PING.CONNZ", `{"sort":`)
	if e, _ := bad["error"].(map[string]any); e["code"] != float64(400) {
		t.Fatalf("bad JSON: %v", bad)
	}
	sorted := sysReply(t, m, "$SYS.REQ.SERVER.PING.CONNZ", `{"sort":"nope"}`)
	if e, _ := sorted["error"].(map[string]any); e["code"] != float64(500) || !strings.Contains(e["description"].(string), "invalid sorting option") {
		t.Fatalf("bad sort: %v", sorted)
	}
	for subject, body := range map[string]string{
		"$SYS.REQ.SERVER.PING.VARZ":     `{"server_name":"someone-else"}`,
		"$SYS.REQ.SERVER.PING":          `{"tags":["az:1"]}`,
		"$SYS.REQ.SERVER.NOTME.VARZ":    ``,
		"$SYS.REQ.SERVER.PING.NOPE":     ``,
		"$SYS.REQ.ACCOUNT.PING.STATZ":   ``,
		"$SYS.REQ.SERVER.PING.JSZ":      `{"domain":"hub"}`,
		"$SYS.REQ.SERVER.PING.HEALTHZ":  `{"cluster":"c9","exact_match":true}`,
		"$SYS.REQ.SERVER.PING.ACCOUNTZ": `{"host":"10.9.9.9"}`,
		"$SYS.REQ.SERVER.PING.CONNZ":    `{"server_name":"` + s.Options().ServerName + `x"}`,
		"$SYS.REQ.SERVER.PING.SUBSZ":    `{"server_name":"zz"}`,
		"$SYS.REQ.SERVER.PING.ROUTEZ":   `{"server_name":"zz"}`,
		"$SYS.REQ.SERVER.PING.LEAFZ":    `{"server_name":"zz"}`,
		"$SYS.REQ.SERVER.PING.GATEWAYZ": `{"server_name":"zz"}`,
		"$SYS.REQ.SERVER.PING.STATSZ":   `{"server_name":"zz"}`,
	} {
		if b, ok := m.SysRequest(subject, []byte(body)); ok {
			t.Errorf("%s %s answered %s; want silence", subject, body, b)
		}
	}
}
