package route

import (
	"bytes"
	"strings"
	"testing"

	"github.com/cairnmq/cairn/internal/wireline/streamtest"
)

// TestEncodeBytes pins the exact bytes nats-server v2.15.2 sends for the
// same operations (seen with -DV between two nats-server 2.15.2 servers).
func TestEncodeBytes(t *testing.T) {
	cases := []struct {
		got, want string
	}{
		{string(AppendSub(nil, "$G", "foo.>", "", 0)), "RS+ $G foo.>\r\n"},
		{string(AppendSub(nil, "$G", "foo.*", "q1", 1)), "RS+ $G foo.* q1 1\r\n"},
		{string(AppendSub(nil, "$G", "foo", "q1", 0)), "RS+ $G foo q1 1\r\n"},
		{string(AppendUnsub(nil, "$G", "_INBOX.x", "")), "RS- $G _INBOX.x\r\n"},
		{string(AppendUnsub(nil, "$G", "foo", "q1")), "RS- $G foo q1\r\n"},
		{string(AppendMsgHeader(nil, "$G", []byte("foo.bar"), nil, nil, -1, 5)), "RMSG $G foo.bar 5\r\n"},
		{string(AppendMsgHeader(nil, "$G", []byte("foo.bar"), []byte("r"), nil, -1, 5)), "RMSG $G foo.bar r 5\r\n"},
		{string(AppendMsgHeader(nil, "$G", []byte("foo.bar"), nil, []string{"q1"}, -1, 5)), "RMSG $G foo.bar | q1 5\r\n"},
		{string(AppendMsgHeader(nil, "$G", []byte("foo.bar"), []byte("_INBOX.a"), []string{"q1"}, -1, 2)), "RMSG $G foo.bar + _INBOX.a q1 2\r\n"},
		{string(AppendMsgHeader(nil, "$G", []byte("foo.bar"), nil, nil, 18, 23)), "HMSG $G foo.bar 18 23\r\n"},
		{string(AppendMsgHeader(nil, "$G", []byte("foo.bar"), nil, []string{"q1"}, 18, 23)), "HMSG $G foo.bar | q1 18 23\r\n"},
		{string(AppendErr(nil, "Authorization Violation")), "-ERR 'Authorization Violation'\r\n"},
		{string(AppendConnect(nil, &Connect{Echo: true, Headers: true, Name: "N1", Cluster: "C1"})),
			`CONNECT {"echo":true,"verbose":false,"pedantic":false,"tls_required":false,"headers":true,"name":"N1","cluster":"C1"}` + "\r\n"},
		{string(AppendInfo(nil, &Info{ID: "N1", Name: "n1", Version: "2.10.0", Proto: Proto, GoVersion: "go1", Host: "127.0.0.1", Port: 6222, Headers: true, MaxPayload: 1 << 20, Cluster: "C1", ConnectURLs: []string{"127.0.0.1:4222"}})),
			`INFO {"server_id":"N1","server_name":"n1","version":"2.10.0","proto":3,"go":"go1","host":"127.0.0.1","port":6222,"headers":true,"max_payload":1048576,"cluster":"C1","connect_urls":["127.0.0.1:4222"]} ` + "\r\n"},
	}
	for _, tc := range cases {
		if tc.got != tc.want {
			t.Errorf("got  %q\nwant %q", tc.got, tc.want)
		}
	}
}

// TestEncodeParseRoundTrip checks that what the encoder writes, the parser
// reads back unchanged, for every message layout.
func TestEncodeParseRoundTrip(t *testing.T) {
	payloads := []struct {
		hdr  int
		body string
	}{{-1, ""}, {-1, "hello"}, {12, "NATS/1.0\r\n\r\n"}, {12, "NATS/1.0\r\n\r\nbody"}}
	replies := []string{"", "_INBOX.abc.def"}
	queues := [][]string{nil, {"q1"}, {"q1", "workers", "x"}}
	var in bytes.Buffer
	var want []string
	for _, p := range payloads {
		for _, r := range replies {
			for _, q := range queues {
				var reply []byte
				if r != "" {
					reply = []byte(r)
				}
				in.Write(AppendMsgHeader(nil, "$G", []byte("orders.new"), reply, q, p.hdr, len(p.body)))
				in.WriteString(p.body + "\r\n")
				want = append(want, rmsg("$G", "orders.new", r, q, p.hdr, p.body))
			}
		}
	}
	in.Write(AppendSub(nil, "$G", "a.*", "q", 7))
	want = append(want, rsub("$G", "a.*", "q", 7))
	in.Write(AppendUnsub(nil, "$G", "a.*", "q"))
	want = append(want, runsub("$G", "a.*", "q"))
	got := feed(Config{}, in.Bytes())
	if !got.Equal(streamtest.Result{Ops: want}) {
		t.Fatalf("got %v\nwant %q", got, want)
	}
	bound := MsgHeaderBound("$G", []byte("s"), []byte(strings.Repeat("r", 50)), []string{"q1", "q2"})
	if n := len(AppendMsgHeader(nil, "$G", []byte("s"), []byte(strings.Repeat("r", 50)), []string{"q1", "q2"}, 999999999, 999999999)); n > bound {
		t.Fatalf("header %d bytes > bound %d", n, bound)
	}
}

func TestParseURLs(t *testing.T) {
	urls, err := ParseURLs(" nats://127.0.0.1:6222, nats-route://ruser:pw@host2:7000 ,,nats://host3")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, u := range urls {
		got = append(got, u.String())
	}
	want := "nats://127.0.0.1:6222 nats-route://ruser:pw@host2:7000 nats://host3:6222"
	if strings.Join(got, " ") != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	for _, bad := range []string{"nats://", "://x", "nats://h:p:q"} {
		if _, err := ParseURLs(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
