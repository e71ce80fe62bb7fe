package test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// External mirrors and sources across accounts on one server
// (docs/external-sourcing.md): the account S imports the account O's
// consumer API, its deliver subjects and its flow control replies, as
// nats-server v2.15.2's own tests do (jsClusterMirrorSourceImportsTempl),
// and mirrors and sources O's stream. The same file runs against cairn
// and nats-server v2.15.2, and what the streams hold is compared.

func externalConf(storeDir string) string {
	return fmt.Sprintf(`
jetstream { store_dir: %q }
accounts {
  O {
    users = [ { user: o, password: p } ]
    jetstream: enabled
    exports = [
      { service: "$JS.API.CONSUMER.>" }
      { stream: "RI.DELIVER.SYNC.>" }
      { service: "$JS.FC.>" }
    ]
  }
  S {
    users = [ { user: s, password: p } ]
    jetstream: enabled
    imports = [
      { service: { account: O, subject: "$JS.API.CONSUMER.>" }, to: "RI.JS.API.CONSUMER.>" }
      { stream: { account: O, subject: "RI.DELIVER.SYNC.>" } }
      { service: { account: O, subject: "$JS.FC.>" } }
    ]
  }
}
`, storeDir)
}

// extServer is cairn or nats-server started from a file, restartable on
// the same store.
type extServer struct {
	name    string
	url     string
	restart func(t *testing.T)
}

// extServers starts cairn and, when installed, nats-server from conf
// (whose store_dir is store).
func extServers(t *testing.T, conf func(store string) string) []*extServer {
	t.Helper()
	store := t.TempDir()
	text := conf(store)
	tg := startCairnConf(t, text, nil)
	c := &extServer{name: "cairn", url: tg.url}
	c.restart = func(t *testing.T) {
		tg.stop()
		tg = startCairnConf(t, text, nil)
		c.url = tg.url
	}
	out := []*extServer{c}
	if !natsServerAvailable(t) {
		return out
	}
	path := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(path, []byte(conf(t.TempDir())+"\nlisten: 127.0.0.1:-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProc(t, natsServerBinary(t), nil, "-c", path)
	n := &extServer{name: "nats-server", url: p.clientURL(t)}
	n.restart = func(t *testing.T) {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			t.Fatal("nats-server did not stop")
		}
		p = startProc(t, natsServerBinary(t), nil, "-c", path)
		n.url = p.clientURL(t)
	}
	return append(out, n)
}

// extConnect connects user to u through nats.go's JetStream.
func extConnect(t *testing.T, u, user string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(u, nats.UserInfo(user, "p"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// extContents is what a stream holds, one "subject data" a message, in
// order.
func extContents(t *testing.T, s jetstream.Stream) []string {
	t.Helper()
	info := streamInfo(t, s)
	var out []string
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(tctx(t), seq)
		if err != nil {
			t.Fatalf("get %d: %v", seq, err)
		}
		out = append(out, m.Subject+" "+string(m.Data))
	}
	return out
}

// extPublish publishes n messages on orig.a.<i> and orig.b.<i>
// alternately, from i = from.
func extPublish(t *testing.T, js jetstream.JetStream, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		sub := "orig.a"
		if i%2 == 0 {
			sub = "orig.b"
		}
		jsPublish(t, js, fmt.Sprintf("%s.%d", sub, i), fmt.Sprintf("m%d", i))
	}
}

// wantContents waits until s holds exactly want.
func wantContents(t *testing.T, s jetstream.Stream, want []string) {
	t.Helper()
	waitMsgsWithin(t, s, uint64(len(want)), 20*time.Second)
	if got := extContents(t, s); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("%s holds\n%s\nwant\n%s", s.CachedInfo().Config.Name, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// expected is what the origin published, in order, on subjects
// matching prefix ("" for all), for messages from 1 through n.
func expected(n int, prefix string) []string {
	var out []string
	for i := 1; i <= n; i++ {
		sub := "orig.a"
		if i%2 == 0 {
			sub = "orig.b"
		}
		if strings.HasPrefix(sub, prefix) {
			out = append(out, fmt.Sprintf("%s.%d m%d", sub, i, i))
		}
	}
	return out
}

// An external mirror and an external filtered source copy what the
// origin account's stream held before they were created and what it
// gets after, in order and once; stream info names the external
// prefixes and reports no error; a restart resumes without duplicates or
// gaps; while the origin is deleted the mirror reports 10059, and once
// it is created again the mirror copies its messages above what it
// holds.
func TestExternalSourcesAcrossAccounts(t *testing.T) {
	t.Parallel() // its servers listen on random ports, also after a restart
	for _, srv := range extServers(t, externalConf) {
		t.Run(srv.name, func(t *testing.T) {
			t.Parallel() // each target has its own server and store; both mostly wait for source retries
			runExternalAcrossAccounts(t, srv, "RI.JS.API")
		})
	}
}

func runExternalAcrossAccounts(t *testing.T, srv *extServer, api string) {
	jo, js := extConnect(t, srv.url, "o"), extConnect(t, srv.url, "s")
	createStream(t, jo, jetstream.StreamConfig{Name: "ORIG", Subjects: []string{"orig.>"}})
	extPublish(t, jo, 1, 5)
	mir := createStream(t, js, jetstream.StreamConfig{Name: "MIR", Mirror: &jetstream.StreamSource{
		Name: "ORIG", External: &jetstream.ExternalStream{APIPrefix: api, DeliverPrefix: "RI.DELIVER.SYNC.MIRRORS"}}})
	src := createStream(t, js, jetstream.StreamConfig{Name: "SRC", Sources: []*jetstream.StreamSource{{
		Name: "ORIG", FilterSubject: "orig.a.>", External: &jetstream.ExternalStream{APIPrefix: api, DeliverPrefix: "RI.DELIVER.SYNC.SOURCES"}}}})
	wantContents(t, mir, expected(5, ""))
	wantContents(t, src, expected(5, "orig.a"))
	extPublish(t, jo, 6, 5)
	wantContents(t, mir, expected(10, ""))
	wantContents(t, src, expected(10, "orig.a"))

	info := streamInfo(t, src)
	if len(info.Sources) != 1 || info.Sources[0].External == nil || info.Sources[0].External.APIPrefix != api ||
		info.Sources[0].External.DeliverPrefix != "RI.DELIVER.SYNC.SOURCES" || info.Sources[0].Error != nil || info.Sources[0].FilterSubject != "orig.a.>" {
		t.Fatalf("source info %+v", info.Sources)
	}
	waitFor(t, 10*time.Second, "mirror lag 0, no error", func() bool {
		mi, err := mir.Info(tctx(t))
		return err == nil && mi.Mirror != nil && mi.Mirror.Lag == 0 && mi.Mirror.Error == nil &&
			mi.Mirror.External != nil && mi.Mirror.External.DeliverPrefix == "RI.DELIVER.SYNC.MIRRORS"
	})

	// A restart resumes where the copies stopped.
	srv.restart(t)
	jo, js = extConnect(t, srv.url, "o"), extConnect(t, srv.url, "s")
	extPublish(t, jo, 11, 6)
	mir, src = getStream(t, js, "MIR"), getStream(t, js, "SRC")
	wantContents(t, mir, expected(16, ""))
	wantContents(t, src, expected(16, "orig.a"))

	// The origin deleted: the mirror says so; created again, its
	// messages above the mirror's last are copied.
	if err := jo.DeleteStream(tctx(t), "ORIG"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the mirror's 10059", func() bool {
		mi, err := mir.Info(tctx(t))
		return err == nil && mi.Mirror != nil && mi.Mirror.Error != nil && mi.Mirror.Error.ErrorCode == 10059
	})
	createStream(t, jo, jetstream.StreamConfig{Name: "ORIG", Subjects: []string{"orig.>"}})
	extPublish(t, jo, 1, 18)
	want := append(expected(16, ""), "orig.a.17 m17", "orig.b.18 m18")
	waitMsgsWithin(t, mir, uint64(len(want)), 60*time.Second)
	if got := extContents(t, mir); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("mirror after the origin came back:\n%s", strings.Join(got, "\n"))
	}
	// Enough bytes for the origin's consumer to ask for flow control
	// (half its 2 MiB window outstanding, nats-server and cairn alike):
	// the replies reach it through the $JS.FC import, or it stalls.
	big := strings.Repeat("x", 8<<10)
	for i := 0; i < 300; i++ {
		jsPublish(t, jo, "orig.big", big)
	}
	info = waitMsgsWithin(t, mir, uint64(len(want)+300), 60*time.Second)
	if info.State.LastSeq != 18+300 || info.Mirror.Error != nil {
		t.Fatalf("mirror after a flow controlled burst: %+v %+v", info.State, info.Mirror)
	}
	// Each setup deleted the consumer of the one before: the origin
	// keeps at most one per sourcer (cairn lists them; nats-server lists
	// no direct consumer).
	lister := getStream(t, jo, "ORIG").ConsumerNames(tctx(t))
	var names []string
	for n := range lister.Name() {
		names = append(names, n)
	}
	if lister.Err() != nil || len(names) > 2 {
		t.Fatalf("consumers of the origin: %v %v", names, lister.Err())
	}
}

// getStream looks a stream up.
func getStream(t *testing.T, js jetstream.JetStream, name string) jetstream.Stream {
	t.Helper()
	s, err := js.Stream(tctx(t), name)
	if err != nil {
		t.Fatalf("stream %s: %v", name, err)
	}
	return s
}
