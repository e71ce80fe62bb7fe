package test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/server"
	"github.com/nats-io/nats.go"
)

// TestDifferential is a live differential test of the JetStream API: it
// starts cairn (in-process) AND nats-server v2.15.2 side by side, each with
// JetStream and its own store directory, sends both the same sequence of
// requests and compares the answers.
//
// It runs whatever CAIRN_TEST_TARGET says, because it always needs both
// servers. Without a nats-server binary (PATH or ~/go/bin) it is skipped,
// unless CAIRN_REQUIRE_CLI=1 (which scripts/test.sh and CI set, and CI
// installs nats-server), in which case it fails.
//
// What is compared:
//   - JSON answers ($JS.API.* requests, PubAcks): decoded and compared
//     structurally after normalizing only the values that must differ
//     (diffNormalizeJSON), AND the order of the keys of every object, reported
//     as a separate "(key order)" difference: nats-server's key order is
//     part of the byte-exact goal.
//   - Message frames (MSG.NEXT deliveries and status frames, direct get):
//     the MSG/HMSG line without its sizes (each side's sizes are checked
//     against its own frame), the header block and the payload, byte for
//     byte after normalizing time stamps (diffNormalizeFrame).
//   - Advisories ($JS.EVENT.>), per subject in order, like JSON answers.
//
// Every difference must be listed in compatDiffs (a documented row of
// docs/compatibility.md) or knownDiffs (undocumented, TODO); anything else
// fails the test, and so does an entry of these two lists that no longer
// matches a difference (remove it when cairn is fixed). racyDiffs lists
// differences caused by races in nats-server, allowed but not required.
//
// To read the answers: CAIRN_DIFF_DUMP=1 logs every exchange whole;
// CAIRN_DIFF_API_EACH=1 adds an account info after every request and logs
// where the api.total/api.errors counters move differently.
func TestDifferential(t *testing.T) {
	diffRequireNatsServer(t)
	start := time.Now()
	d := newDiffer(t)

	// Each area ends with $JS.API.INFO, whose api.total and api.errors
	// counters then show in which area the servers count differently.
	for _, area := range []struct {
		name string
		run  func()
	}{
		{"stream names", d.accountAndStreamNames},
		{"stream create", d.streamCreate},
		{"stream create pedantic", d.streamCreatePedantic},
		{"mirror and source configs", d.sourceConfigs},
		{"stream info", d.streamInfoAndLists},
		{"pub acks", d.pubAcks},
		{"counters", d.counters},
		{"schedules", d.schedules},
		{"stream update", d.streamUpdate},
		{"msg get delete", d.msgGetDelete},
		{"direct get", d.directGet},
		{"purge", d.purge},
		{"consumer create", d.consumerCreate},
		{"consumer validation", d.consumerValidation},
		{"workqueue consumers", d.workQueueConsumers},
		{"consumer info", d.consumerInfoNamesListPause},
		{"pull status", d.pullStatus},
		{"consumer reset", d.consumerReset},
		{"priority groups", d.priorityGroups},
		{"snapshot and restore", d.snapshotRestore},
		{"durable sources", d.durableSources},
		{"restart", d.restartConsumers},
	} {
		area.run()
		d.req("account info after "+area.name, diffAPI+"INFO", "")
	}
	d.endOfRun()

	d.check()
	t.Logf("%d exchanges (%d JSON, %d frame), %d differences (%d allowed), in %v",
		d.nJSON+d.nFrame, d.nJSON, d.nFrame, len(d.diffs), d.nAllowed, time.Since(start).Round(time.Millisecond))
}

// compatDiffs are differences documented in docs/compatibility.md. The key
// is "<exchange label> <JSON path>" (plus " (key order)" for a key-order
// difference); the value names the compatibility row.
var compatDiffs = map[string]string{
	// Row "Unknown `$JS.API.<X>` subjects": nats-server has no handler
	// (no reply, the client times out), cairn answers 10003. These
	// include subjects with a wrong number of tokens for a known API.
	"unknown api subject $":                           "Unknown `$JS.API.<X>` subjects",
	"create extra subject token $":                    "Unknown `$JS.API.<X>` subjects",
	"consumer durable create extra token $":           "Unknown `$JS.API.<X>` subjects",
	"account info after stream names $.api.total":     "Unknown `$JS.API.<X>` subjects (cairn counts its 10003 answer to $JS.API.FOO)",
	"account info after stream names $.api.errors":    "Unknown `$JS.API.<X>` subjects (cairn counts its 10003 answer to $JS.API.FOO)",
	"account info after consumer create $.api.total":  "Unknown `$JS.API.<X>` subjects (cairn counts its 10003 answer to DURABLE.CREATE.C.DUR4.x)",
	"account info after consumer create $.api.errors": "Unknown `$JS.API.<X>` subjects (cairn +1) and Unknown JSON keys in API requests (nats-server +2)",

	// Row "Unknown JSON keys in API requests": nats-server answers 10025,
	// cairn ignores the key. The requests are chosen to leave both
	// servers in the same state (identical configs, a filter that
	// matches nothing); "create unknown key new stream" creates a stream
	// on cairn only, deleted again without comparing.
	"create unknown key $":                                "Unknown JSON keys in API requests",
	"create unknown key new stream $":                     "Unknown JSON keys in API requests",
	"info unknown key $":                                  "Unknown JSON keys in API requests",
	"update unknown key $":                                "Unknown JSON keys in API requests",
	"msg get unknown key $":                               "Unknown JSON keys in API requests",
	"purge unknown key $":                                 "Unknown JSON keys in API requests",
	"consumer create unknown key $":                       "Unknown JSON keys in API requests",
	"consumer create unknown top-level key $":             "Unknown JSON keys in API requests",
	"account info after stream info $.api.errors":         "Unknown JSON keys in API requests (nats-server counts its 10025)",
	"account info after stream update $.api.errors":       "Unknown JSON keys in API requests (nats-server counts its 10025)",
	"account info after msg get delete $.api.errors":      "Unknown JSON keys in API requests (nats-server counts its 10025)",
	"account info after msg get delete $.api.total":       "Unknown JSON keys in API requests (nats-server counts its failed MSG.GET, as it does not a successful one)",
	"account info after purge $.api.errors":               "Unknown JSON keys in API requests (nats-server counts its 10025)",
	"advisory $JS.EVENT.ADVISORY.STREAM.CREATED.UK #1 $":  "Unknown JSON keys in API requests (cairn created the stream)",
	"advisory $JS.EVENT.ADVISORY.STREAM.DELETED.UK #1 $":  "Unknown JSON keys in API requests (cairn created the stream)",
	"advisory $JS.EVENT.ADVISORY.STREAM.UPDATED.UKS #1 $": "Unknown JSON keys in API requests (cairn applied the update)",

	// Net of: cairn +1 error for the unknown subject STREAM.CREATE.A.B;
	// nats-server +1 error (and +1 total) for the mirror's consumer create
	// on the missing origin (cairn's mirror reads the origin's store, no
	// API request), +2 for the unknown keys, +1 for deleting UK.
	"account info after stream create $.api.errors": "Unknown `$JS.API.<X>` subjects, Unknown JSON keys in API requests, mirror consumers",

	// Row "Stream `bytes`": 30/34 per message for memory streams too.

	// Row "CONSUMER.RESET of a missing consumer".
	"reset missing consumer $": "CONSUMER.RESET of a missing consumer",
}

// knownDiffs are differences NOT documented in docs/compatibility.md,
// found by this test. Same keys as compatDiffs.
//
// TODO: each entry is a difference from nats-server v2.15.2 to fix in cairn
// (or to document in docs/compatibility.md and move to compatDiffs).
var knownDiffs = map[string]string{
	// 1. Go type name in the 10025 text: STREAM.CREATE with body [] says
	//    "... of type jsapi.StreamConfigRequest"; nats-server says
	//    "... of type server.StreamConfigRequest".
	"create json array $.error.description": "Go type name in invalid JSON description",
}

// racyDiffs are differences that show in some runs only, because of a
// race in nats-server; they are allowed when they show and not required.
var racyDiffs = map[string]string{
	// The mirror MIR of the missing stream NOSUCH, created and deleted
	// in "stream create": nats-server sends its mirror's consumer create
	// at once and again on a timer until the delete, each counted in
	// total and errors, so under load it counts one more of each
	// (CI: total 73 against 72, errors 51 against the usual 50). The
	// errors differ anyway (compatDiffs).
	"account info after stream create $.api.total": "nats-server sometimes retries the mirror's consumer create before the delete",
	// nats-server queues a stream's delete advisory on the stream's own
	// send queue (mset.outq), which the delete then stops: when the stream
	// had a consumer the advisory is sometimes lost (about 1 run in 5
	// with -race). cairn always sends it.
	"advisory $JS.EVENT.ADVISORY.STREAM.DELETED.E #1 $": "nats-server sometimes loses the delete advisory of stream E",
	// The same for stream DSO, deleted with its durable DSC (CI under load).
	"advisory $JS.EVENT.ADVISORY.STREAM.DELETED.DSO #1 $": "nats-server sometimes loses the delete advisory of stream DSO",
	// A CONSUMER.INFO right after a reset to the ack floor: nats-server
	// v2.15.2 sometimes (1 full-suite run in a few, under load) still
	// reports the deliveries from before the reset (3/3) where it
	// usually reports 0/0, as cairn always does (cairn answers the reset
	// once the reset state is stored).
	"consumer info after reset $.delivered.consumer_seq": "nats-server sometimes reports the deliveries from before the reset",
	"consumer info after reset $.delivered.stream_seq":   "nats-server sometimes reports the deliveries from before the reset",
	"reset to ack floor $.delivered.consumer_seq":        "nats-server sometimes reports the deliveries from before the reset",
	"reset to ack floor $.delivered.stream_seq":          "nats-server sometimes reports the deliveries from before the reset",
	// nats-server v2.15.2 adds a restore's chunk sizes to its advisory's
	// bytes from a queue (activeQ) that a failed restore may finish before
	// draining (processStreamRestore): under load its damaged or
	// truncated restore reports 0 bytes, where it usually reports what it
	// received, as cairn always does.
	"advisory $JS.EVENT.ADVISORY.STREAM.RESTORE_COMPLETE.BK #1 $.bytes": "nats-server sometimes reports 0 bytes for a failed restore",
	"advisory $JS.EVENT.ADVISORY.STREAM.RESTORE_COMPLETE.BK #2 $.bytes": "nats-server sometimes reports 0 bytes for a failed restore",
}

// diffRequireNatsServer skips (or, with CAIRN_REQUIRE_CLI=1, fails) the
// test when there is no nats-server binary, and fails it when the binary is
// not v2.15.2, the version cairn follows.
func diffRequireNatsServer(t *testing.T) {
	t.Helper()
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		bin = ""
		if home, err := os.UserHomeDir(); err == nil {
			p := filepath.Join(home, "go", "bin", "nats-server")
			if _, err := os.Stat(p); err == nil {
				bin = p
			}
		}
	}
	if bin == "" {
		msg := "nats-server not found on PATH or in ~/go/bin; install it with go install github.com/nats-io/nats-server/v2@v2.15.2"
		if os.Getenv("CAIRN_REQUIRE_CLI") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatalf("%s --version: %v", bin, err)
	}
	if v := strings.TrimSpace(string(out)); v != "nats-server: v2.15.2" {
		t.Fatalf("%s is %q; the differential test needs v2.15.2", bin, v)
	}
}

// ---------------------------------------------------------------------------
// The differ: two servers, one connection of each kind to each.

const (
	diffReqTimeout   = 2 * time.Second
	diffFrameTimeout = 2 * time.Second
)

type diffSide struct {
	nc  *nats.Conn
	raw *rawClient         // subscribed to _D.> (sid 1) for frames
	adv *nats.Subscription // $JS.EVENT.>
}

type diffEntry struct {
	label, path, kind string // kind: "value", "key order", "frame"
	cairn, nats       string
}

func (x diffEntry) key() string {
	k := x.label + " " + x.path
	if x.kind == "key order" {
		k += " (key order)"
	}
	return k
}

type differ struct {
	t      *testing.T
	sides  [2]*diffSide // 0: cairn, 1: nats-server
	opts   [2]server.Options
	stops  [2]func()
	labels map[string]bool
	diffs  []diffEntry
	nJSON  int
	nFrame int
	inbox  int // the last reply inbox _D.<n> used

	apiTotal, apiErrors [2]int // the counters of the last account info

	nAllowed int
	// partial: a run of some areas only, so the allowlist entries it
	// does not meet are not reported as stale.
	partial bool
	// audits: endOfRun compares the API audit advisories too
	// (TestDifferentialAPIAudit); otherwise they are left out, since
	// they repeat every answer, and every documented difference of one.
	audits bool
}

func newDiffer(t *testing.T) *differ { return newDifferOpts(t, nil) }

// newDifferOpts starts both servers with mod applied to their options.
func newDifferOpts(t *testing.T, mod func(*server.Options)) *differ {
	opts := server.Options{Host: "127.0.0.1", Port: -1, JetStream: true}
	if mod != nil {
		mod(&opts)
	}
	co, no := opts, opts
	co.StoreDir = filepath.Join(t.TempDir(), "cairn")
	no.StoreDir = filepath.Join(t.TempDir(), "nats-server")
	cu, cstop := startCairn(t, co)
	nu, nstop := startNatsServer(t, no)
	// A restart (restartConsumers) reuses the ports.
	co.Port, no.Port = portOf(t, cu), portOf(t, nu)
	d := &differ{t: t, labels: map[string]bool{}, opts: [2]server.Options{co, no}, stops: [2]func(){cstop, nstop}}
	for i, u := range []string{cu, nu} {
		s := &diffSide{}
		allowReconnect := func(o *nats.Options) error { o.AllowReconnect = true; return nil }
		s.nc = connect(t, u, allowReconnect, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
		s.adv = subSync(t, s.nc, "$JS.EVENT.>")
		flush(t, s.nc)
		s.raw = diffRawSide(t, u)
		d.sides[i] = s
	}
	return d
}

// diffRawSide connects the raw client of a side and subscribes it to the
// reply inboxes.
func diffRawSide(t *testing.T, u string) *rawClient {
	raw := rawConnect(t, u, defaultConnect)
	raw.send("SUB _D.> 1\r\n")
	raw.sync()
	return raw
}

// restart stops both servers cleanly and starts them again on the same
// ports and store directories; the nats.go connections reconnect (and
// subscribe again), the raw ones are dialed anew. Both servers count API
// requests from zero again.
func (d *differ) restart() {
	d.t.Helper()
	for _, stop := range d.stops {
		stop()
	}
	var urls [2]string
	urls[0], d.stops[0] = startCairn(d.t, d.opts[0])
	urls[1], d.stops[1] = startNatsServer(d.t, d.opts[1])
	for i, s := range d.sides {
		waitFor(d.t, 10*time.Second, "a reconnect", func() bool { return s.nc.Status() == nats.CONNECTED })
		flush(d.t, s.nc)
		s.raw.conn.Close()
		s.raw = diffRawSide(d.t, urls[i])
	}
	d.apiTotal, d.apiErrors = [2]int{}, [2]int{}
}

// diffBoth runs f for cairn and nats-server concurrently and returns the
// results in that order. f must not call t.Fatal.
func diffBoth[R any](d *differ, f func(*diffSide) R) [2]R {
	var out [2]R
	var wg sync.WaitGroup
	for i, s := range d.sides {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = f(s)
		}()
	}
	wg.Wait()
	return out
}

func (d *differ) useLabel(label string) {
	d.t.Helper()
	if d.labels[label] {
		d.t.Fatalf("duplicate exchange label %q", label)
	}
	d.labels[label] = true
}

// diffReqOpt modifies one JSON request.
type diffReqOpt func(*diffReqSpec)

type diffReqSpec struct {
	hdr     []string // "Key: value" lines, sent in this order
	timeout time.Duration
	anyName bool // the consumer name is server-generated: normalize it
}

func diffHdr(k, v string) diffReqOpt {
	return func(s *diffReqSpec) { s.hdr = append(s.hdr, k+": "+v) }
}

func diffTimeout(d time.Duration) diffReqOpt { return func(s *diffReqSpec) { s.timeout = d } }

func diffGeneratedName() diffReqOpt { return func(s *diffReqSpec) { s.anyName = true } }

// req sends body to subj (with a reply inbox) on both servers and compares
// the answers as JSON.
func (d *differ) req(label, subj, body string, opts ...diffReqOpt) {
	d.t.Helper()
	d.useLabel(label)
	d.nJSON++
	spec := diffReqSpec{timeout: diffReqTimeout}
	for _, o := range opts {
		o(&spec)
	}
	d.inbox++
	inbox := fmt.Sprintf("_D.%d", d.inbox)
	res := diffBoth(d, func(s *diffSide) string {
		if len(spec.hdr) > 0 {
			// nats.go writes headers in map order; the raw connection
			// sends them in the same order to both servers, so that
			// stored headers compare.
			return diffRawRequest(s, inbox, subj, strings.Join(spec.hdr, "\r\n"), body, spec.timeout)
		}
		r, err := s.nc.Request(subj, []byte(body), spec.timeout)
		switch {
		case errors.Is(err, nats.ErrNoResponders):
			return "<no responders>"
		case errors.Is(err, nats.ErrTimeout):
			return "<timeout>"
		case err != nil:
			return "<error: " + err.Error() + ">"
		}
		if len(r.Header) > 0 {
			return fmt.Sprintf("<headers %v> %s", r.Header, r.Data)
		}
		return string(r.Data)
	})
	if subj == diffAPI+"INFO" {
		for i := range res {
			res[i] = d.apiDeltas(i, res[i])
		}
	}
	d.dump(label, subj, body, res[0], res[1])
	if os.Getenv("CAIRN_DIFF_API_EACH") == "1" && subj != diffAPI+"INFO" {
		infos := diffBoth(d, func(s *diffSide) string {
			r, err := s.nc.Request(diffAPI+"INFO", nil, diffReqTimeout)
			if err != nil {
				return err.Error()
			}
			return string(r.Data)
		})
		var cnt [2]string
		for i := range infos {
			m := diffAPICountersRe.FindStringSubmatch(d.apiDeltas(i, infos[i]))
			if m != nil {
				cnt[i] = "total +" + m[2] + ", errors +" + m[4]
			}
		}
		if cnt[0] != cnt[1] {
			d.t.Logf("API COUNTERS after %s: cairn %s, nats-server %s", label, cnt[0], cnt[1])
		}
	}
	d.compareJSON(label, res[0], res[1], spec.anyName)
}

// diffRawRequest sends body with the header lines hdr to subj on s's raw
// connection with reply subject inbox and returns the payload of the
// answer (a status frame is returned whole).
func diffRawRequest(s *diffSide, inbox, subj, hdr, body string, timeout time.Duration) string {
	h := "NATS/1.0\r\n" + hdr + "\r\n\r\n"
	op := fmt.Sprintf("HPUB %s %s %d %d\r\n%s%s\r\n", subj, inbox, len(h), len(h)+len(body), h, body)
	s.raw.conn.SetWriteDeadline(time.Now().Add(timeout))
	if _, err := s.raw.conn.Write([]byte(op)); err != nil {
		return "<write: " + err.Error() + ">"
	}
	f, err := diffReadFrame(s.raw, timeout)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	if !strings.HasPrefix(f, "MSG "+inbox+" ") {
		return "<frame> " + diffNormalizeFrame(f)
	}
	return strings.TrimSuffix(f[strings.Index(f, "\r\n")+2:], "\r\n")
}

// pub publishes with a reply (a PubAck is expected) and compares the
// answers.
func (d *differ) pub(label, subj, data string, opts ...diffReqOpt) {
	d.t.Helper()
	d.req(label, subj, data, opts...)
}

var diffAPICountersRe = regexp.MustCompile(`("api":\{"level":\d+,"total":)(\d+)(,"errors":)(\d+)\}`)

// apiDeltas rewrites api.total and api.errors of an account info answer
// of side i into the change since the previous account info answer, so
// that a difference in how the servers count shows once, in the area
// where it happens, instead of in every later account info.
func (d *differ) apiDeltas(i int, ans string) string {
	m := diffAPICountersRe.FindStringSubmatch(ans)
	if m == nil {
		return ans
	}
	total, _ := strconv.Atoi(m[2])
	errs, _ := strconv.Atoi(m[4])
	out := diffAPICountersRe.ReplaceAllString(ans, fmt.Sprintf("${1}%d${3}%d}", total-d.apiTotal[i], errs-d.apiErrors[i]))
	d.apiTotal[i], d.apiErrors[i] = total, errs
	return out
}

// dump logs an exchange when CAIRN_DIFF_DUMP=1 (to read both answers
// whole).
func (d *differ) dump(label, subj, body, c, n string) {
	if os.Getenv("CAIRN_DIFF_DUMP") != "1" {
		return
	}
	d.t.Logf("== %s: %s %s\n  cairn:       %s\n  nats-server: %s", label, subj, trunc(body), c, n)
}

// reconcile sends the same request to both servers without comparing the
// answers: it undoes a documented difference that left the two servers in
// different states (a stream only one of them created), so that it does
// not show again in every later answer.
func (d *differ) reconcile(subj, body string) {
	diffBoth(d, func(s *diffSide) error {
		_, err := s.nc.Request(subj, []byte(body), diffReqTimeout)
		return err
	})
}

// compareJSON records the differences between cairn's answer c and
// nats-server's answer n.
func (d *differ) compareJSON(label, c, n string, anyName bool) {
	var cv, nv any
	cerr, nerr := diffJSONDecode(c, &cv), diffJSONDecode(n, &nv)
	if cerr != nil || nerr != nil {
		if c != n {
			d.diffs = append(d.diffs, diffEntry{label: label, path: "$", kind: "value", cairn: c, nats: n})
		}
		return
	}
	cv, nv = diffNormalizeJSON(cv, "", "", anyName), diffNormalizeJSON(nv, "", "", anyName)
	diffValues(label, "$", cv, nv, &d.diffs)
	co, _ := diffKeyOrders(c)
	no, _ := diffKeyOrders(n)
	paths := make([]string, 0, len(co))
	for p := range co {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		nk, ok := no[p]
		if !ok {
			continue
		}
		ck := co[p]
		if !diffEqualStrings(diffCommonOrder(ck, nk), diffCommonOrder(nk, ck)) {
			d.diffs = append(d.diffs, diffEntry{label: label, path: p, kind: "key order",
				cairn: strings.Join(ck, ","), nats: strings.Join(nk, ",")})
		}
	}
}

func diffJSONDecode(s string, v *any) error {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data")
	}
	return nil
}

// diffTimeKeys hold times that differ between two runs.
var diffTimeKeys = map[string]bool{
	"created": true, "ts": true, "first_ts": true, "last_ts": true, "last_active": true,
	"time": true, "timestamp": true, "leader_since": true, "pinned_ts": true,
	"start": true, "end": true,
}

// diffNormalizeJSON replaces the values that must differ between the two
// servers (ids, times, the server's name and version, the API level) with
// placeholders. parent is the key the value v sits under.
func diffNormalizeJSON(v any, key, parent string, anyName bool) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = diffNormalizeJSON(e, k, key, anyName)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = diffNormalizeJSON(e, key, parent, anyName)
		}
		return x
	}
	s, isStr := v.(string)
	switch {
	case key == "server_id" || key == "server_name":
		return "<server>"
	case key == "leader" && parent == "cluster":
		return "<server>" // the leader's name is the server's name (its id by default)
	case key == "version" || key == "_nats.ver":
		return "<version>"
	case key == "_nats.level" || key == "level" && parent == "api":
		return "<api level>"
	case key == "pause_remaining":
		return "<duration>"
	case key == "active" && (parent == "sources" || parent == "mirror"):
		return "<duration>" // since the origin was last heard from
	case (key == "pinned_id" || key == "pinned_client_id") && isStr && s != "":
		return "<pin id>" // a NUID each server draws (ADR-42)
	case key == "deliver_subject" && strings.HasPrefix(s, "$JS.SNAPSHOT.RESTORE."):
		return "$JS.SNAPSHOT.RESTORE.<stream>.<id>"
	case diffTimeKeys[key] && isStr:
		if tm, err := time.Parse(time.RFC3339Nano, s); err == nil && !tm.IsZero() {
			return "<time>"
		}
	case key == "pause_until" && isStr:
		// Absolute times sent by the test stay; "now"-relative ones do not.
		if tm, err := time.Parse(time.RFC3339Nano, s); err == nil && tm.Year() < 2090 && !tm.IsZero() && tm.Year() > 2000 {
			return "<time>"
		}
	case anyName && (key == "name" || key == "consumer" || key == "consumers") && isStr:
		return "<generated name>"
	}
	return v
}

// diffValues appends the differences between c (cairn) and n (nats-server)
// at path.
func diffValues(label, path string, c, n any, out *[]diffEntry) {
	add := func(cv, nv string) {
		*out = append(*out, diffEntry{label: label, path: path, kind: "value", cairn: cv, nats: nv})
	}
	cm, cok := c.(map[string]any)
	nm, nok := n.(map[string]any)
	if _, cerr := cm["error"]; cok && nok && cerr != (nm["error"] != nil) {
		// An error on one side only: one difference, the whole answers.
		add(diffCompact(c), diffCompact(n))
		return
	}
	if cok && nok {
		keys := map[string]bool{}
		for k := range cm {
			keys[k] = true
		}
		for k := range nm {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			cv, cin := cm[k]
			nv, nin := nm[k]
			p := path + "." + k
			switch {
			case !cin:
				*out = append(*out, diffEntry{label: label, path: p, kind: "value", cairn: "<absent>", nats: diffCompact(nv)})
			case !nin:
				*out = append(*out, diffEntry{label: label, path: p, kind: "value", cairn: diffCompact(cv), nats: "<absent>"})
			default:
				diffValues(label, p, cv, nv, out)
			}
		}
		return
	}
	ca, cok := c.([]any)
	na, nok := n.([]any)
	if cok && nok && len(ca) == len(na) {
		for i := range ca {
			diffValues(label, fmt.Sprintf("%s[%d]", path, i), ca[i], na[i], out)
		}
		return
	}
	if cs, ns := diffCompact(c), diffCompact(n); cs != ns {
		add(cs, ns)
	}
}

func diffCompact(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// diffKeyOrders returns, for every JSON object in data, its keys in the order
// they appear, by path ("$", "$.config", "$.streams[0].state", ...).
func diffKeyOrders(data string) (map[string][]string, error) {
	dec := json.NewDecoder(strings.NewReader(data))
	dec.UseNumber()
	out := map[string][]string{}
	var walk func(path string) error
	walk = func(path string) error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		delim, ok := tok.(json.Delim)
		if !ok {
			return nil
		}
		switch delim {
		case '{':
			out[path] = []string{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return err
				}
				k, _ := kt.(string)
				out[path] = append(out[path], k)
				if err := walk(path + "." + k); err != nil {
					return err
				}
			}
		case '[':
			for i := 0; dec.More(); i++ {
				if err := walk(fmt.Sprintf("%s[%d]", path, i)); err != nil {
					return err
				}
			}
		}
		_, err = dec.Token() // the closing delimiter
		return err
	}
	return out, walk("$")
}

// diffCommonOrder returns the keys of a that are also in b, in a's order.
func diffCommonOrder(a, b []string) []string {
	in := map[string]bool{}
	for _, k := range b {
		in[k] = true
	}
	var out []string
	for _, k := range a {
		if in[k] {
			out = append(out, k)
		}
	}
	return out
}

func diffEqualStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// ---------------------------------------------------------------------------
// Raw frames (MSG.NEXT, DIRECT.GET): exact bytes.

// frames publishes body to subj with a fresh reply inbox (_D.<n>), with the
// header block hdr if not empty, on both servers' raw connections, reads
// nframes frames from each (waiting up to diffFrameTimeout for each, so a
// request that expires is waited for) and compares them.
func (d *differ) frames(label, subj, hdr, body string, nframes int) {
	d.t.Helper()
	d.useLabel(label)
	d.nFrame++
	d.inbox++
	inbox := fmt.Sprintf("_D.%d", d.inbox)
	var op string
	if hdr == "" {
		op = fmt.Sprintf("PUB %s %s %d\r\n%s\r\n", subj, inbox, len(body), body)
	} else {
		h := "NATS/1.0\r\n" + hdr + "\r\n\r\n"
		op = fmt.Sprintf("HPUB %s %s %d %d\r\n%s%s\r\n", subj, inbox, len(h), len(h)+len(body), h, body)
	}
	res := diffBoth(d, func(s *diffSide) []string {
		s.raw.conn.SetWriteDeadline(time.Now().Add(diffFrameTimeout))
		if _, err := s.raw.conn.Write([]byte(op)); err != nil {
			return []string{"<write: " + err.Error() + ">"}
		}
		var fs []string
		for range nframes {
			f, err := diffReadFrame(s.raw, diffFrameTimeout)
			if err != nil {
				fs = append(fs, "<"+err.Error()+">")
				break
			}
			fs = append(fs, diffNormalizeFrame(f))
		}
		return fs
	})
	d.dump(label, subj, body, strings.Join(res[0], "\n"), strings.Join(res[1], "\n"))
	d.compareFrames(label, res[0], res[1])
}

func (d *differ) compareFrames(label string, c, n []string) {
	for i := range max(len(c), len(n)) {
		cf, nf := "<none>", "<none>"
		if i < len(c) {
			cf = c[i]
		}
		if i < len(n) {
			nf = n[i]
		}
		if cf != nf {
			d.diffs = append(d.diffs, diffEntry{label: label, path: fmt.Sprintf("frame %d", i+1), kind: "frame", cairn: cf, nats: nf})
		}
	}
}

// diffReadFrame reads the next MSG or HMSG frame (answering PINGs). It
// returns an error on a timeout or anything else.
func diffReadFrame(c *rawClient, within time.Duration) (string, error) {
	deadline := time.Now().Add(within)
	line := func() (string, error) {
		for {
			if i := bytes.Index(c.pending, []byte("\r\n")); i >= 0 {
				l := string(c.pending[:i+2])
				c.pending = c.pending[i+2:]
				return l, nil
			}
			if err := c.fill(deadline); err != nil {
				return "", fmt.Errorf("no frame (%v) after %q", errors.Unwrap(err), c.pending)
			}
		}
	}
	for {
		l, err := line()
		if err != nil {
			return "", err
		}
		if l == "PING\r\n" {
			c.conn.SetWriteDeadline(deadline)
			if _, err := c.conn.Write([]byte("PONG\r\n")); err != nil {
				return "", err
			}
			continue
		}
		f := strings.Fields(l)
		if len(f) < 4 || (f[0] != "MSG" && f[0] != "HMSG") {
			return "", fmt.Errorf("not a frame: %q", l)
		}
		size, err := strconv.Atoi(f[len(f)-1])
		if err != nil {
			return "", fmt.Errorf("bad frame line %q", l)
		}
		for len(c.pending) < size+2 {
			if err := c.fill(deadline); err != nil {
				return "", fmt.Errorf("frame %q incomplete: %v", l, err)
			}
		}
		frame := l + string(c.pending[:size+2])
		c.pending = c.pending[size+2:]
		return frame, nil
	}
}

var (
	diffRestoreSubjectRe = regexp.MustCompile(`"deliver_subject":"(\$JS\.SNAPSHOT\.RESTORE\.[^"]+)"`)
	diffAckTSRe          = regexp.MustCompile(`^(\$JS\.ACK\.(?:[^.]+\.){5})\d+(\.\d+)$`)
	diffTimeStampRe      = regexp.MustCompile(`(?m)^Nats-Time-Stamp: [^\r]*\r$`)
	diffPinIDRe          = regexp.MustCompile(`(?m)^Nats-Pin-Id: [^\r]*\r$`)
	diffSourceIdentRe    = regexp.MustCompile(`(?m)^(Nats-Stream-Source: \S+ \d+ \S+ \S+ \S+) [0-9A-Za-z]{8}\r$`)
)

// diffNormalizeFrame turns a MSG/HMSG frame into "<op> <subject> <sid>
// [<reply>]" + CRLF + header block + payload, with the sizes checked
// against the frame (a mismatch is kept visible) and dropped, the time
// stamp of ack replies and Nats-Time-Stamp replaced.
func diffNormalizeFrame(f string) string {
	i := strings.Index(f, "\r\n")
	fields := strings.Fields(f[:i])
	rest := strings.TrimSuffix(f[i+2:], "\r\n")
	op := fields[0]
	nsizes := 1
	if op == "HMSG" {
		nsizes = 2
	}
	args := fields[1 : len(fields)-nsizes]
	sizes := fields[len(fields)-nsizes:]
	var hdr, payload string
	ok := true
	if op == "HMSG" {
		h, _ := strconv.Atoi(sizes[0])
		tot, _ := strconv.Atoi(sizes[1])
		ok = h <= len(rest) && tot == len(rest)
		if ok {
			hdr, payload = rest[:h], rest[h:]
		}
	} else {
		tot, _ := strconv.Atoi(sizes[0])
		ok = tot == len(rest)
		payload = rest
	}
	if !ok {
		return "<sizes do not match> " + f
	}
	if len(args) == 3 {
		args[2] = diffAckTSRe.ReplaceAllString(args[2], "${1}<ts>${2}")
	}
	hdr = diffTimeStampRe.ReplaceAllString(hdr, "Nats-Time-Stamp: <time>\r")
	hdr = diffPinIDRe.ReplaceAllString(hdr, "Nats-Pin-Id: <pin id>\r")
	// The origin's identity is a hash of its creation time.
	hdr = diffSourceIdentRe.ReplaceAllString(hdr, "${1} <ident>\r")
	return op + " " + strings.Join(args, " ") + "\r\n" + hdr + payload
}

// ---------------------------------------------------------------------------
// Checking against the allowlists.

func (d *differ) check() {
	t := d.t
	used := map[string]bool{}
	indexRe := regexp.MustCompile(`\[\d+\]`)
	for _, x := range d.diffs {
		k := x.key()
		if _, ok := compatDiffs[k]; !ok {
			if _, ok := knownDiffs[k]; !ok {
				k = indexRe.ReplaceAllString(k, "[*]") // entries for every element
			}
		}
		if why, ok := compatDiffs[k]; ok {
			used[k] = true
			d.nAllowed++
			t.Logf("allowed (compatibility.md: %s): %s\n  cairn:       %s\n  nats-server: %s", why, k, x.cairn, x.nats)
			continue
		}
		if why, ok := racyDiffs[k]; ok {
			d.nAllowed++
			t.Logf("allowed (race in nats-server: %s): %s\n  cairn:       %s\n  nats-server: %s", why, k, x.cairn, x.nats)
			continue
		}
		if why, ok := knownDiffs[k]; ok {
			used[k] = true
			d.nAllowed++
			t.Logf("KNOWN DIFFERENCE (TODO: %s): %s\n  cairn:       %s\n  nats-server: %s", why, k, x.cairn, x.nats)
			continue
		}
		t.Errorf("difference (%s): %q\n  cairn:       %s\n  nats-server: %s", x.kind, k, x.cairn, x.nats)
	}
	for _, m := range []map[string]string{compatDiffs, knownDiffs} {
		for k := range m {
			if !used[k] && !d.partial {
				t.Errorf("allowlist entry %q matches no difference any more: remove it", k)
			}
		}
	}
}

// ---------------------------------------------------------------------------
// The exchanges.

const diffAPI = "$JS.API."

func (d *differ) accountAndStreamNames() {
	d.req("account info first", diffAPI+"INFO", "")
	d.req("stream names none", diffAPI+"STREAM.NAMES", "")
	d.req("stream list none", diffAPI+"STREAM.LIST", "")
	d.req("consumer names unknown stream", diffAPI+"CONSUMER.NAMES.NOPE", "")
	d.req("unknown api subject", diffAPI+"FOO", "", diffTimeout(300*time.Millisecond))
}

func (d *differ) streamCreate() {
	c := diffAPI + "STREAM.CREATE."
	d.req("create defaults", c+"S1", `{"name":"S1"}`)
	d.req("create defaults again identical", c+"S1", `{"name":"S1"}`)
	d.req("create defaults again explicit defaults", c+"S1",
		`{"name":"S1","subjects":["S1"],"retention":"limits","max_consumers":-1,"max_msgs":-1,"max_bytes":-1,"max_age":0,"max_msgs_per_subject":-1,"max_msg_size":-1,"discard":"old","storage":"file","num_replicas":1,"duplicate_window":120000000000}`)
	d.req("create existing different config", c+"S1", `{"name":"S1","max_msgs":5}`)
	d.req("create many options", c+"S2", `{"name":"S2","description":"many options","subjects":["s2.*","s2x.>"],`+
		`"retention":"limits","max_consumers":10,"max_msgs":1000,"max_bytes":1048576,"max_age":3600000000000,`+
		`"max_msgs_per_subject":5,"max_msg_size":1024,"discard":"new","discard_new_per_subject":true,"storage":"file",`+
		`"num_replicas":1,"duplicate_window":60000000000,"allow_direct":true,"allow_rollup_hdrs":true,`+
		`"compression":"s2","metadata":{"owner":"test","b":"2"},"consumer_limits":{"inactive_threshold":10000000000,"max_ack_pending":100}}`)
	d.req("create memory", c+"M1", `{"name":"M1","subjects":["m1.>"],"storage":"memory","max_age":3600000000000}`)
	d.req("create first_seq", c+"F1", `{"name":"F1","subjects":["f1"],"first_seq":100}`)
	d.req("create deny delete purge", c+"DENY", `{"name":"DENY","subjects":["deny.>"],"deny_delete":true,"deny_purge":true}`)
	d.req("create discard new limits", c+"DN", `{"name":"DN","subjects":["dn.>"],"discard":"new","max_msgs":2}`)
	d.req("create direct", c+"D", `{"name":"D","subjects":["d.>"],"allow_direct":true}`)
	d.req("create pedantic ok", c+"PED", `{"name":"PED","subjects":["ped"],"pedantic":true}`)

	// Invalid names and name mismatches.
	d.req("create name mismatch", c+"X1", `{"name":"X2"}`)
	d.req("create name empty in body", c+"X3", `{"subjects":["x3"]}`)
	d.req("create name with slash", c+"A/B", `{"name":"A/B"}`)
	d.req("create name with backslash", c+`A\B`, `{"name":"A\\B"}`)
	d.req("create name with star", c+"A*", `{"name":"A*"}`)
	d.req("create name with gt", c+"A>", `{"name":"A>"}`)
	d.req("create name too long", c+strings.Repeat("n", 256), `{"name":"`+strings.Repeat("n", 256)+`"}`)
	d.req("create name with dot in body", c+"A", `{"name":"A.B"}`)
	d.req("create extra subject token", c+"A.B", `{"name":"A"}`, diffTimeout(300*time.Millisecond))

	// Invalid configs.
	d.req("create replicas 3", c+"R3", `{"name":"R3","num_replicas":3}`)
	d.req("create replicas negative", c+"RN", `{"name":"RN","num_replicas":-1}`)
	d.req("create overlapping subjects", c+"OV", `{"name":"OV","subjects":["s2.a"]}`)
	d.req("create duplicate subjects", c+"DUP", `{"name":"DUP","subjects":["dup","dup"]}`)
	d.req("create self-overlapping subjects", c+"SOV", `{"name":"SOV","subjects":["sov.*","sov.a"]}`)
	d.req("create invalid subject", c+"IS", `{"name":"IS","subjects":["a..b"]}`)
	d.req("create empty subject", c+"ES", `{"name":"ES","subjects":[""]}`)
	d.req("create full wildcard without no_ack", c+"GT", `{"name":"GT","subjects":[">"]}`)
	d.req("create subject in $JS.API", c+"JSAPI", `{"name":"JSAPI","subjects":["$JS.API.>"]}`)
	d.req("create sealed", c+"SEAL", `{"name":"SEAL","sealed":true}`)
	d.req("create mirror_direct without mirror", c+"MD", `{"name":"MD","mirror_direct":true}`)
	d.req("create negative max_age", c+"NA", `{"name":"NA","max_age":-1}`)
	d.req("create tiny max_age", c+"TA", `{"name":"TA","max_age":50000000}`)
	d.req("create dup window over max_age", c+"DW", `{"name":"DW","max_age":1000000000,"duplicate_window":2000000000}`)
	d.req("create negative dup window", c+"DWN", `{"name":"DWN","duplicate_window":-5}`)
	d.req("create deny_purge with rollup", c+"RP", `{"name":"RP","deny_purge":true,"allow_rollup_hdrs":true}`)
	d.req("create discard_new_per_subject without discard new", c+"DNP", `{"name":"DNP","discard_new_per_subject":true,"max_msgs_per_subject":1}`)
	d.req("create discard_new_per_subject without per-subject limit", c+"DNP2", `{"name":"DNP2","discard":"new","discard_new_per_subject":true}`)
	d.req("create description too long", c+"DL", `{"name":"DL","description":"`+strings.Repeat("d", 4097)+`"}`)
	d.req("create reserved metadata key", c+"RM", `{"name":"RM","metadata":{"_nats.x":"y"}}`)
	d.req("create bad retention", c+"BR", `{"name":"BR","retention":"bogus"}`)
	d.req("create bad storage", c+"BS", `{"name":"BS","storage":"disk"}`)
	d.req("create bad discard", c+"BD", `{"name":"BD","discard":"sideways"}`)
	d.req("create discard uppercase", c+"DU", `{"name":"DU","discard":"NEW","subjects":["du"]}`)
	d.req("create max_consumers below -1", c+"MC", `{"name":"MC","subjects":["mc"],"max_consumers":-5}`)
	d.req("create mirror", c+"MIR", `{"name":"MIR","mirror":{"name":"NOSUCH"}}`)
	d.reconcile(diffAPI+"STREAM.DELETE.MIR", "") // created by nats-server only
	d.req("create msg ttl", c+"TTL", `{"name":"TTL","subjects":["ttl"],"allow_msg_ttl":true}`)
	d.reconcile(diffAPI+"STREAM.DELETE.TTL", "") // created by nats-server only
	// persist_mode (ADR-56): async only for R1 file streams without
	// atomic batches; the value is strict.
	d.req("create persist async", c+"PMA", `{"name":"PMA","persist_mode":"async"}`)
	d.req("create persist default", c+"PMD", `{"name":"PMD","persist_mode":"default"}`)
	d.req("create persist async fast batches", c+"PMF", `{"name":"PMF","persist_mode":"async","allow_batched":true}`)
	d.req("create persist async memory", c+"PMM", `{"name":"PMM","persist_mode":"async","storage":"memory"}`)
	d.req("create persist async replicas 3", c+"PMR", `{"name":"PMR","persist_mode":"async","num_replicas":3}`)
	d.req("create persist async atomic", c+"PMT", `{"name":"PMT","persist_mode":"async","allow_atomic":true}`)
	d.req("create persist sync", c+"PMS", `{"name":"PMS","persist_mode":"sync"}`)
	d.req("create persist uppercase", c+"PMU", `{"name":"PMU","persist_mode":"ASYNC"}`)
	d.req("create persist number", c+"PMN", `{"name":"PMN","persist_mode":1}`)
	d.req("create persist null", c+"PMZ", `{"name":"PMZ","persist_mode":null}`)
	d.req("create api level header too high", c+"LV", `{"name":"LV"}`, diffHdr("Nats-Required-Api-Level", "99"))
	d.req("create api level header not a number", c+"LV", `{"name":"LV"}`, diffHdr("Nats-Required-Api-Level", "abc"))

	// Unknown keys (on stream UKS, identical configs, so that the servers
	// stay in the same state) and malformed JSON.
	d.req("create unknown keys target", c+"UKS", `{"name":"UKS","subjects":["uks"]}`)
	d.req("create unknown key", c+"UKS", `{"name":"UKS","subjects":["uks"],"bogus":1}`)
	d.req("create unknown key new stream", c+"UK", `{"name":"UK","subjects":["uk"],"bogus":1}`)
	d.reconcile(diffAPI+"STREAM.DELETE.UK", "") // created by cairn only
	d.req("create malformed json", c+"MJ", `{"name":`)
	d.req("create json array", c+"JA", `[]`)
	d.req("create json null", c+"JN", `null`)
	d.req("create empty body", c+"EB", ``)
	d.req("create wrong type", c+"WT", `{"name":"WT","max_msgs":"ten"}`)
	d.req("create trailing garbage", c+"TG", `{"name":"TG"} x`)
}

// streamCreatePedantic is an area of its own so that its difference in the
// api.errors counter shows apart from the documented ones.
func (d *differ) streamCreatePedantic() {
	c := diffAPI + "STREAM.CREATE."
	d.req("create pedantic negative max_consumers", c+"PMC", `{"name":"PMC","max_consumers":-5,"pedantic":true}`)
	d.req("create pedantic max_age without duplicate window", c+"PMA", `{"name":"PMA","subjects":["pma"],"max_age":60000000000,"pedantic":true}`)
	d.req("create pedantic limits before max_age", c+"PLA", `{"name":"PLA","max_age":-1,"max_msgs":-4,"pedantic":true}`)
	d.req("create pedantic markers without TTLs", c+"PMT", `{"name":"PMT","subject_delete_marker_ttl":2000000000,"pedantic":true}`)
	d.req("create pedantic republish without source", c+"PRS", `{"name":"PRS","subjects":["prs"],"republish":{"dest":"rp.>"},"pedantic":true}`)
	d.req("create pedantic subjects default", c+"PSD", `{"name":"PSD","pedantic":true}`)
	u := diffAPI + "STREAM.UPDATE."
	d.req("update pedantic negative max_msgs", u+"PSD", `{"name":"PSD","max_msgs":-3,"pedantic":true}`)
	d.req("update pedantic max_age without duplicate window", u+"PSD", `{"name":"PSD","max_age":60000000000,"pedantic":true}`)
	d.req("update without pedantic fixes values", u+"PSD", `{"name":"PSD","max_msgs":-3}`)
}

func (d *differ) streamInfoAndLists() {
	in := diffAPI + "STREAM.INFO."
	d.req("info defaults", in+"S1", "")
	d.req("info many options", in+"S2", "")
	d.req("info memory", in+"M1", "")
	d.req("info first_seq", in+"F1", "")
	d.req("info unknown stream", in+"NOPE", "")
	d.req("info non-json body", in+"S1", "xyz")
	d.req("info malformed json body", in+"S1", "{x")
	d.req("info unknown key", in+"S1", `{"bogus":true}`)

	d.req("names", diffAPI+"STREAM.NAMES", "")
	d.req("names empty object", diffAPI+"STREAM.NAMES", "{}")
	d.req("names offset 2", diffAPI+"STREAM.NAMES", `{"offset":2}`)
	d.req("names offset past end", diffAPI+"STREAM.NAMES", `{"offset":100}`)
	d.req("names subject filter", diffAPI+"STREAM.NAMES", `{"subject":"s2.a"}`)
	d.req("names subject filter wildcard", diffAPI+"STREAM.NAMES", `{"subject":"*.a"}`)
	d.req("names subject filter no match", diffAPI+"STREAM.NAMES", `{"subject":"zzz"}`)
	d.req("names subject filter by name", diffAPI+"STREAM.NAMES", `{"subject":"S1"}`)
	d.req("names negative offset", diffAPI+"STREAM.NAMES", `{"offset":-1}`)
	d.req("list", diffAPI+"STREAM.LIST", "")
	d.req("list offset 3", diffAPI+"STREAM.LIST", `{"offset":3}`)
	d.req("list subject filter", diffAPI+"STREAM.LIST", `{"subject":"d.x"}`)
	d.req("list malformed", diffAPI+"STREAM.LIST", `{"offset":`)
}

func (d *differ) pubAcks() {
	d.pub("pub persist async", "PMA", "one")
	d.pub("pub persist async again", "PMA", "two", diffHdr("Nats-Msg-Id", "pm-1"))
	d.pub("pub persist async duplicate", "PMA", "two", diffHdr("Nats-Msg-Id", "pm-1"))
	d.pub("pub persist async expected seq wrong", "PMA", "x", diffHdr("Nats-Expected-Last-Sequence", "7"))
	d.pub("pub persist async atomic batch", "PMA", "x", diffHdr("Nats-Batch-Id", "b1"), diffHdr("Nats-Batch-Sequence", "1"))
	d.pub("pub s2.a 1", "s2.a", "one")
	d.pub("pub s2.b 2", "s2.b", "two")
	d.pub("pub s2.a with headers", "s2.a", "three", diffHdr("X-Test", "yes"))
	d.pub("pub msg id", "s2.c", "four", diffHdr("Nats-Msg-Id", "id-1"))
	d.pub("pub msg id duplicate", "s2.c", "four again", diffHdr("Nats-Msg-Id", "id-1"))
	d.pub("pub expected stream ok", "s2.a", "five", diffHdr("Nats-Expected-Stream", "S2"))
	d.pub("pub expected stream wrong", "s2.a", "x", diffHdr("Nats-Expected-Stream", "S1"))
	d.pub("pub expected last seq ok", "s2.b", "six", diffHdr("Nats-Expected-Last-Sequence", "5"))
	d.pub("pub expected last seq wrong", "s2.b", "x", diffHdr("Nats-Expected-Last-Sequence", "3"))
	d.pub("pub expected last seq not a number", "s2.b", "x", diffHdr("Nats-Expected-Last-Sequence", "abc"))
	d.pub("pub expected last subject seq ok", "s2.a", "seven", diffHdr("Nats-Expected-Last-Subject-Sequence", "5"))
	d.pub("pub expected last subject seq wrong", "s2.a", "x", diffHdr("Nats-Expected-Last-Subject-Sequence", "1"))
	d.pub("pub expected last subject seq 0 on used subject", "s2.a", "x", diffHdr("Nats-Expected-Last-Subject-Sequence", "0"))
	d.pub("pub expected last subject seq 0 on new subject", "s2.d", "eight", diffHdr("Nats-Expected-Last-Subject-Sequence", "0"))
	d.pub("pub expected last subject seq with subject", "s2.e", "nine",
		diffHdr("Nats-Expected-Last-Subject-Sequence", "7"), diffHdr("Nats-Expected-Last-Subject-Sequence-Subject", "s2.a"))
	d.pub("pub expected last msg id ok", "s2.f", "ten", diffHdr("Nats-Expected-Last-Msg-Id", "id-1"), diffHdr("Nats-Msg-Id", "id-2"))
	d.pub("pub expected last msg id wrong", "s2.f", "x", diffHdr("Nats-Expected-Last-Msg-Id", "id-1"))
	d.pub("pub too large", "s2.g", strings.Repeat("x", 1025))
	d.pub("pub per-subject limit discard new", "s2x.one", "1")
	for i := 2; i <= 5; i++ {
		d.pub(fmt.Sprintf("pub per-subject %d", i), "s2x.one", strconv.Itoa(i))
	}
	d.pub("pub per-subject over limit", "s2x.one", "6")
	d.pub("pub rollup bad value", "s2.h", "x", diffHdr("Nats-Rollup", "bogus"))
	d.pub("pub rollup not allowed", "S1", "x", diffHdr("Nats-Rollup", "sub"))
	d.pub("pub ttl not allowed", "s2.h", "x", diffHdr("Nats-TTL", "1s"))
	d.pub("pub dn 1", "dn.a", "1")
	d.pub("pub dn 2", "dn.b", "2")
	d.pub("pub dn over max_msgs", "dn.c", "3")
	d.pub("pub no stream", "nostream.x", "x")
	d.pub("pub memory", "m1.a", "mem", diffHdr("H", "v"))
	d.pub("pub first_seq", "f1", "x")
	d.pub("pub S1", "S1", "s1")
	for i := 1; i <= 3; i++ {
		d.pub(fmt.Sprintf("pub deny %d", i), "deny.a", "x")
	}
	for i, s := range []string{"d.a", "d.b", "d.a", "d.c.x"} {
		d.pub(fmt.Sprintf("pub direct %d", i+1), s, fmt.Sprintf("direct %d", i+1), diffHdr("K", fmt.Sprint(i)))
	}

	in := diffAPI + "STREAM.INFO."
	d.req("info after publishes", in+"S2", "")
	d.req("info subjects_filter all", in+"S2", `{"subjects_filter":">"}`)
	d.req("info subjects_filter one", in+"S2", `{"subjects_filter":"s2.a"}`)
	d.req("info subjects_filter none matching", in+"S2", `{"subjects_filter":"zzz"}`)
	d.req("info subjects_filter offset", in+"S2", `{"subjects_filter":">","offset":2}`)
	d.req("info memory after publish", in+"M1", "")
	d.req("purge memory", diffAPI+"STREAM.PURGE.M1", "")
	d.req("info discard new", in+"DN", "")
}

// counters compares distributed counters (ADR-49): the configs a
// counter stream refuses, increments and their PubAcks, the stored
// counter messages.
func (d *differ) counters() {
	c := diffAPI + "STREAM.CREATE."
	d.req("counter create discard new", c+"CN1", `{"name":"CN1","subjects":["cn1.>"],"allow_msg_counter":true,"discard":"new"}`)
	d.req("counter create ttl", c+"CN2", `{"name":"CN2","subjects":["cn2.>"],"allow_msg_counter":true,"allow_msg_ttl":true}`)
	d.req("counter create schedules", c+"CN3", `{"name":"CN3","subjects":["cn3.>"],"allow_msg_counter":true,"allow_msg_schedules":true}`)
	d.req("counter create interest", c+"CN4", `{"name":"CN4","subjects":["cn4.>"],"allow_msg_counter":true,"retention":"interest"}`)
	d.req("counter create mirror", c+"CN5", `{"name":"CN5","allow_msg_counter":true,"mirror":{"name":"CNT"}}`)
	d.req("counter create", c+"CNT", `{"name":"CNT","subjects":["cnt.>"],"allow_msg_counter":true,"allow_direct":true,"max_msg_size":64}`)
	d.req("counter update refused", diffAPI+"STREAM.UPDATE.CNT", `{"name":"CNT","subjects":["cnt.>"],"allow_direct":true,"max_msg_size":64}`)
	d.req("counter update off refused", diffAPI+"STREAM.UPDATE.S1", `{"name":"S1","subjects":["S1","s1"],"allow_msg_counter":true}`)
	for i, tc := range []struct {
		hdr  []string // "Key: value" lines
		data string
	}{
		{[]string{"Nats-Incr: +1"}, ""},
		{[]string{"Nats-Incr: 41"}, ""},
		{[]string{"Nats-Incr: -100"}, ""},
		{[]string{"Nats-Incr: 99999999999999999999"}, ""},
		{[]string{"Nats-Incr: 1"}, "x"},
		{nil, ""},
		{[]string{"Nats-Incr: 1x"}, ""},
		{[]string{"Nats-Incr: 1", "Nats-Rollup: sub"}, ""},
		{[]string{"Nats-Incr: 1", "Nats-Expected-Last-Subject-Sequence: 1"}, ""},
		{[]string{"Nats-Incr: 1", "Nats-Msg-Id: c1"}, ""},
		{[]string{"Nats-Incr: 1", "Nats-Msg-Id: c1"}, ""},
		{[]string{"Nats-Incr: 1000000000000000000000000000000"}, ""},
		{[]string{"X-A: 1", "Nats-Incr: 0"}, ""},
	} {
		var opts []diffReqOpt
		for _, line := range tc.hdr {
			k, v, _ := strings.Cut(line, ": ")
			opts = append(opts, diffHdr(k, v))
		}
		d.pub(fmt.Sprintf("counter pub %d", i+1), "cnt.a", tc.data, opts...)
	}
	d.pub("counter pub other subject", "cnt.b", "", diffHdr("Nats-Incr", "-7"))
	d.pub("counter pub on a stream without counters", "s2.a", "", diffHdr("Nats-Incr", "1"))
	dg := diffAPI + "DIRECT.GET.CNT"
	d.frames("counter direct get last", dg, "", `{"last_by_subj":"cnt.a"}`, 1)
	d.frames("counter direct get first", dg, "", `{"seq":1}`, 1)
	d.req("counter msg get", diffAPI+"STREAM.MSG.GET.CNT", `{"last_by_subj":"cnt.b"}`)
	d.req("counter info", diffAPI+"STREAM.INFO.CNT", "")

	// Sources of counters are compared by TestCounterSources on both
	// servers: here nats-server's source consumer would show in every
	// later account info and advisory (docs/compatibility.md, "How a
	// mirror or source reads its origin").
}

// schedules compares message schedules (ADR-51): the configs refused,
// the publishes refused, a schedule stored (with its Nats-Rollup added)
// and the message a delayed schedule produced.
func (d *differ) schedules() {
	c := diffAPI + "STREAM.CREATE."
	d.req("schedule create discard new", c+"SD1", `{"name":"SD1","subjects":["sd1.>"],"allow_msg_schedules":true,"discard":"new"}`)
	d.req("schedule create mirror", c+"SD2", `{"name":"SD2","allow_msg_schedules":true,"mirror":{"name":"SCD"}}`)
	d.req("schedule create sources", c+"SD3", `{"name":"SD3","subjects":["sd3"],"allow_msg_schedules":true,"sources":[{"name":"SCD"}]}`)
	d.req("schedule create pedantic", c+"SD4", `{"name":"SD4","subjects":["sd4"],"allow_msg_schedules":true,"pedantic":true}`)
	d.req("schedule create", c+"SCD", `{"name":"SCD","subjects":["scd.>","sco.>"],"allow_msg_schedules":true,"allow_msg_ttl":true,"allow_direct":true,"deny_purge":true}`)
	d.req("schedule update disable refused", diffAPI+"STREAM.UPDATE.SCD", `{"name":"SCD","subjects":["scd.>","sco.>"],"allow_msg_ttl":true,"allow_direct":true}`)
	for i, hdr := range [][]string{
		{"Nats-Schedule: garbage", "Nats-Schedule-Target: sco.b"},
		{"Nats-Schedule: @every 500ms", "Nats-Schedule-Target: sco.b"},
		{"Nats-Schedule: @every 1s"},
		{"Nats-Schedule: @every 1s", "Nats-Schedule-Target: scd.b"},
		{"Nats-Schedule: @every 1s", "Nats-Schedule-Target: other.b"},
		{"Nats-Schedule: @every 1s", "Nats-Schedule-Target: sco.b", "Nats-Schedule-TTL: 500ms"},
		{"Nats-Schedule: @every 1s", "Nats-Schedule-Target: sco.b", "Nats-Schedule-Rollup: all"},
		{"Nats-Schedule: @every 1s", "Nats-Schedule-Target: sco.b", "Nats-Schedule-Source: sco.*"},
		{"Nats-Schedule: @every 1s", "Nats-Schedule-Target: sco.b", "Nats-Schedule-Time-Zone: UTC"},
		{"Nats-Schedule: 0 0 * * * *", "Nats-Schedule-Target: sco.b", "Nats-Schedule-Time-Zone: Nowhere/Land"},
		{"Nats-Schedule: 0 0 0 30 2 *", "Nats-Schedule-Target: sco.b"},
		{"Nats-Schedule: @yearly", "Nats-Schedule-Target: sco.b", "Nats-Schedule-Time-Zone: Europe/Amsterdam", "X-A: 1"},
		{"Nats-Schedule-Next: purge"},
		{"Nats-Schedule-Next: purge", "Nats-Scheduler: scd.x"},
		{"Nats-Scheduler: scd.b"},
		{"Nats-Schedule: @at 2999-01-01T00:00:00Z", "Nats-Schedule-Target: sco.c", "Nats-Rollup: SUB"},
	} {
		var opts []diffReqOpt
		for _, line := range hdr {
			k, v, _ := strings.Cut(line, ": ")
			opts = append(opts, diffHdr(k, v))
		}
		d.pub(fmt.Sprintf("schedule pub %d", i+1), "scd.b", "x", opts...)
	}
	d.pub("schedule pub on a stream without schedules", "s2.a", "x", diffHdr("Nats-Schedule", "@hourly"), diffHdr("Nats-Schedule-Target", "s2.b"))
	dg := diffAPI + "DIRECT.GET.SCD"
	d.frames("schedule stored", dg, "", `{"last_by_subj":"scd.b"}`, 1)
	d.pub("schedule delayed", "scd.once", "later", diffHdr("Nats-Schedule", "@at 2020-01-01T00:00:00Z"), diffHdr("Nats-Schedule-Target", "sco.once"), diffHdr("X-Keep", "yes"), diffHdr("Nats-Msg-Id", "s1"))
	d.waitSubject("SCD", "sco.once")
	d.frames("schedule delayed produced", dg, "", `{"last_by_subj":"sco.once"}`, 1)
	d.frames("schedule delayed gone", dg, "", `{"last_by_subj":"scd.once"}`, 1)
	d.pub("schedule stop", "scd.stop", "x", diffHdr("Nats-Schedule-Next", "purge"), diffHdr("Nats-Scheduler", "scd.b"))
	d.frames("schedule stopped", dg, "", `{"last_by_subj":"scd.b"}`, 1)
	d.req("schedule info", diffAPI+"STREAM.INFO.SCD", `{"subjects_filter":">"}`)
}

// waitSubject waits until stream (with allow_direct) holds a message on
// subj on both servers (a schedule fires in the background). It asks
// with direct gets, which neither server counts in api.total.
func (d *differ) waitSubject(stream, subj string) {
	d.t.Helper()
	for _, s := range d.sides {
		waitFor(d.t, 10*time.Second, stream+" to hold a message on "+subj, func() bool {
			r, err := s.nc.Request(diffAPI+"DIRECT.GET."+stream, []byte(`{"last_by_subj":"`+subj+`"}`), diffReqTimeout)
			return err == nil && r.Header.Get("Nats-Sequence") != ""
		})
	}
}

func (d *differ) streamUpdate() {
	u := diffAPI + "STREAM.UPDATE."
	d.req("update allowed", u+"S1", `{"name":"S1","subjects":["S1","s1"],"description":"updated","max_msgs":100,"max_age":86400000000000}`)
	d.req("update storage refused", u+"S1", `{"name":"S1","subjects":["S1","s1"],"storage":"memory"}`)
	d.req("update retention refused", u+"S1", `{"name":"S1","subjects":["S1","s1"],"retention":"workqueue"}`)
	d.req("update name mismatch", u+"S1", `{"name":"S9"}`)
	d.req("update unknown stream", u+"NOPE", `{"name":"NOPE"}`)
	d.req("update replicas 3", u+"S1", `{"name":"S1","num_replicas":3}`)
	d.req("update overlapping subjects", u+"S1", `{"name":"S1","subjects":["s2.a"]}`)
	d.req("update invalid config", u+"S1", `{"name":"S1","max_age":-1}`)
	d.req("update deny_delete back off refused", u+"DENY", `{"name":"DENY","subjects":["deny.>"]}`)
	d.req("update first_seq refused", u+"F1", `{"name":"F1","subjects":["f1"],"first_seq":5}`)
	d.req("update malformed", u+"S1", `{"name"`)
	d.req("update unknown key", u+"UKS", `{"name":"UKS","subjects":["uks"],"bogus":1}`)
	d.req("update empty body", u+"S1", ``)
	d.req("update persist async to default", u+"PMA", `{"name":"PMA"}`)
	d.req("update persist default to async", u+"PMD", `{"name":"PMD","persist_mode":"async"}`)
	d.req("update persist async with atomic", u+"PMA", `{"name":"PMA","persist_mode":"async","allow_atomic":true}`)
	d.req("update persist async to memory", u+"PMA", `{"name":"PMA","persist_mode":"async","storage":"memory"}`)
	d.req("update persist async replicas 3", u+"PMA", `{"name":"PMA","persist_mode":"async","num_replicas":3}`)
	d.req("update persist async limits", u+"PMA", `{"name":"PMA","persist_mode":"async","max_msgs":10}`)
	d.req("info persist async", diffAPI+"STREAM.INFO.PMA", "")
	d.req("create seal target", diffAPI+"STREAM.CREATE.SL", `{"name":"SL","subjects":["sl"]}`)
	d.pub("pub before seal", "sl", "x")
	d.req("update seal", u+"SL", `{"name":"SL","subjects":["sl"],"sealed":true}`)
	d.req("update unseal refused", u+"SL", `{"name":"SL","subjects":["sl"],"sealed":false}`)
	d.pub("pub sealed", "sl", "x")
	d.req("purge sealed", diffAPI+"STREAM.PURGE.SL", "")
	d.req("msg delete sealed", diffAPI+"STREAM.MSG.DELETE.SL", `{"seq":1}`)
	d.req("info sealed", diffAPI+"STREAM.INFO.SL", "")
	d.req("create consumer limits target", diffAPI+"STREAM.CREATE.CL", `{"name":"CL","subjects":["cl.>"]}`)
	d.req("consumer over the new limits", diffAPI+"CONSUMER.CREATE.CL.x", `{"stream_name":"CL","config":{"name":"x","ack_policy":"explicit","inactive_threshold":3600000000000}}`)
	d.req("consumer within the new limits", diffAPI+"CONSUMER.CREATE.CL.y", `{"stream_name":"CL","config":{"durable_name":"y","ack_policy":"explicit","max_ack_pending":5}}`)
	d.req("update inactive limit below a consumer", u+"CL", `{"name":"CL","subjects":["cl.>"],"consumer_limits":{"inactive_threshold":1000000000}}`)
	d.req("update ack pending limit below a consumer", u+"CL", `{"name":"CL","subjects":["cl.>"],"consumer_limits":{"max_ack_pending":10}}`)
	d.req("update limits above every consumer", u+"CL", `{"name":"CL","subjects":["cl.>"],"consumer_limits":{"inactive_threshold":7200000000000,"max_ack_pending":2000}}`)
}

func (d *differ) msgGetDelete() {
	g := diffAPI + "STREAM.MSG.GET."
	d.req("msg get seq", g+"S2", `{"seq":1}`)
	d.req("msg get seq with headers", g+"S2", `{"seq":3}`)
	d.req("msg get seq with headers no_hdr", g+"S2", `{"seq":3,"no_hdr":true}`)
	d.req("msg get seq missing", g+"S2", `{"seq":999}`)
	d.req("msg get seq 0", g+"S2", `{"seq":0}`)
	d.req("msg get last_by_subj", g+"S2", `{"last_by_subj":"s2.a"}`)
	d.req("msg get last_by_subj wildcard", g+"S2", `{"last_by_subj":"s2.*"}`)
	d.req("msg get last_by_subj none", g+"S2", `{"last_by_subj":"s2.zzz"}`)
	d.req("msg get next_by_subj", g+"S2", `{"next_by_subj":"s2.a"}`)
	d.req("msg get next_by_subj from seq", g+"S2", `{"next_by_subj":"s2.a","seq":4}`)
	d.req("msg get next_by_subj wildcard from seq", g+"S2", `{"next_by_subj":"s2.*","seq":6}`)
	d.req("msg get next_by_subj none", g+"S2", `{"next_by_subj":"s2.a","seq":100}`)
	d.req("msg get empty body", g+"S2", ``)
	d.req("msg get empty object", g+"S2", `{}`)
	d.req("msg get seq and last_by_subj", g+"S2", `{"seq":1,"last_by_subj":"s2.a"}`)
	d.req("msg get last and next", g+"S2", `{"last_by_subj":"s2.a","next_by_subj":"s2.a"}`)
	d.req("msg get batch", g+"S2", `{"seq":1,"batch":2}`)
	d.req("msg get malformed", g+"S2", `{"seq":`)
	d.req("msg get unknown key", g+"S2", `{"seq":1,"bogus":1}`)
	d.req("msg get unknown stream", g+"NOPE", `{"seq":1}`)
	d.req("msg get memory", g+"M1", `{"seq":1}`)
	d.req("msg get start_time before", g+"S2", `{"start_time":"2000-01-01T00:00:00Z"}`)
	d.req("msg get start_time with next_by_subj", g+"S2", `{"start_time":"2000-01-01T00:00:00Z","next_by_subj":"s2.b"}`)
	d.req("msg get start_time after", g+"S2", `{"start_time":"2200-01-01T00:00:00Z"}`)
	d.req("msg get start_time and seq", g+"S2", `{"start_time":"2000-01-01T00:00:00Z","seq":1}`)
	d.req("msg get start_time and last_by_subj", g+"S2", `{"start_time":"2000-01-01T00:00:00Z","last_by_subj":"s2.a"}`)
	d.req("msg get start_time bad", g+"S2", `{"start_time":"yesterday"}`)
	d.req("msg get start_time unknown stream", g+"NOPE", `{"start_time":"2000-01-01T00:00:00Z"}`)

	del := diffAPI + "STREAM.MSG.DELETE."
	d.req("msg delete", del+"S2", `{"seq":2}`)
	d.req("msg delete no_erase", del+"S2", `{"seq":4,"no_erase":true}`)
	d.req("msg delete again", del+"S2", `{"seq":2}`)
	d.req("msg delete missing", del+"S2", `{"seq":999}`)
	d.req("msg delete empty body", del+"S2", ``)
	d.req("msg delete empty object", del+"S2", `{}`)
	d.req("msg delete malformed", del+"S2", `{"seq`)
	d.req("msg delete deny_delete", del+"DENY", `{"seq":1}`)
	d.req("msg delete unknown stream", del+"NOPE", `{"seq":1}`)
	d.req("msg get deleted", g+"S2", `{"seq":2}`)
	d.req("info deleted_details", diffAPI+"STREAM.INFO.S2", `{"deleted_details":true}`)
	d.req("info deleted_details and subjects", diffAPI+"STREAM.INFO.S2", `{"deleted_details":true,"subjects_filter":"s2.*"}`)
}

func (d *differ) directGet() {
	dg := diffAPI + "DIRECT.GET."
	d.frames("direct get seq", dg+"D", "", `{"seq":1}`, 1)
	d.frames("direct get last_by_subj", dg+"D", "", `{"last_by_subj":"d.a"}`, 1)
	d.frames("direct get next_by_subj", dg+"D", "", `{"next_by_subj":"d.a","seq":2}`, 1)
	d.frames("direct get subject form", dg+"D.d.b", "", ``, 1)
	d.frames("direct get subject form wildcard", dg+"D.d.>", "", ``, 1)
	d.frames("direct get no_hdr", dg+"D", "", `{"seq":1,"no_hdr":true}`, 1)
	d.frames("direct get missing", dg+"D", "", `{"seq":99}`, 1)
	d.frames("direct get subject form missing", dg+"D.d.zzz", "", ``, 1)
	d.frames("direct get empty body", dg+"D", "", ``, 1)
	d.frames("direct get empty object", dg+"D", "", `{}`, 1)
	d.frames("direct get malformed", dg+"D", "", `{"seq":`, 1)
	d.frames("direct get seq and last_by_subj", dg+"D", "", `{"seq":1,"last_by_subj":"d.a"}`, 1)
	d.frames("direct get subject form with body", dg+"D.d.a", "", `{"seq":1}`, 1)
	d.frames("direct get batch", dg+"D", "", `{"seq":1,"batch":2}`, 3)
	d.frames("direct get batch next_by_subj", dg+"D", "", `{"next_by_subj":"d.a","batch":5}`, 3)
	d.frames("direct get api level too high", dg+"D", "Nats-Required-Api-Level: 99", `{"seq":1}`, 1)
	d.frames("direct get not allowed", dg+"S1", "", `{"seq":1}`, 1)
	d.frames("direct get unknown stream", dg+"NOPE", "", `{"seq":1}`, 1)
	d.frames("direct get many options stream", dg+"S2", "", `{"last_by_subj":"s2.a"}`, 1)

	// ADR-31 batches, start_time and multi_last (nats-server 2.11).
	d.frames("direct get batch from seq 0 next_by_subj", dg+"D", "", `{"batch":2,"next_by_subj":"d.>"}`, 3)
	d.frames("direct get batch over the end", dg+"D", "", `{"seq":3,"batch":10}`, 3)
	d.frames("direct get batch one", dg+"D", "", `{"seq":2,"batch":1}`, 2)
	d.frames("direct get batch max_bytes", dg+"D", "", `{"seq":1,"batch":10,"max_bytes":20}`, 2)
	d.frames("direct get batch none", dg+"D", "", `{"seq":99,"batch":3}`, 1)
	d.frames("direct get batch no_hdr", dg+"D", "", `{"seq":1,"batch":2,"no_hdr":true}`, 3)
	d.frames("direct get batch last_by_subj", dg+"D", "", `{"last_by_subj":"d.a","batch":2}`, 1)
	d.frames("direct get start_time", dg+"D", "", `{"start_time":"2000-01-01T00:00:00Z"}`, 1)
	d.frames("direct get start_time after", dg+"D", "", `{"start_time":"2200-01-01T00:00:00Z"}`, 1)
	d.frames("direct get start_time batch", dg+"D", "", `{"start_time":"2000-01-01T00:00:00Z","batch":3,"next_by_subj":"d.a"}`, 3)
	d.frames("direct get start_time and seq", dg+"D", "", `{"start_time":"2000-01-01T00:00:00Z","seq":1}`, 1)
	d.frames("direct get multi_last", dg+"D", "", `{"multi_last":["d.a","d.b"]}`, 3)
	d.frames("direct get multi_last wildcard", dg+"D", "", `{"multi_last":["d.>"]}`, 4)
	d.frames("direct get multi_last up_to_seq", dg+"D", "", `{"multi_last":["d.>"],"up_to_seq":2}`, 3)
	d.frames("direct get multi_last batch", dg+"D", "", `{"multi_last":["d.>"],"batch":2}`, 3)
	d.frames("direct get multi_last page 2", dg+"D", "", `{"multi_last":["d.>"],"batch":2,"seq":3,"up_to_seq":4}`, 3)
	d.frames("direct get multi_last max_bytes", dg+"D", "", `{"multi_last":["d.>"],"max_bytes":10}`, 2)
	d.frames("direct get multi_last up_to_time before", dg+"D", "", `{"multi_last":["d.>"],"up_to_time":"2000-01-01T00:00:00Z"}`, 1)
	d.frames("direct get multi_last up_to_time after", dg+"D", "", `{"multi_last":["d.>"],"up_to_time":"2200-01-01T00:00:00Z"}`, 4)
	d.frames("direct get multi_last none", dg+"D", "", `{"multi_last":["zzz"]}`, 1)
	d.frames("direct get multi_last no_hdr", dg+"D", "", `{"multi_last":["d.b"],"no_hdr":true}`, 2)
	d.frames("direct get multi_last and next_by_subj", dg+"D", "", `{"multi_last":["d.a"],"next_by_subj":"d.a"}`, 1)
	d.frames("direct get up_to_seq and up_to_time", dg+"D", "", `{"multi_last":["d.a"],"up_to_seq":1,"up_to_time":"2000-01-01T00:00:00Z"}`, 1)
	d.frames("direct get up_to only", dg+"D", "", `{"up_to_seq":1,"up_to_time":"2000-01-01T00:00:00Z"}`, 1)
	d.frames("direct get subject form with max_bytes", dg+"D.d.a", "", `{"max_bytes":5}`, 1)
	d.frames("direct get subject form with blank body", dg+"D.d.a", "", ` `, 1)
	d.frames("direct get blank body", dg+"D", "", ` `, 1)
}

func (d *differ) purge() {
	p := diffAPI + "STREAM.PURGE."
	c := diffAPI + "STREAM.CREATE."
	d.req("create purge target", c+"PG", `{"name":"PG","subjects":["pg.*"]}`)
	for i := 1; i <= 10; i++ {
		d.pub(fmt.Sprintf("pub pg %d", i), fmt.Sprintf("pg.%c", 'a'+i%3), strconv.Itoa(i))
	}
	d.req("purge seq 1 no-op", p+"PG", `{"seq":1}`)
	d.req("purge seq", p+"PG", `{"seq":3}`)
	d.req("purge filter", p+"PG", `{"filter":"pg.a"}`)
	d.req("purge filter keep", p+"PG", `{"filter":"pg.b","keep":1}`)
	d.req("purge filter seq", p+"PG", `{"filter":"pg.c","seq":7}`)
	d.req("purge seq and keep", p+"PG", `{"seq":5,"keep":1}`)
	d.req("purge malformed", p+"PG", `{"keep":`)
	d.req("purge unknown key", p+"PG", `{"filter":"pg.none","bogus":1}`)
	d.req("info after partial purges", diffAPI+"STREAM.INFO.PG", `{"subjects_filter":">","deleted_details":true}`)
	d.req("purge keep", p+"PG", `{"keep":2}`)
	d.req("purge all", p+"PG", "")
	d.req("purge all again", p+"PG", "")
	d.req("purge non-json body", p+"PG", "xyz")
	d.req("purge deny_purge", p+"DENY", "")
	d.req("purge unknown stream", p+"NOPE", "")
	d.req("info after purge", diffAPI+"STREAM.INFO.PG", "")
	d.pub("pub after purge", "pg.a", "after")
	d.req("info after purge and publish", diffAPI+"STREAM.INFO.PG", "")
}

func diffConsumerBody(stream, action, config string) string {
	b := `{"stream_name":"` + stream + `","config":` + config
	if action != "" {
		b += `,"action":"` + action + `"`
	}
	return b + "}"
}

func (d *differ) consumerCreate() {
	c := diffAPI + "STREAM.CREATE."
	d.req("create consumer stream", c+"C", `{"name":"C","subjects":["c.>"],"max_consumers":100}`)
	for i, s := range []string{"c.a", "c.b", "c.a", "c.c.x", "c.b"} {
		d.pub(fmt.Sprintf("pub c %d", i+1), s, fmt.Sprintf("c%d", i+1))
	}
	cc := diffAPI + "CONSUMER.CREATE."
	dc := diffAPI + "CONSUMER.DURABLE.CREATE."

	// CONSUMER.CREATE.<S>: ephemeral, named through config.name.
	d.req("consumer create 5 tokens named", cc+"C", diffConsumerBody("C", "", `{"name":"EPH","ack_policy":"explicit","inactive_threshold":3600000000000}`))
	d.req("consumer create 5 tokens durable_name", cc+"C", diffConsumerBody("C", "", `{"durable_name":"DN5","ack_policy":"explicit"}`))
	// CONSUMER.CREATE.<S>.<C>
	d.req("consumer create pull defaults", cc+"C.PULL", diffConsumerBody("C", "", `{"durable_name":"PULL","ack_policy":"explicit"}`))
	d.req("consumer create pull again identical", cc+"C.PULL", diffConsumerBody("C", "", `{"durable_name":"PULL","ack_policy":"explicit"}`))
	d.req("consumer create ephemeral named by subject", cc+"C.EPH2", diffConsumerBody("C", "", `{"ack_policy":"none","inactive_threshold":60000000000}`))
	d.req("consumer create many options", cc+"C.MANY", diffConsumerBody("C", "create",
		`{"durable_name":"MANY","description":"many options","deliver_policy":"by_start_sequence","opt_start_seq":2,`+
			`"ack_policy":"explicit","ack_wait":5000000000,"max_deliver":5,"backoff":[1000000000,2000000000],`+
			`"filter_subjects":["c.a","c.c.>"],"replay_policy":"instant","sample_freq":"50%","max_waiting":10,`+
			`"max_ack_pending":50,"headers_only":true,"max_batch":20,"max_expires":30000000000,"max_bytes":1048576,`+
			`"inactive_threshold":3600000000000,"num_replicas":0,"mem_storage":true,"metadata":{"k":"v","a":"b"}}`))
	d.req("consumer create by start time", cc+"C.TIME", diffConsumerBody("C", "",
		`{"durable_name":"TIME","deliver_policy":"by_start_time","opt_start_time":"2020-01-01T00:00:00Z","ack_policy":"all"}`))
	d.req("consumer create last per subject", cc+"C.LPS", diffConsumerBody("C", "", `{"durable_name":"LPS","deliver_policy":"last_per_subject","filter_subject":"c.*","ack_policy":"none"}`))
	d.req("consumer create deliver last", cc+"C.LAST", diffConsumerBody("C", "", `{"durable_name":"LAST","deliver_policy":"last","ack_policy":"explicit"}`))
	d.req("consumer create deliver new", cc+"C.NEW", diffConsumerBody("C", "", `{"durable_name":"NEW","deliver_policy":"new","ack_policy":"explicit","replay_policy":"original"}`))
	d.req("consumer create push", cc+"C.PUSH", diffConsumerBody("C", "",
		`{"durable_name":"PUSH","deliver_subject":"push.c","deliver_group":"q","ack_policy":"explicit","idle_heartbeat":5000000000,"flow_control":true}`))
	d.req("consumer create push ack none", cc+"C.PUSHN", diffConsumerBody("C", "", `{"durable_name":"PUSHN","deliver_subject":"push.n","ack_policy":"none"}`))
	d.req("consumer create paused", cc+"C.PAUSED", diffConsumerBody("C", "", `{"durable_name":"PAUSED","ack_policy":"explicit","pause_until":"2099-01-01T00:00:00Z"}`))
	// CONSUMER.CREATE.<S>.<C>.<F>
	d.req("consumer create with filter token", cc+"C.FILT.c.a", diffConsumerBody("C", "", `{"durable_name":"FILT","filter_subject":"c.a","ack_policy":"explicit"}`))
	d.req("consumer create with wildcard filter token", cc+"C.FILTW.c.>", diffConsumerBody("C", "", `{"name":"FILTW","filter_subject":"c.>","ack_policy":"explicit","inactive_threshold":3600000000000}`))
	d.req("consumer create filter token mismatch", cc+"C.FM.c.a", diffConsumerBody("C", "", `{"durable_name":"FM","filter_subject":"c.b","ack_policy":"explicit"}`))
	d.req("consumer create filter token without config filter", cc+"C.FM2.c.a", diffConsumerBody("C", "", `{"durable_name":"FM2","ack_policy":"explicit"}`))
	d.req("consumer create filter token with filter_subjects", cc+"C.FM3.c.a", diffConsumerBody("C", "", `{"durable_name":"FM3","filter_subjects":["c.a"],"ack_policy":"explicit"}`))
	// CONSUMER.DURABLE.CREATE.<S>.<C>
	d.req("consumer durable create", dc+"C.DUR", diffConsumerBody("C", "", `{"durable_name":"DUR","ack_policy":"explicit"}`))
	d.req("consumer durable create no durable_name", dc+"C.DUR2", diffConsumerBody("C", "", `{"ack_policy":"explicit"}`))
	d.req("consumer durable create name mismatch", dc+"C.DUR3", diffConsumerBody("C", "", `{"durable_name":"OTHER","ack_policy":"explicit"}`))
	d.req("consumer durable create extra token", dc+"C.DUR4.x", diffConsumerBody("C", "", `{"durable_name":"DUR4","ack_policy":"explicit"}`), diffTimeout(300*time.Millisecond))
	// Name checks.
	d.req("consumer create durable mismatch", cc+"C.AAA", diffConsumerBody("C", "", `{"durable_name":"BBB","ack_policy":"explicit"}`))
	d.req("consumer create name and durable differ", cc+"C", diffConsumerBody("C", "", `{"name":"N1","durable_name":"N2","ack_policy":"explicit"}`))
	d.req("consumer create name differs from subject", cc+"C.N3", diffConsumerBody("C", "", `{"name":"N4","ack_policy":"explicit"}`))
	d.req("consumer create stream_name mismatch", cc+"C.SM", diffConsumerBody("OTHER", "", `{"durable_name":"SM","ack_policy":"explicit"}`))
	d.req("consumer create stream_name missing", cc+"C.SM2", `{"config":{"durable_name":"SM2","ack_policy":"explicit"}}`)
	d.req("consumer create unknown stream", cc+"NOPE.X", diffConsumerBody("NOPE", "", `{"durable_name":"X","ack_policy":"explicit"}`))
	d.req("consumer create name with slash", cc+"C.A/B", diffConsumerBody("C", "", `{"durable_name":"A/B","ack_policy":"explicit"}`))
	d.req("consumer create name with dot in body", cc+"C", diffConsumerBody("C", "", `{"name":"A.B","ack_policy":"explicit"}`))
	d.req("consumer create name too long", cc+"C."+strings.Repeat("c", 256), diffConsumerBody("C", "", `{"durable_name":"`+strings.Repeat("c", 256)+`","ack_policy":"explicit"}`))
	// Actions.
	d.req("consumer action create identical", cc+"C.PULL", diffConsumerBody("C", "create", `{"durable_name":"PULL","ack_policy":"explicit"}`))
	d.req("consumer action create different", cc+"C.PULL", diffConsumerBody("C", "create", `{"durable_name":"PULL","ack_policy":"explicit","max_deliver":3}`))
	d.req("consumer action update missing", cc+"C.UPD", diffConsumerBody("C", "update", `{"durable_name":"UPD","ack_policy":"explicit"}`))
	d.req("consumer action update", cc+"C.PULL", diffConsumerBody("C", "update", `{"durable_name":"PULL","ack_policy":"explicit","description":"updated","max_deliver":3}`))
	d.req("consumer action bogus", cc+"C.PULL", diffConsumerBody("C", "bogus", `{"durable_name":"PULL","ack_policy":"explicit"}`))
	d.req("consumer update deliver policy refused", cc+"C.PULL", diffConsumerBody("C", "", `{"durable_name":"PULL","ack_policy":"explicit","deliver_policy":"new"}`))
	d.req("consumer update ack policy refused", cc+"C.PULL", diffConsumerBody("C", "", `{"durable_name":"PULL","ack_policy":"all"}`))
	d.req("consumer update push to pull refused", cc+"C.PUSH", diffConsumerBody("C", "", `{"durable_name":"PUSH","ack_policy":"explicit"}`))
	d.req("consumer create update target", cc+"C.UPD2", diffConsumerBody("C", "", `{"durable_name":"UPD2","ack_policy":"explicit"}`))
	d.req("consumer update pause_until ignored", cc+"C.UPD2", diffConsumerBody("C", "", `{"durable_name":"UPD2","ack_policy":"explicit","pause_until":"2099-01-01T00:00:00Z"}`))
	d.req("consumer info after update with pause_until", diffAPI+"CONSUMER.INFO.C.UPD2", "")
	d.req("consumer delete update target", diffAPI+"CONSUMER.DELETE.C.UPD2", "")
	// Malformed requests.
	d.req("consumer create malformed", cc+"C.MAL", `{"stream_name":"C","config":`)
	d.req("consumer create empty body", cc+"C.MAL", ``)
	d.req("consumer create no config", cc+"C.MAL", `{"stream_name":"C"}`)
	// Ephemerals made above with the default 5 s inactive_threshold go now,
	// while both servers are here: a slow run would otherwise see one
	// server expire them (and advise it) before the other.
	d.req("consumer delete MAL", diffAPI+"CONSUMER.DELETE.C.MAL", "")
	d.req("consumer delete N3", diffAPI+"CONSUMER.DELETE.C.N3", "")
	// Unknown keys: identical configs of a consumer of UKS (the servers
	// stay in the same state).
	d.req("consumer create unknown keys target", diffAPI+"CONSUMER.CREATE.UKS.UNK", diffConsumerBody("UKS", "", `{"durable_name":"UNK","ack_policy":"explicit"}`))
	d.req("consumer create unknown key", diffAPI+"CONSUMER.CREATE.UKS.UNK", diffConsumerBody("UKS", "", `{"durable_name":"UNK","ack_policy":"explicit","bogus":1}`))
	d.req("consumer create unknown top-level key", diffAPI+"CONSUMER.CREATE.UKS.UNK", `{"stream_name":"UKS","config":{"durable_name":"UNK","ack_policy":"explicit"},"bogus":1}`)
	d.req("consumer create bad ack policy", cc+"C.BAP", diffConsumerBody("C", "", `{"durable_name":"BAP","ack_policy":"sometimes"}`))
	d.req("consumer create bad deliver policy", cc+"C.BDP", diffConsumerBody("C", "", `{"durable_name":"BDP","deliver_policy":"whenever","ack_policy":"explicit"}`))
	d.req("consumer create replicas 3", cc+"C.R3", diffConsumerBody("C", "", `{"durable_name":"R3","ack_policy":"explicit","num_replicas":3}`))
	d.req("consumer create api level too high", cc+"C.LV", diffConsumerBody("C", "", `{"durable_name":"LV","ack_policy":"explicit"}`), diffHdr("Nats-Required-Api-Level", "99"))

	// Unnamed ephemeral (generated name) on a stream deleted right after.
	d.req("create ephemeral stream", c+"E", `{"name":"E","subjects":["e.>"]}`)
	d.req("consumer create unnamed ephemeral", cc+"E", diffConsumerBody("E", "", `{"ack_policy":"explicit"}`), diffGeneratedName())
	d.req("consumer names unnamed ephemeral", diffAPI+"CONSUMER.NAMES.E", "", diffGeneratedName())
	d.req("delete ephemeral stream", diffAPI+"STREAM.DELETE.E", "")
}

// consumerValidation sends consumer configs that break (or probe) each
// validation rule of docs/protocol.md 3.4 that a single server can
// reach; some are accepted by both servers (max_batch -1, max_deliver 0,
// ...), which is compared all the same.
func (d *differ) consumerValidation() {
	cc := diffAPI + "CONSUMER.CREATE.C."
	cases := []struct{ name, cfg string }{
		{"by_start_sequence without opt_start_seq", `{"deliver_policy":"by_start_sequence"}`},
		{"opt_start_seq with deliver all", `{"opt_start_seq":3}`},
		{"by_start_time without time", `{"deliver_policy":"by_start_time"}`},
		{"opt_start_time with deliver all", `{"opt_start_time":"2020-01-01T00:00:00Z"}`},
		{"negative ack_wait", `{"ack_wait":-1}`},
		{"backoff longer than max_deliver", `{"max_deliver":2,"backoff":[1000000000,2000000000,3000000000]}`},
		{"negative backoff", `{"backoff":[-1]}`},
		{"filter_subject and filter_subjects", `{"filter_subject":"c.a","filter_subjects":["c.b"]}`},
		{"empty filter_subjects entry", `{"filter_subjects":["c.a",""]}`},
		{"overlapping filter_subjects", `{"filter_subjects":["c.*","c.a"]}`},
		{"invalid filter_subject", `{"filter_subject":"c..a"}`},
		{"rate_limit_bps on pull", `{"rate_limit_bps":1000}`},
		{"max_waiting on push", `{"deliver_subject":"push.v1","max_waiting":5}`},
		{"max_ack_pending with ack none on push", `{"deliver_subject":"push.v2","ack_policy":"none","max_ack_pending":5}`},
		{"flow_control on pull", `{"flow_control":true,"idle_heartbeat":1000000000}`},
		{"flow_control without heartbeat", `{"deliver_subject":"push.v3","flow_control":true}`},
		{"idle_heartbeat on pull", `{"idle_heartbeat":1000000000}`},
		{"idle_heartbeat too small", `{"deliver_subject":"push.v4","idle_heartbeat":50000000}`},
		{"deliver_subject wildcard", `{"deliver_subject":"push.*"}`},
		{"deliver_subject invalid", `{"deliver_subject":"push..x"}`},
		{"deliver_subject in stream", `{"deliver_subject":"c.deliver"}`},
		{"negative max_batch", `{"max_batch":-1}`},
		{"max_expires too small", `{"max_expires":1000}`},
		{"negative max_bytes", `{"max_bytes":-1}`},
		{"max_batch on push", `{"deliver_subject":"push.v5","max_batch":5}`},
		{"description too long", `{"description":"` + strings.Repeat("d", 4097) + `"}`},
		{"bad sample_freq", `{"sample_freq":"often"}`},
		{"sample_freq over 100", `{"sample_freq":"150%"}`},
		{"negative inactive_threshold", `{"inactive_threshold":-1}`},
		{"max_deliver 0", `{"max_deliver":0}`},
		{"max_deliver 1 with backoff", `{"max_deliver":1,"backoff":[1000000000]}`},
		{"negative max_waiting", `{"max_waiting":-1}`},
		{"headers_only on push", `{"deliver_subject":"push.v6","headers_only":true}`},
		{"priority groups with policy none", `{"priority_groups":["g"]}`},
		{"bad priority group name", `{"priority_groups":["bad group!"],"priority_policy":"overflow"}`},
		{"priority policy without groups", `{"priority_policy":"overflow"}`},
		{"priority_timeout with policy none", `{"priority_timeout":1000000000}`},
		{"bad priority policy", `{"priority_policy":"bogus"}`},
		{"replay original with max ack pending -1", `{"replay_policy":"original","max_ack_pending":-1}`},
		{"max_ack_pending over account limit", `{"max_ack_pending":100000000}`},
		{"reserved metadata key", `{"metadata":{"_nats.x":"y"}}`},
		{"ack none pull", `{"ack_policy":"none"}`},
	}
	for i, tc := range cases {
		name := fmt.Sprintf("V%02d", i+1)
		cfg := `{"durable_name":"` + name + `","ack_policy":"explicit",` + strings.TrimPrefix(tc.cfg, "{")
		if strings.Contains(tc.cfg, `"ack_policy"`) {
			cfg = `{"durable_name":"` + name + `",` + strings.TrimPrefix(tc.cfg, "{")
		}
		d.req("consumer config check "+tc.name, cc+name, diffConsumerBody("C", "", cfg))
	}
	// max_consumers (the stream allows 20) and a stream-level limit of 1.
	d.req("create max_consumers 1 stream", diffAPI+"STREAM.CREATE.MC1", `{"name":"MC1","subjects":["mc1"],"max_consumers":1}`)
	d.req("consumer create under max_consumers", diffAPI+"CONSUMER.CREATE.MC1.A", diffConsumerBody("MC1", "", `{"durable_name":"A","ack_policy":"explicit"}`))
	d.req("consumer create over max_consumers", diffAPI+"CONSUMER.CREATE.MC1.B", diffConsumerBody("MC1", "", `{"durable_name":"B","ack_policy":"explicit"}`))
	d.req("consumer update at max_consumers", diffAPI+"CONSUMER.CREATE.MC1.A", diffConsumerBody("MC1", "", `{"durable_name":"A","ack_policy":"explicit","description":"u"}`))
	d.req("consumer create ack_policy missing", diffAPI+"CONSUMER.CREATE.MC1.C", diffConsumerBody("MC1", "", `{"durable_name":"C"}`))
}

func (d *differ) workQueueConsumers() {
	d.req("create workqueue stream", diffAPI+"STREAM.CREATE.WQ", `{"name":"WQ","subjects":["wq.>"],"retention":"workqueue"}`)
	d.req("create interest stream", diffAPI+"STREAM.CREATE.INT", `{"name":"INT","subjects":["int.>"],"retention":"interest"}`)
	cc := diffAPI + "CONSUMER.CREATE.WQ."
	d.req("wq consumer ack none pull", cc+"W0", diffConsumerBody("WQ", "", `{"durable_name":"W0","ack_policy":"none"}`))
	d.req("wq consumer ack none push", cc+"W0P", diffConsumerBody("WQ", "", `{"durable_name":"W0P","ack_policy":"none","deliver_subject":"wq.push"}`))
	d.req("wq consumer ack none push elsewhere", cc+"W0Q", diffConsumerBody("WQ", "", `{"durable_name":"W0Q","ack_policy":"none","deliver_subject":"wqdeliver"}`))
	d.req("wq consumer deliver last", cc+"WL", diffConsumerBody("WQ", "", `{"durable_name":"WL","ack_policy":"explicit","deliver_policy":"last"}`))
	d.req("wq consumer unfiltered", cc+"W1", diffConsumerBody("WQ", "", `{"durable_name":"W1","ack_policy":"explicit"}`))
	d.req("wq consumer second unfiltered", cc+"W2", diffConsumerBody("WQ", "", `{"durable_name":"W2","ack_policy":"explicit"}`))
	d.req("wq delete unfiltered", diffAPI+"CONSUMER.DELETE.WQ.W1", "")
	d.req("wq consumer filtered", cc+"W3", diffConsumerBody("WQ", "", `{"durable_name":"W3","ack_policy":"explicit","filter_subject":"wq.a"}`))
	d.req("wq consumer overlapping filter", cc+"W4", diffConsumerBody("WQ", "", `{"durable_name":"W4","ack_policy":"explicit","filter_subject":"wq.*"}`))
	d.req("wq consumer disjoint filter", cc+"W5", diffConsumerBody("WQ", "", `{"durable_name":"W5","ack_policy":"explicit","filter_subjects":["wq.b","wq.c.>"]}`))
	d.req("wq consumer replicas mismatch", cc+"W6", diffConsumerBody("WQ", "", `{"durable_name":"W6","ack_policy":"explicit","filter_subject":"wq.d","num_replicas":1}`))
	d.req("interest consumer ack none", diffAPI+"CONSUMER.CREATE.INT.I1", diffConsumerBody("INT", "", `{"durable_name":"I1","ack_policy":"none"}`))
	d.pub("pub wq", "wq.a", "work")
	d.pub("pub int", "int.a", "interest")
	d.req("info wq", diffAPI+"STREAM.INFO.WQ", "")
	d.req("info int", diffAPI+"STREAM.INFO.INT", "")
}

func (d *differ) consumerInfoNamesListPause() {
	ci := diffAPI + "CONSUMER.INFO.C."
	d.req("consumer info pull", ci+"PULL", "")
	d.req("consumer info many", ci+"MANY", "")
	d.req("consumer info push", ci+"PUSH", "")
	d.req("consumer info last per subject", ci+"LPS", "")
	d.req("consumer info deliver last", ci+"LAST", "")
	d.req("consumer info deliver new", ci+"NEW", "")
	d.req("consumer info by start time", ci+"TIME", "")
	d.req("consumer info ephemeral", ci+"EPH2", "")
	d.req("consumer info filter token", ci+"FILTW", "")
	d.req("consumer info paused", ci+"PAUSED", "")
	d.req("consumer info unknown consumer", ci+"NOPE", "")
	d.req("consumer info unknown stream", diffAPI+"CONSUMER.INFO.NOPE.X", "")
	d.req("consumer info with body", ci+"PULL", "{}")

	n := diffAPI + "CONSUMER.NAMES.C"
	d.req("consumer names", n, "")
	d.req("consumer names offset", n, `{"offset":5}`)
	d.req("consumer names offset past end", n, `{"offset":500}`)
	d.req("consumer names malformed", n, `{"offset":`)
	d.req("consumer names non-json", n, `abc`)
	d.req("consumer names no consumers", diffAPI+"CONSUMER.NAMES.S1", "")
	d.req("consumer list", diffAPI+"CONSUMER.LIST.C", "")
	d.req("consumer list offset", diffAPI+"CONSUMER.LIST.C", `{"offset":10}`)
	d.req("consumer list no consumers", diffAPI+"CONSUMER.LIST.S1", "")
	d.req("consumer list unknown stream", diffAPI+"CONSUMER.LIST.NOPE", "")

	p := diffAPI + "CONSUMER.PAUSE.C."
	d.req("pause until future", p+"PULL", `{"pause_until":"2099-06-01T12:00:00Z"}`)
	d.req("consumer info after pause", ci+"PULL", "")
	d.req("pause resume empty body", p+"PULL", "")
	d.req("pause again", p+"PULL", `{"pause_until":"2098-01-01T00:00:00.5Z"}`)
	d.req("pause resume past time", p+"PULL", `{"pause_until":"1970-01-01T00:00:00.000Z"}`)
	d.req("pause resume empty object", p+"PAUSED", `{}`)
	d.req("pause unknown consumer", p+"NOPE", `{"pause_until":"2099-01-01T00:00:00Z"}`)
	d.req("pause unknown stream", diffAPI+"CONSUMER.PAUSE.NOPE.X", `{"pause_until":"2099-01-01T00:00:00Z"}`)
	d.req("pause malformed", p+"PULL", `{"pause_until":`)
	d.req("pause bad time", p+"PULL", `{"pause_until":"tomorrow"}`)
	d.req("consumer info after resume", ci+"PULL", "")

	del := diffAPI + "CONSUMER.DELETE.C."
	d.req("consumer delete", del+"LAST", "")
	d.req("consumer delete again", del+"LAST", "")
	d.req("consumer delete with body", del+"NEW", "{}")
	d.req("consumer delete unknown stream", diffAPI+"CONSUMER.DELETE.NOPE.X", "")
	d.req("stream info consumer count", diffAPI+"STREAM.INFO.C", "")
	d.req("stream delete with body", diffAPI+"STREAM.DELETE.S1", "{}")
	d.req("stream delete unknown", diffAPI+"STREAM.DELETE.NOPE", "")
}

func (d *differ) pullStatus() {
	c := diffAPI + "STREAM.CREATE."
	cc := diffAPI + "CONSUMER.CREATE.P."
	next := diffAPI + "CONSUMER.MSG.NEXT.P."
	d.req("create pull stream", c+"P", `{"name":"P","subjects":["p.>"]}`)
	d.req("consumer create empty pull", cc+"EMPTY", diffConsumerBody("P", "", `{"durable_name":"EMPTY","ack_policy":"explicit","max_batch":5}`))
	d.req("consumer create limits pull", cc+"LIM", diffConsumerBody("P", "", `{"durable_name":"LIM","ack_policy":"explicit","max_expires":1000000000,"max_bytes":100}`))
	d.req("consumer create push for pull", cc+"PUSH", diffConsumerBody("P", "", `{"durable_name":"PUSH","ack_policy":"explicit","deliver_subject":"pdeliver.nowhere"}`))

	d.frames("pull no_wait empty", next+"EMPTY", "", `{"batch":1,"no_wait":true}`, 1)
	d.frames("pull no_wait empty batch 5", next+"EMPTY", "", `{"batch":5,"no_wait":true}`, 1)
	d.frames("pull expires empty", next+"EMPTY", "", `{"batch":3,"expires":200000000}`, 1)
	d.frames("pull no_wait with expires empty", next+"EMPTY", "", `{"batch":2,"no_wait":true,"expires":200000000}`, 1)
	d.frames("pull batch over max_batch", next+"EMPTY", "", `{"batch":10}`, 1)
	d.frames("pull expires over max_expires", next+"LIM", "", `{"batch":1,"expires":2000000000}`, 1)
	d.frames("pull max_bytes over consumer max_bytes", next+"LIM", "", `{"batch":1,"max_bytes":200}`, 1)
	d.frames("pull push consumer", next+"PUSH", "", `{"batch":1}`, 1)
	d.frames("pull heartbeat too large", next+"EMPTY", "", `{"batch":1,"expires":300000000,"idle_heartbeat":200000000}`, 1)
	d.frames("pull malformed", next+"EMPTY", "", `{"batch":`, 1)
	d.frames("pull unknown consumer", next+"NOPE", "", `{"batch":1}`, 1)
	d.frames("pull api level too high", next+"EMPTY", "Nats-Required-Api-Level: 99", `{"batch":1,"no_wait":true}`, 1)

	d.pub("pub p 1", "p.a", "first")
	d.pub("pub p 2", "p.b", "second", diffHdr("X", "y"))
	d.pub("pub p 3", "p.a", strings.Repeat("z", 60))
	d.frames("pull text batch", next+"EMPTY", "", `1`, 1)
	d.frames("pull no_wait some", next+"EMPTY", "", `{"batch":5,"no_wait":true}`, 3)
	d.frames("pull no_wait after all delivered", next+"EMPTY", "", `{"batch":1,"no_wait":true}`, 1)
	d.req("consumer info after pulls", diffAPI+"CONSUMER.INFO.P.EMPTY", "")
	d.req("consumer create bytes pull", cc+"BYTES", diffConsumerBody("P", "", `{"durable_name":"BYTES","ack_policy":"none"}`))
	d.frames("pull max_bytes exceeded", next+"BYTES", "", `{"batch":5,"max_bytes":80}`, 3)
	d.frames("pull batch completed", next+"BYTES", "", `{"batch":1,"max_bytes":5000,"expires":1000000000}`, 2)
	d.req("consumer info bytes", diffAPI+"CONSUMER.INFO.P.BYTES", "")

	// 408 Requests Pending: messages wait (max_ack_pending holds them
	// back) but fewer than the waiting request asks for.
	d.req("consumer create max_ack_pending 1", cc+"MAP", diffConsumerBody("P", "", `{"durable_name":"MAP","ack_policy":"explicit","max_ack_pending":1}`))
	d.frames("pull map first", next+"MAP", "", `{"batch":1}`, 1)
	d.frames("pull map waiting", next+"MAP", "", `{"batch":5,"expires":700000000}`, 0)
	d.frames("pull map no_wait requests pending", next+"MAP", "", `{"batch":1,"no_wait":true}`, 1)
	d.readFrames("pull map waiting expired", 1)

	// rate_limit_bps on a push consumer: the bucket (max_payload) holds
	// all three messages, which go at once on both servers. (nats-server
	// binds a push consumer only to a subscription on exactly its deliver
	// subject, not to _D.>.)
	for _, s := range d.sides {
		s.raw.send("SUB _RL.rlp 2\r\n")
		s.raw.sync()
	}
	d.req("consumer create push rate limited", cc+"RLP", diffConsumerBody("P", "", `{"durable_name":"RLP","deliver_subject":"_RL.rlp","ack_policy":"none","rate_limit_bps":8000}`))
	d.readFrames("push rate limited deliveries", 3)
	for _, s := range d.sides {
		s.raw.send("UNSUB 2\r\n")
		s.raw.sync()
	}
}

// priorityGroups compares priority groups (ADR-42): the consumer
// configs refused, the pull requests refused, an overflow request passed
// over, a pinned client (its pin id normalized), a wrong id, UNPIN with
// its errors and advisories, and the prioritized order.
func (d *differ) priorityGroups() {
	cc := diffAPI + "CONSUMER.CREATE.PRIO."
	next := diffAPI + "CONSUMER.MSG.NEXT.PRIO."
	d.req("priority stream", diffAPI+"STREAM.CREATE.PRIO", `{"name":"PRIO","subjects":["prio.>"]}`)
	for i, tc := range []struct{ name, cfg string }{
		{"push", `"deliver_subject":"prio.push","priority_policy":"overflow","priority_groups":["jobs"]`},
		{"no groups", `"priority_policy":"pinned_client"`},
		{"empty group", `"priority_policy":"overflow","priority_groups":[""]`},
		{"bad group", `"priority_policy":"prioritized","priority_groups":["a.b"]`},
		{"groups without policy", `"priority_groups":["jobs"]`},
		{"timeout without policy", `"priority_timeout":1000000000`},
		{"unknown policy", `"priority_policy":"random","priority_groups":["jobs"]`},
	} {
		name := fmt.Sprintf("X%d", i+1)
		d.req("priority create "+tc.name, cc+name, diffConsumerBody("PRIO", "", `{"durable_name":"`+name+`",`+tc.cfg+`}`))
	}
	d.req("priority create overflow", cc+"OVER", diffConsumerBody("PRIO", "", `{"durable_name":"OVER","ack_policy":"explicit","priority_policy":"overflow","priority_groups":["jobs"]}`))
	d.req("priority create pinned", cc+"PIN", diffConsumerBody("PRIO", "", `{"durable_name":"PIN","ack_policy":"explicit","priority_policy":"pinned_client","priority_groups":["jobs"],"priority_timeout":60000000000}`))
	d.req("priority create prioritized", cc+"PRI", diffConsumerBody("PRIO", "", `{"durable_name":"PRI","ack_policy":"explicit","priority_policy":"prioritized","priority_groups":["jobs","other"]}`))
	d.req("priority info pinned before a pin", diffAPI+"CONSUMER.INFO.PRIO.PIN", "")
	for i, tc := range []struct{ consumer, body string }{
		{"OVER", `{"batch":1}`},
		{"OVER", `{"batch":1,"group":"nope"}`},
		{"OVER", `{"batch":1,"group":"jobs","id":"x"}`},
		{"OVER", `{"batch":1,"group":"jobs","priority":10}`},
		{"OVER", `{"batch":1,"group":"jobs","priority":"x"}`},
		{"PIN", `{"batch":1,"group":"jobs","min_pending":3}`},
		{"PIN", `{"batch":1,"group":"jobs","id":"nope","no_wait":true}`},
		{"OVER", `{"batch":1,"group":"jobs","min_pending":5,"no_wait":true}`},
	} {
		d.frames(fmt.Sprintf("priority pull %d", i+1), next+tc.consumer, "", tc.body, 1)
	}
	d.pub("priority pub 1", "prio.a", "one")
	d.pub("priority pub 2", "prio.b", "two")
	d.frames("priority overflow under min_pending", next+"OVER", "", `{"batch":2,"group":"jobs","min_pending":5,"expires":300000000}`, 1)
	d.frames("priority overflow min_pending met", next+"OVER", "", `{"batch":2,"group":"jobs","min_pending":2,"no_wait":true}`, 2)
	d.frames("priority pinned first", next+"PIN", "", `{"batch":1,"group":"jobs"}`, 1)
	d.req("priority info pinned", diffAPI+"CONSUMER.INFO.PRIO.PIN", "")
	d.frames("priority pinned wrong id", next+"PIN", "", `{"batch":1,"group":"jobs","id":"stale"}`, 1)
	u := diffAPI + "CONSUMER.UNPIN.PRIO."
	d.req("priority unpin empty", u+"PIN", "")
	d.req("priority unpin no group", u+"PIN", `{}`)
	d.req("priority unpin bad group", u+"PIN", `{"group":"a.b"}`)
	d.req("priority unpin unknown group", u+"PIN", `{"group":"other"}`)
	d.req("priority unpin no stream", diffAPI+"CONSUMER.UNPIN.NOPE.PIN", `{"group":"jobs"}`)
	d.req("priority unpin no consumer", u+"NOPE", `{"group":"jobs"}`)
	d.req("priority unpin plain consumer", u+"OVER", `{"group":"other"}`)
	d.req("priority unpin", u+"PIN", `{"group":"jobs"}`)
	d.req("priority info unpinned", diffAPI+"CONSUMER.INFO.PRIO.PIN", "")
	d.frames("priority pinned anew", next+"PIN", "", `{"batch":1,"group":"jobs"}`, 1)
	d.frames("priority prioritized", next+"PRI", "", `{"batch":1,"group":"other","priority":3,"no_wait":true}`, 1)
}

// readFrames reads n more frames from both servers (answers to an
// earlier request that come later) and compares them.
func (d *differ) readFrames(label string, n int) {
	d.t.Helper()
	d.useLabel(label)
	d.nFrame++
	res := diffBoth(d, func(s *diffSide) []string {
		var fs []string
		for range n {
			f, err := diffReadFrame(s.raw, diffFrameTimeout)
			if err != nil {
				return append(fs, "<"+err.Error()+">")
			}
			fs = append(fs, diffNormalizeFrame(f))
		}
		return fs
	})
	d.compareFrames(label, res[0], res[1])
}

// consumerReset compares CONSUMER.RESET (ADR-60): to the ack floor, to
// a sequence, the deliver policies that refuse one, bad bodies, and the
// deliveries after a reset.
func (d *differ) consumerReset() {
	cc := diffAPI + "CONSUMER.CREATE.RST."
	rs := diffAPI + "CONSUMER.RESET.RST."
	d.req("create reset stream", diffAPI+"STREAM.CREATE.RST", `{"name":"RST","subjects":["rst.>"]}`)
	for i := 1; i <= 5; i++ {
		d.pub(fmt.Sprintf("pub rst %d", i), "rst.a", fmt.Sprintf("r%d", i))
	}
	d.req("consumer create reset all", cc+"ALL", diffConsumerBody("RST", "", `{"durable_name":"ALL","ack_policy":"explicit","ack_wait":3600000000000}`))
	d.req("consumer create reset by_start_sequence", cc+"BSS", diffConsumerBody("RST", "", `{"durable_name":"BSS","ack_policy":"explicit","deliver_policy":"by_start_sequence","opt_start_seq":3}`))
	d.req("consumer create reset last", cc+"LST", diffConsumerBody("RST", "", `{"durable_name":"LST","ack_policy":"explicit","deliver_policy":"last"}`))
	d.frames("pull before reset", diffAPI+"CONSUMER.MSG.NEXT.RST.ALL", "", `{"batch":3}`, 3)
	d.req("reset to ack floor", rs+"ALL", "")
	d.req("consumer info after reset", diffAPI+"CONSUMER.INFO.RST.ALL", "")
	d.frames("pull after reset", diffAPI+"CONSUMER.MSG.NEXT.RST.ALL", "", `{"batch":2}`, 2)
	d.req("reset to seq", rs+"ALL", `{"seq":4}`)
	d.frames("pull after reset to seq", diffAPI+"CONSUMER.MSG.NEXT.RST.ALL", "", `{"batch":1}`, 1)
	d.req("reset to seq 0", rs+"ALL", `{"seq":0}`)
	d.req("reset past the end", rs+"ALL", `{"seq":100}`)
	d.req("reset malformed", rs+"ALL", `{"seq":`)
	d.req("reset below opt_start_seq", rs+"BSS", `{"seq":2}`)
	d.req("reset at opt_start_seq", rs+"BSS", `{"seq":3}`)
	d.req("reset deliver last to seq", rs+"LST", `{"seq":2}`)
	d.req("reset deliver last to ack floor", rs+"LST", "")
	d.req("reset api level too high", rs+"ALL", "", diffHdr("Nats-Required-Api-Level", "99"))
	d.req("reset missing consumer", rs+"NOPE", "", diffTimeout(300*time.Millisecond))
}

// restartConsumers restarts both servers: every stream and consumer of
// the run must come back the same (stream names and account info at the
// end compare them). An ephemeral consumer of a file stream comes back
// with its state, as nats-server v2.15.2 restores it; a mem_storage
// durable of the same stream does not.
func (d *differ) restartConsumers() {
	c := diffAPI + "STREAM.CREATE."
	cc := diffAPI + "CONSUMER.CREATE.RS."
	next := diffAPI + "CONSUMER.MSG.NEXT.RS."
	d.req("create restart stream", c+"RS", `{"name":"RS","subjects":["rs.>"]}`)
	// Published before the consumers exist: nats-server counts a
	// consumer's pending messages from the stream at its creation, but
	// learns of later publishes asynchronously, so the pending count in
	// the first delivery's reply subject would depend on timing there.
	d.pub("pub rs 1", "rs.a", "one")
	d.pub("pub rs 2", "rs.b", "two")
	d.req("consumer create restart ephemeral", cc+"EPH", diffConsumerBody("RS", "", `{"name":"EPH","ack_policy":"explicit","inactive_threshold":60000000000}`))
	d.req("consumer create restart mem durable", cc+"MEMD", diffConsumerBody("RS", "", `{"durable_name":"MEMD","ack_policy":"explicit","mem_storage":true}`))
	d.req("consumer create restart durable", cc+"DUR", diffConsumerBody("RS", "", `{"durable_name":"DUR","ack_policy":"explicit"}`))
	d.frames("pull ephemeral before restart", next+"EPH", "", `{"batch":1}`, 1)
	d.frames("pull durable before restart", next+"DUR", "", `{"batch":2}`, 2)

	d.restart()
	d.req("consumer names after restart", diffAPI+"CONSUMER.NAMES.RS", "")
	d.req("consumer info ephemeral after restart", diffAPI+"CONSUMER.INFO.RS.EPH", "")
	d.req("consumer info mem durable after restart", diffAPI+"CONSUMER.INFO.RS.MEMD", "")
	d.req("consumer info durable after restart", diffAPI+"CONSUMER.INFO.RS.DUR", "")
	d.frames("pull ephemeral after restart", next+"EPH", "", `{"batch":1,"no_wait":true}`, 1)
	d.req("consumer info ephemeral after pull", diffAPI+"CONSUMER.INFO.RS.EPH", "")
	d.req("consumer list after restart", diffAPI+"CONSUMER.LIST.RS", "")
	d.req("stream list after restart", diffAPI+"STREAM.LIST", "")
}

// endOfRun compares what is left: stray frames, account info with its
// counters and the advisories of the whole run.
func (d *differ) endOfRun() {
	// Stray frames (more than the exchanges expected).
	stray := diffBoth(d, func(s *diffSide) []string {
		var fs []string
		for {
			f, err := diffReadFrame(s.raw, 300*time.Millisecond)
			if err != nil {
				return fs
			}
			fs = append(fs, diffNormalizeFrame(f))
		}
	})
	d.useLabel("stray frames")
	d.compareFrames("stray frames", stray[0], stray[1])

	d.req("stream names at end", diffAPI+"STREAM.NAMES", "")
	d.req("account info at end", diffAPI+"INFO", "")

	// Advisories, per subject in order; the API audit advisories (when
	// compared: d.audits) per audited API subject, sorted (several API
	// workers publish them).
	advs := diffBoth(d, func(s *diffSide) map[string][]string {
		out := map[string][]string{}
		defer func() {
			for k, v := range out {
				if strings.HasPrefix(k, "audit ") {
					sort.Strings(v)
				}
			}
		}()
		for {
			m, err := s.adv.NextMsg(300 * time.Millisecond)
			if err != nil {
				return out
			}
			if m.Subject == "$JS.EVENT.ADVISORY.API" {
				if d.audits {
					subj, a := diffNormalizeAudit(m.Data)
					out["audit "+subj] = append(out["audit "+subj], a)
				}
				continue
			}
			subj := m.Subject
			if t := strings.Split(subj, "."); len(t) == 7 && t[3] == "CONSUMER" && t[5] == "E" {
				subj = strings.Join(t[:6], ".") + ".<generated>" // stream E's unnamed ephemeral
			}
			out[subj] = append(out[subj], string(m.Data))
		}
	})
	subjects := map[string]bool{}
	for _, m := range advs {
		for s := range m {
			subjects[s] = true
		}
	}
	sorted := make([]string, 0, len(subjects))
	for s := range subjects {
		sorted = append(sorted, s)
	}
	sort.Strings(sorted)
	for _, s := range sorted {
		c, n := advs[0][s], advs[1][s]
		for i := range max(len(c), len(n)) {
			label := fmt.Sprintf("advisory %s #%d", s, i+1)
			d.useLabel(label)
			cs, ns := "<none>", "<none>"
			if i < len(c) {
				cs = c[i]
			}
			if i < len(n) {
				ns = n[i]
			}
			d.compareAdvisory(label, cs, ns)
		}
	}
}

// diffNormalizeAudit returns the API subject of an API audit advisory
// and the advisory with its request and response decoded (JSON inside
// the JSON strings, compared as answers are) and the values that must
// differ replaced: the server's name, and the client's connection id,
// round-trip time and server.
func diffNormalizeAudit(b []byte) (string, string) {
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return "<bad>", string(b)
	}
	for _, k := range []string{"request", "response"} {
		var v any
		if s, ok := m[k].(string); ok && json.Unmarshal([]byte(s), &v) == nil {
			m[k] = v
		}
	}
	m["server"] = "<server>"
	if c, ok := m["client"].(map[string]any); ok {
		for _, k := range []string{"id", "rtt", "server"} {
			if _, ok := c[k]; ok {
				c[k] = "<" + k + ">"
			}
		}
	}
	subj, _ := m["subject"].(string)
	out, _ := json.Marshal(m)
	return subj, diffKeyOrderAs(b, out)
}

// diffKeyOrderAs returns normalized (the JSON object made from orig)
// with its top-level keys and those of its "client" in orig's order, so
// that the key order is compared too.
func diffKeyOrderAs(orig, normalized []byte) string {
	var n map[string]json.RawMessage
	if json.Unmarshal(normalized, &n) != nil {
		return string(normalized)
	}
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range diffTopKeys(orig) {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		v := n[k]
		if k == "client" && len(v) > 0 && v[0] == '{' {
			var oc struct {
				Client json.RawMessage `json:"client"`
			}
			_ = json.Unmarshal(orig, &oc)
			v = []byte(diffKeyOrderAs(oc.Client, v))
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.String()
}

// diffTopKeys returns the keys of the JSON object b in their order.
func diffTopKeys(b []byte) []string {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var keys []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return keys
		}
		k, _ := t.(string)
		keys = append(keys, k)
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return keys
		}
	}
	return keys
}

var diffAdvIDRe = regexp.MustCompile(`"id":"[^"]*"`)

// compareAdvisory compares two advisories with their nuid ids replaced,
// and the connection id, round-trip time and server of the client they
// name (the snapshot and restore advisories) too.
func (d *differ) compareAdvisory(label, c, n string) {
	c = diffAdvIDRe.ReplaceAllString(diffNormalizeAdvClient(c), `"id":"<id>"`)
	n = diffAdvIDRe.ReplaceAllString(diffNormalizeAdvClient(n), `"id":"<id>"`)
	d.compareJSON(label, c, n, strings.Contains(label, "<generated>"))
}

// diffAdvClientRe matches what must differ in the client an advisory
// names: its connection id and round-trip time (numbers; the advisory's
// own id is a string) and the server it is connected to (a server id).
var diffAdvClientRe = regexp.MustCompile(`"(id|rtt)":[0-9]+|"server":"N[A-Z0-9]{55}"`)

// diffNormalizeAdvClient returns the advisory s with its client's
// connection id, round-trip time and server replaced by placeholders,
// keys left in their order.
func diffNormalizeAdvClient(s string) string {
	return diffAdvClientRe.ReplaceAllStringFunc(s, func(m string) string {
		k, _, _ := strings.Cut(m, ":")
		return k + `:"<>"`
	})
}

// sourceConfigs sends mirror, source and republish configs that fail, so
// that the responses do not depend on when a sourcer first ran.
func (d *differ) sourceConfigs() {
	c := diffAPI + "STREAM.CREATE."
	d.req("source origin", c+"SO", `{"name":"SO","subjects":["so.>"],"max_msg_size":1024}`)
	for _, tc := range []struct{ name, body string }{
		{"mirror name invalid", `{"name":"V20","mirror":{"name":"a.b"}}`},
		{"source name invalid", `{"name":"V21","sources":[{"name":"a b"}]}`},
		{"source twice", `{"name":"V22","sources":[{"name":"X"},{"name":"X"}]}`},
		{"source filter and transforms", `{"name":"V24","sources":[{"name":"X","filter_subject":"a","subject_transforms":[{"src":"b","dest":"c"}]}]}`},
		{"source transform bad subject", `{"name":"V25","sources":[{"name":"X","subject_transforms":[{"src":"a..b","dest":"c"}]}]}`},
		{"source transform bad index", `{"name":"V26","sources":[{"name":"X","subject_transforms":[{"src":"a.*","dest":"c.{{wildcard(2)}}"}]}]}`},
		{"source transforms overlap", `{"name":"V27","sources":[{"name":"X","subject_transforms":[{"src":"a.>","dest":""},{"src":"a.b","dest":""}]}]}`},
		{"mirror filter and transforms", `{"name":"V28","mirror":{"name":"X","filter_subject":"a","subject_transforms":[{"src":"b","dest":"c"}]}}`},
		{"mirror transforms overlap", `{"name":"V29","mirror":{"name":"X","subject_transforms":[{"src":"a.*","dest":""},{"src":"*.b","dest":""}]}}`},
		{"mirror transform unknown function", `{"name":"V30","mirror":{"name":"X","subject_transforms":[{"src":"a","dest":"{{foo()}}"}]}}`},
		{"mirror with delete markers", `{"name":"V31","mirror":{"name":"X"},"subject_delete_marker_ttl":5000000000}`},
		{"mirror with subjects", `{"name":"V32","mirror":{"name":"X"},"subjects":["x"]}`},
		{"mirror smaller max_msg_size", `{"name":"V34","mirror":{"name":"SO"},"max_msg_size":10}`},
		{"source smaller max_msg_size", `{"name":"V35","sources":[{"name":"SO"}],"max_msg_size":10}`},
		{"source itself", `{"name":"V36","sources":[{"name":"V36"}]}`},
		{"mirror itself", `{"name":"V37","mirror":{"name":"V37"}}`},
		{"mirror filter invalid", `{"name":"V40","mirror":{"name":"SO","filter_subject":"so..x"}}`},
		{"source filter invalid", `{"name":"V41","sources":[{"name":"SO","filter_subject":"so.>.x"}]}`},
		{"source filter invalid, second", `{"name":"V42","sources":[{"name":"SO"},{"name":"NOSUCH","filter_subject":" "}]}`},
		{"republish > to a literal", `{"name":"V38","subjects":["v38"],"republish":{"dest":"b"}}`},
		{"republish cycle", `{"name":"V39","subjects":["v39.>"],"republish":{"src":">","dest":"v39.x.>"}}`},
	} {
		d.req("create "+tc.name, c+strings.SplitN(strings.SplitN(tc.body, `"name":"`, 2)[1], `"`, 2)[0], tc.body)
	}
	d.req("source origin delete", diffAPI+"STREAM.DELETE.SO", "")
}
