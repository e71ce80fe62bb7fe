package monitor

import (
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"
)

// sysErr returns the error description of a reply, "" when it has none.
func sysErr(v map[string]any) string {
	e, _ := v["error"].(map[string]any)
	d, _ := e["description"].(string)
	if d != "" && e["code"] != float64(500) {
		return fmt.Sprintf("code %v: %s", e["code"], d)
	}
	return d
}

// The control requests answer on this server's id only, with nats-server
// v2.15.2's texts: LDM sends the client an INFO with ldm true, KICK
// closes it with the reason "Kicked", a KICK without a client id body
// gets no answer, RELOAD runs Options.Reload or says it needs a file.
func TestSysControlRequests(t *testing.T) {
	s, m := startMonitored(t, nil)
	id := "$SYS.REQ.SERVER." + s.ID() + "."
	nc, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	fmt.Fprint(nc, "CONNECT {\"protocol\":1,\"verbose\":false}\r\nPING\r\n")
	readUntil(t, nc, "PONG\r\n")
	conns := s.Connections(false)
	if len(conns) != 1 {
		t.Fatalf("connections %+v", conns)
	}
	cid := conns[0].CID
	if got := sysErr(sysReply(t, m, id+"LDM", `{"cid":999}`)); got != "no such client id" {
		t.Errorf("LDM of an unknown client: %q", got)
	}
	if got := sysErr(sysReply(t, m, id+"LDM", fmt.Sprintf(`{"cid":%d}`, cid))); got != "" {
		t.Errorf("LDM: %q", got)
	}
	readUntil(t, nc, `"ldm":true`)
	if got := sysErr(sysReply(t, m, id+"KICK", `{"cid":999}`)); got != "no such client or leafnode id" {
		t.Errorf("KICK of an unknown client: %q", got)
	}
	for subject, body := range map[string]string{id + "KICK": "", id + "LDM": "not json", "$SYS.REQ.SERVER.PING.KICK": fmt.Sprintf(`{"cid":%d}`, cid),
		"$SYS.REQ.SERVER.PING.RELOAD": "", "$SYS.REQ.SERVER.PING.LDM": fmt.Sprintf(`{"cid":%d}`, cid)} {
		if b, ok := m.SysRequest(subject, []byte(body)); ok {
			t.Errorf("%s %q answered %s; want silence", subject, body, b)
		}
	}
	if got := sysErr(sysReply(t, m, id+"KICK", fmt.Sprintf(`{"cid":%d}`, cid))); got != "" {
		t.Errorf("KICK: %q", got)
	}
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadAll(nc); err != nil {
		t.Fatalf("the kicked connection was not closed: %v", err)
	}
	var cz Connz
	waitUntil(t, "the kicked connection among the closed ones", func() bool {
		getInto(t, m.URL()+"/connz?state=closed", &cz)
		return len(cz.Conns) == 1
	})
	if cz.Conns[0].Reason != "Kicked" {
		t.Errorf("closed reason %q, want Kicked", cz.Conns[0].Reason)
	}

	if got := sysErr(sysReply(t, m, id+"RELOAD", "")); got != errNoConfigFile.Error() {
		t.Errorf("RELOAD without a file: %q", got)
	}
	reloads := 0
	m.opts.Reload = func() error { reloads++; return nil }
	if got := sysErr(sysReply(t, m, id+"RELOAD", "")); got != "" || reloads != 1 {
		t.Errorf("RELOAD: %q, %d reloads", got, reloads)
	}
	m.opts.Reload = func() error { return errors.New("config reload not supported for jetstream") }
	if got := sysErr(sysReply(t, m, id+"RELOAD", "")); got != "config reload not supported for jetstream" {
		t.Errorf("RELOAD refused: %q", got)
	}
}

// PROFILEZ writes a named profile or says why not, with nats-server's
// texts; EXPVARZ has the memory statistics and the command line.
func TestSysProfilezExpvarz(t *testing.T) {
	s, m := startMonitored(t, nil)
	id := "$SYS.REQ.SERVER." + s.ID() + "."
	heap := sysReply(t, m, id+"PROFILEZ", `{"name":"heap"}`)
	if d, _ := heap["data"].(map[string]any); d["profile"] == nil || d["error"] != "" {
		t.Errorf("heap profile: %v", heap)
	}
	for body, want := range map[string]string{
		`{}`:                                    "Profile name not specified",
		`{"name":"nope"}`:                       `Profile "nope" not found`,
		`{"name":"cpu"}`:                        "Duration 0s should be between 0s and 15s",
		`{"name":"cpu","duration":16000000000}`: "Duration 16s should be between 0s and 15s",
		`{"name":"goroutine","debug":1}`:        "",
	} {
		r := sysReply(t, m, "$SYS.REQ.SERVER.PING.PROFILEZ", body)
		if d, _ := r["data"].(map[string]any); d["error"] != want {
			t.Errorf("PROFILEZ %s: %v, want error %q", body, d, want)
		}
	}
	ev := sysReply(t, m, "$SYS.REQ.SERVER.PING.EXPVARZ", "")
	d, _ := ev["data"].(map[string]any)
	mem, _ := d["memstats"].(map[string]any)
	cmd, _ := d["cmdline"].([]any)
	if mem["HeapAlloc"] == nil || len(cmd) == 0 || !strings.Contains(cmd[0].(string), "monitor") {
		t.Errorf("EXPVARZ: %v", d)
	}
}

// The command line EXPVARZ shows never holds a credential given as a
// flag (CVE-2026-33247, fixed in nats-server by RedactArgs).
func TestRedactArgs(t *testing.T) {
	in := []string{"cairn", "--user", "u1", "-pass=p1", "--auth", "tok", "-routes", "nats://ru:rp@h1:6222,nats://h2:6222",
		"--cluster=nats://cu:cp@0.0.0.0:6222", "-cluster_listen", "nats://h:1", "-n", "pass", "--user"}
	got := redactArgs(in)
	want := []string{"cairn", "--user", "[REDACTED]", "-pass=[REDACTED]", "--auth", "[REDACTED]", "-routes", "nats://[REDACTED]@h1:6222,nats://h2:6222",
		"--cluster=nats://[REDACTED]@0.0.0.0:6222", "-cluster_listen", "nats://h:1", "-n", "pass", "--user"}
	if !slices.Equal(got, want) {
		t.Errorf("redactArgs:\n got %q\nwant %q", got, want)
	}
	if in[2] != "u1" {
		t.Errorf("redactArgs changed its argument")
	}
	for _, secret := range []string{"u1", "p1", "tok", "rp", "cp"} {
		if strings.Contains(strings.Join(got, " "), secret+"@") || slices.Contains(got, secret) {
			t.Errorf("%q left in %q", secret, got)
		}
	}
}
