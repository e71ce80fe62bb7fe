package test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// `nats stream backup` and `nats stream restore` (natscli v0.5.0 through
// jsm.go): a stream with deleted sequences, headers and a consumer
// mid-way is backed up and restored into a fresh server as it was; a
// backup damaged or cut short is refused with the reason and installs
// nothing. The same against nats-server v2.15.2.

// backupFixture fills stream ORD on u: ord.1..ord.6 with a header,
// sequences 2 and 6 deleted, durable consumer PROC that delivered 1 and
// 3 and acknowledged 1.
func backupFixture(t *testing.T, u string) {
	t.Helper()
	nc := connect(t, u)
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORD", Subjects: []string{"ord.>"}})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 6; i++ {
		m := nats.NewMsg(fmt.Sprintf("ord.%d", i))
		m.Header.Set("Order", fmt.Sprint(i))
		m.Data = fmt.Appendf(nil, "order %d", i)
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	for _, seq := range []uint64{2, 6} {
		if err := s.DeleteMsg(ctx, seq); err != nil {
			t.Fatal(err)
		}
	}
	c, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "PROC", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := c.Fetch(2, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for m := range msgs.Messages() {
		if n == 0 {
			if err := m.DoubleAck(ctx); err != nil {
				t.Fatal(err)
			}
		}
		n++
	}
	if n != 2 {
		t.Fatalf("fetched %d messages, want 2", n)
	}
}

// checkRestored checks what backupFixture made, on u.
func checkRestored(t *testing.T, u string) {
	t.Helper()
	nc := connect(t, u)
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	s, err := js.Stream(ctx, "ORD")
	if err != nil {
		t.Fatal(err)
	}
	st := s.CachedInfo().State
	if st.Msgs != 4 || st.FirstSeq != 1 || st.LastSeq != 6 || st.NumDeleted != 2 {
		t.Fatalf("restored state %+v, want 4 messages 1..6 with 2 deleted", st)
	}
	for _, seq := range []uint64{1, 3, 4, 5} {
		m, err := s.GetMsg(ctx, seq)
		if err != nil || m.Subject != fmt.Sprintf("ord.%d", seq) || string(m.Data) != fmt.Sprintf("order %d", seq) || m.Header.Get("Order") != fmt.Sprint(seq) {
			t.Fatalf("message %d: %+v %v", seq, m, err)
		}
	}
	c, err := s.Consumer(ctx, "PROC")
	if err != nil {
		t.Fatal(err)
	}
	ci := c.CachedInfo()
	if ci.Delivered.Stream != 3 || ci.NumAckPending != 1 {
		t.Fatalf("restored consumer: delivered %+v, %d pending; want 3 and 1", ci.Delivered, ci.NumAckPending)
	}
	// It goes on from where it was: 4 and 5 are new, 3 is still pending.
	msgs, err := c.Fetch(2, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for m := range msgs.Messages() {
		md, _ := m.Metadata()
		got = append(got, md.Sequence.Stream)
	}
	if fmt.Sprint(got) != "[4 5]" {
		t.Fatalf("fetched %v after the restore, want [4 5]", got)
	}
	ack, err := js.Publish(ctx, "ord.new", []byte("new"))
	if err != nil || ack.Sequence != 7 {
		t.Fatalf("first publish after the restore: %+v %v, want sequence 7", ack, err)
	}
}

// backupFiles returns the backup's data file (stream.tar.s2 or
// stream.arc.s2, by the server's version).
func backupData(t *testing.T, dir string) string {
	t.Helper()
	for _, name := range []string{"stream.arc.s2", "stream.tar.s2"} {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatalf("no data file in backup %s", dir)
	return ""
}

// copyBackup copies a backup directory, changing its data file with mod.
func copyBackup(t *testing.T, src string, mod func([]byte) []byte) string {
	t.Helper()
	dst := t.TempDir()
	for _, name := range []string{"backup.json", filepath.Base(backupData(t, src))} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if name != "backup.json" {
			b = mod(b)
		}
		if err := os.WriteFile(filepath.Join(dst, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func TestCLIBackupRestore(t *testing.T) {
	natsCLI(t)
	js := func(o *server.Options) { o.JetStream = true }
	src := startServer(t, js)
	backupFixture(t, src)
	dir := filepath.Join(t.TempDir(), "backup")
	out, errOut := runCLI(t, src, "stream", "backup", "ORD", dir, "--consumers")
	if !strings.Contains(out+errOut, `for stream "ORD"`) {
		t.Fatalf("nats stream backup:\n%s%s", out, errOut)
	}
	data := backupData(t, dir)

	dst := startServer(t, js)
	out, errOut = runCLI(t, dst, "stream", "restore", dir)
	if !strings.Contains(out+errOut, `Restored stream "ORD"`) {
		t.Fatalf("nats stream restore:\n%s%s", out, errOut)
	}
	checkRestored(t, dst)

	// A restore over the stream it restored is refused (by the CLI,
	// which looks first; the server's 10130 is in TestDifferential).
	if got := runCLIFail(t, dst, "stream", "restore", dir); !strings.Contains(got, `Stream "ORD" already exist`) {
		t.Fatalf("restore of an existing stream:\n%s", got)
	}

	raw, err := os.ReadFile(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		mod  func([]byte) []byte
		want string
	}{
		{"damaged", func(b []byte) []byte { b[len(b)/2] ^= 0x08; return b }, "restore failed: s2: corrupt input"},
		{"truncated", func(b []byte) []byte { return b[:len(b)-10] }, "restore failed: s2: corrupt input"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := copyBackup(t, dir, func(b []byte) []byte { return tc.mod(append([]byte(nil), raw...)) })
			fresh := startServer(t, js)
			if got := runCLIFail(t, fresh, "stream", "restore", bad); !strings.Contains(got, tc.want) || !strings.Contains(got, "(10062)") {
				t.Fatalf("restore of a %s backup:\n%s\nwant %q (10062)", tc.name, got, tc.want)
			}
			nc := connect(t, fresh)
			defer nc.Close()
			jsc, _ := jetstream.New(nc)
			if _, err := jsc.Stream(context.Background(), "ORD"); err == nil {
				t.Fatalf("a %s backup installed stream ORD", tc.name)
			}
		})
	}
}

// A backup taken from nats-server v2.15.2 restores into cairn, and one
// taken from cairn into nats-server (the snapshot format is nats-server's
// own). It needs both servers and the CLI.
func TestBackupInterop(t *testing.T) {
	natsCLI(t)
	diffRequireNatsServer(t)
	opts := server.Options{Host: "127.0.0.1", Port: -1, JetStream: true}
	cairn := func() string {
		o := opts
		o.StoreDir = t.TempDir()
		u, _ := startCairn(t, o)
		return u
	}
	natsServer := func() string {
		o := opts
		o.StoreDir = t.TempDir()
		u, _ := startNatsServer(t, o)
		return u
	}
	for _, tc := range []struct {
		name     string
		from, to func() string
	}{
		{"nats-server to cairn", natsServer, cairn},
		{"cairn to nats-server", cairn, natsServer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := tc.from()
			backupFixture(t, src)
			dir := filepath.Join(t.TempDir(), "backup")
			if out, errOut := runCLI(t, src, "stream", "backup", "ORD", dir, "--consumers"); !strings.Contains(out+errOut, `for stream "ORD"`) {
				t.Fatalf("nats stream backup:\n%s%s", out, errOut)
			}
			dst := tc.to()
			if out, errOut := runCLI(t, dst, "stream", "restore", dir); !strings.Contains(out+errOut, `Restored stream "ORD"`) {
				t.Fatalf("nats stream restore:\n%s%s", out, errOut)
			}
			checkRestored(t, dst)
		})
	}
}
