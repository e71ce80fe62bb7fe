package test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Key-value and object stores through the nats.go jetstream package
// (v1.55). Both are client-side conventions over streams (KV_<bucket>,
// OBJ_<bucket>): puts are publishes with expected-sequence headers, gets
// are direct gets, watches and object reads are ordered push consumers
// with flow control and heartbeats, deliver last-per-subject and
// headers-only. Checked against nats-server v2.15.2.

// kvxEntry is what the tests compare of a KeyValueEntry.
type kvxEntry struct {
	Key   string
	Value string
	Rev   uint64
	Op    jetstream.KeyValueOp
}

func kvxOf(e jetstream.KeyValueEntry) kvxEntry {
	return kvxEntry{e.Key(), string(e.Value()), e.Revision(), e.Operation()}
}

func kvxCreate(t testing.TB, js jetstream.JetStream, cfg jetstream.KeyValueConfig) jetstream.KeyValue {
	t.Helper()
	kv, err := js.CreateKeyValue(tctx(t), cfg)
	if err != nil {
		t.Fatalf("CreateKeyValue %s: %v", cfg.Bucket, err)
	}
	return kv
}

func kvxPut(t testing.TB, kv jetstream.KeyValue, key, value string) uint64 {
	t.Helper()
	rev, err := kv.Put(tctx(t), key, []byte(value))
	if err != nil {
		t.Fatalf("Put %s=%s: %v", key, value, err)
	}
	return rev
}

// kvxNext reads the next watcher update; a nil entry (end of the initial
// values) is reported as isNil.
func kvxNext(t testing.TB, w jetstream.KeyWatcher) (e kvxEntry, isNil bool) {
	t.Helper()
	select {
	case u, ok := <-w.Updates():
		if !ok {
			t.Fatal("watcher closed")
		}
		if u == nil {
			return kvxEntry{}, true
		}
		return kvxOf(u), false
	case <-time.After(cxWait):
		t.Fatal("no watcher update")
	}
	return kvxEntry{}, false
}

// kvxNoUpdate asserts that the watcher is quiet for d.
func kvxNoUpdate(t testing.TB, w jetstream.KeyWatcher, d time.Duration) {
	t.Helper()
	select {
	case u := <-w.Updates():
		if u == nil {
			t.Errorf("unexpected nil marker")
		} else {
			t.Errorf("unexpected update %+v", kvxOf(u))
		}
	case <-time.After(d):
	}
}

func TestKVBasics(t *testing.T) {
	u := startJS(t)
	_, js := jsConnect(t, u)
	kv := kvxCreate(t, js, jetstream.KeyValueConfig{Bucket: "CFG", History: 5, Description: "settings"})

	// The bucket is a stream with the KV conventions.
	s := cxStreamByName(t, js, "KV_CFG")
	cfg := s.CachedInfo().Config
	if !reflect.DeepEqual(cfg.Subjects, []string{"$KV.CFG.>"}) || cfg.MaxMsgsPerSubject != 5 || !cfg.AllowRollup ||
		!cfg.DenyDelete || !cfg.AllowDirect || cfg.Discard != jetstream.DiscardNew || cfg.Description != "settings" {
		t.Errorf("KV stream config: %+v", cfg)
	}

	// Put, Get.
	before := time.Now().Add(-time.Second)
	if rev := kvxPut(t, kv, "a", "1"); rev != 1 {
		t.Errorf("first put revision %d", rev)
	}
	e, err := kv.Get(tctx(t), "a")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if got := kvxOf(e); got != (kvxEntry{"a", "1", 1, jetstream.KeyValuePut}) || e.Bucket() != "CFG" {
		t.Errorf("Get a = %+v bucket %s", got, e.Bucket())
	}
	if e.Created().Before(before) || e.Created().After(time.Now().Add(time.Second)) {
		t.Errorf("created %v, want about now", e.Created())
	}
	kvxPut(t, kv, "a", "2")
	kvxPut(t, kv, "b.x", "bx")
	if _, err := kv.Get(tctx(t), "missing"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("Get of a missing key: %v, want ErrKeyNotFound", err)
	}
	if e, err := kv.GetRevision(tctx(t), "a", 1); err != nil || string(e.Value()) != "1" {
		t.Errorf("GetRevision(a, 1): %v", err)
	}
	if _, err := kv.GetRevision(tctx(t), "a", 3); !errors.Is(err, jetstream.ErrKeyNotFound) {
		// revision 3 is b.x, not a
		t.Errorf("GetRevision of another key's revision: %v, want ErrKeyNotFound", err)
	}

	// Update is compare-and-set on the key's last revision.
	rev, err := kv.Update(tctx(t), "a", []byte("3"), 2)
	if err != nil || rev != 4 {
		t.Fatalf("Update at the right revision: %d %v", rev, err)
	}
	_, err = kv.Update(tctx(t), "a", []byte("stale"), 2)
	if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		t.Errorf("Update at a stale revision: %v, want ErrKeyRevisionMismatch", err)
	}
	wantAPIError(t, err, 400, 10071, "wrong last sequence: 4")
	_, err = kv.Update(tctx(t), "new", []byte("x"), 1)
	if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		t.Errorf("Update of a missing key: %v, want ErrKeyRevisionMismatch", err)
	}

	// Create only if absent.
	if _, err := kv.Create(tctx(t), "a", []byte("again")); !errors.Is(err, jetstream.ErrKeyExists) {
		t.Errorf("Create of an existing key: %v, want ErrKeyExists", err)
	}
	if rev, err := kv.Create(tctx(t), "c", []byte("c1")); err != nil || rev != 5 {
		t.Errorf("Create of a new key: %d %v", rev, err)
	}

	// Delete leaves a marker; Create works again after it.
	if err := kv.Delete(tctx(t), "c"); err != nil {
		t.Fatal(err)
	}
	// (nats.go's Get reports a deleted key as not found.)
	if _, err := kv.Get(tctx(t), "c"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("Get of a deleted key: %v, want ErrKeyNotFound", err)
	}
	if err := kv.Delete(tctx(t), "a", jetstream.LastRevision(1)); !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		t.Errorf("Delete at a stale revision: %v, want ErrKeyRevisionMismatch", err)
	}
	if rev, err := kv.Create(tctx(t), "c", []byte("c2")); err != nil || rev != 7 {
		t.Errorf("Create after delete: %d %v", rev, err)
	}

	// History keeps up to 5 revisions per key, markers included.
	h, err := kv.History(tctx(t), "c")
	if err != nil {
		t.Fatal(err)
	}
	var hist []kvxEntry
	for _, e := range h {
		hist = append(hist, kvxOf(e))
	}
	want := []kvxEntry{{"c", "c1", 5, jetstream.KeyValuePut}, {"c", "", 6, jetstream.KeyValueDelete}, {"c", "c2", 7, jetstream.KeyValuePut}}
	if !reflect.DeepEqual(hist, want) {
		t.Errorf("History(c) = %+v, want %+v", hist, want)
	}
	for i := 1; i <= 7; i++ {
		kvxPut(t, kv, "h", fmt.Sprint(i))
	}
	h, err = kv.History(tctx(t), "h")
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 5 || string(h[0].Value()) != "3" || string(h[4].Value()) != "7" || h[4].Revision() != 14 {
		t.Errorf("History(h) with history 5: %d entries", len(h))
	}
	if _, err := kv.History(tctx(t), "never"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("History of a missing key: %v, want ErrKeyNotFound", err)
	}

	// Purge drops the key's history but the marker.
	if err := kv.Purge(tctx(t), "h"); err != nil {
		t.Fatal(err)
	}
	h, err = kv.History(tctx(t), "h")
	if err != nil || len(h) != 1 || h[0].Operation() != jetstream.KeyValuePurge || h[0].Revision() != 15 {
		t.Errorf("History after Purge: %d entries %v", len(h), err)
	}
	if _, err := kv.Get(tctx(t), "h"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("Get of a purged key: %v, want ErrKeyNotFound", err)
	}

	// Keys and ListKeys: live keys only.
	keys, err := kv.Keys(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(keys)
	if !reflect.DeepEqual(keys, []string{"a", "b.x", "c"}) {
		t.Errorf("Keys = %v", keys)
	}
	kl, err := kv.ListKeys(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for k := range kl.Keys() {
		listed = append(listed, k)
	}
	sort.Strings(listed)
	if !reflect.DeepEqual(listed, []string{"a", "b.x", "c"}) {
		t.Errorf("ListKeys = %v", listed)
	}
	fl, err := kv.ListKeysFiltered(tctx(t), "b.*")
	if err != nil {
		t.Fatal(err)
	}
	listed = nil
	for k := range fl.Keys() {
		listed = append(listed, k)
	}
	if !reflect.DeepEqual(listed, []string{"b.x"}) {
		t.Errorf("ListKeysFiltered(b.*) = %v", listed)
	}

	// Status comes from the stream info.
	st, err := kv.Status(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	si := streamInfo(t, s)
	if st.Bucket() != "CFG" || st.History() != 5 || st.Values() != si.State.Msgs || st.Bytes() != si.State.Bytes ||
		st.BackingStore() != "JetStream" || st.TTL() != 0 {
		t.Errorf("Status: bucket %s history %d values %d bytes %d store %s; stream has %d msgs %d bytes",
			st.Bucket(), st.History(), st.Values(), st.Bytes(), st.BackingStore(), si.State.Msgs, si.State.Bytes)
	}
	// a: 3 revisions, b.x: 1, c: 3, h: 1 marker.
	if st.Values() != 8 {
		t.Errorf("Values = %d, want 8", st.Values())
	}

	// PurgeDeletes removes the markers of deleted keys.
	if err := kv.Delete(tctx(t), "b.x"); err != nil {
		t.Fatal(err)
	}
	if err := kv.PurgeDeletes(tctx(t), jetstream.DeleteMarkersOlderThan(-1)); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.History(tctx(t), "b.x"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("History of b.x after PurgeDeletes: %v, want ErrKeyNotFound", err)
	}
	if _, err := kv.History(tctx(t), "h"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("History of h after PurgeDeletes: %v, want ErrKeyNotFound", err)
	}

	// Bucket names, and deleting the bucket.
	var names []string
	nl := js.KeyValueStoreNames(tctx(t))
	for n := range nl.Name() {
		names = append(names, n)
	}
	if !reflect.DeepEqual(names, []string{"CFG"}) {
		t.Errorf("KeyValueStoreNames = %v", names)
	}
	if err := js.DeleteKeyValue(tctx(t), "CFG"); err != nil {
		t.Fatal(err)
	}
	if _, err := js.KeyValue(tctx(t), "CFG"); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Errorf("KeyValue after delete: %v, want ErrBucketNotFound", err)
	}
}

func TestKVWatch(t *testing.T) {
	u := startJS(t)
	_, js := jsConnect(t, u)
	kv := kvxCreate(t, js, jetstream.KeyValueConfig{Bucket: "W", History: 10})
	kvxPut(t, kv, "a", "a1")                           // 1
	kvxPut(t, kv, "b", "b1")                           // 2
	kvxPut(t, kv, "a", "a2")                           // 3
	kvxPut(t, kv, "x.y", "xy1")                        // 4
	kvxPut(t, kv, "gone", "g1")                        // 5
	if err := kv.Delete(tctx(t), "gone"); err != nil { // 6
		t.Fatal(err)
	}

	// WatchAll: the latest value of each key in stream order (the delete
	// marker included), nil, then live updates.
	w, err := kv.WatchAll(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var initial []kvxEntry
	for {
		e, isNil := kvxNext(t, w)
		if isNil {
			break
		}
		initial = append(initial, e)
	}
	want := []kvxEntry{
		{"b", "b1", 2, jetstream.KeyValuePut},
		{"a", "a2", 3, jetstream.KeyValuePut},
		{"x.y", "xy1", 4, jetstream.KeyValuePut},
		{"gone", "", 6, jetstream.KeyValueDelete},
	}
	if !reflect.DeepEqual(initial, want) {
		t.Errorf("WatchAll initial values %+v, want %+v", initial, want)
	}
	kvxPut(t, kv, "c", "c1") // 7
	if e, _ := kvxNext(t, w); e != (kvxEntry{"c", "c1", 7, jetstream.KeyValuePut}) {
		t.Errorf("live update %+v", e)
	}
	if err := kv.Delete(tctx(t), "b"); err != nil { // 8
		t.Fatal(err)
	}
	if e, _ := kvxNext(t, w); e != (kvxEntry{"b", "", 8, jetstream.KeyValueDelete}) {
		t.Errorf("delete update %+v", e)
	}
	if err := kv.Purge(tctx(t), "a"); err != nil { // 9
		t.Fatal(err)
	}
	if e, _ := kvxNext(t, w); e != (kvxEntry{"a", "", 9, jetstream.KeyValuePurge}) {
		t.Errorf("purge update %+v", e)
	}

	// Watch one key, and a wildcard.
	wa, err := kv.Watch(tctx(t), "c")
	if err != nil {
		t.Fatal(err)
	}
	defer wa.Stop()
	if e, _ := kvxNext(t, wa); e != (kvxEntry{"c", "c1", 7, jetstream.KeyValuePut}) {
		t.Errorf("Watch(c) initial %+v", e)
	}
	if _, isNil := kvxNext(t, wa); !isNil {
		t.Errorf("Watch(c): no nil marker after the initial value")
	}
	wx, err := kv.Watch(tctx(t), "x.*")
	if err != nil {
		t.Fatal(err)
	}
	defer wx.Stop()
	if e, _ := kvxNext(t, wx); e != (kvxEntry{"x.y", "xy1", 4, jetstream.KeyValuePut}) {
		t.Errorf("Watch(x.*) initial %+v", e)
	}
	if _, isNil := kvxNext(t, wx); !isNil {
		t.Errorf("Watch(x.*): no nil marker")
	}
	kvxPut(t, kv, "x.z", "xz1") // 10
	kvxPut(t, kv, "c", "c2")    // 11
	if e, _ := kvxNext(t, wx); e != (kvxEntry{"x.z", "xz1", 10, jetstream.KeyValuePut}) {
		t.Errorf("Watch(x.*) update %+v", e)
	}
	if e, _ := kvxNext(t, wa); e != (kvxEntry{"c", "c2", 11, jetstream.KeyValuePut}) {
		t.Errorf("Watch(c) update %+v", e)
	}
	kvxNoUpdate(t, wx, 100*time.Millisecond)

	// A watch on keys that do not exist: nil at once.
	wn, err := kv.Watch(tctx(t), "nothing.>")
	if err != nil {
		t.Fatal(err)
	}
	defer wn.Stop()
	if _, isNil := kvxNext(t, wn); !isNil {
		t.Errorf("Watch of nothing: the first update is not nil")
	}

	// IncludeHistory: every revision; UpdatesOnly: only what comes next.
	wh, err := kv.Watch(tctx(t), "a", jetstream.IncludeHistory())
	if err != nil {
		t.Fatal(err)
	}
	defer wh.Stop()
	var hist []kvxEntry
	for {
		e, isNil := kvxNext(t, wh)
		if isNil {
			break
		}
		hist = append(hist, e)
	}
	// The purge (a rollup) removed a1 and a2.
	if !reflect.DeepEqual(hist, []kvxEntry{{"a", "", 9, jetstream.KeyValuePurge}}) {
		t.Errorf("IncludeHistory(a) = %+v", hist)
	}
	wu, err := kv.Watch(tctx(t), "b", jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer wu.Stop()
	kvxPut(t, kv, "b", "b2") // 12
	if e, isNil := kvxNext(t, wu); isNil || e != (kvxEntry{"b", "b2", 12, jetstream.KeyValuePut}) {
		t.Errorf("UpdatesOnly first update %+v (nil %v)", e, isNil)
	}
	// MetaOnly: no values.
	wm, err := kv.WatchAll(tctx(t), jetstream.MetaOnly(), jetstream.IgnoreDeletes())
	if err != nil {
		t.Fatal(err)
	}
	defer wm.Stop()
	var meta []kvxEntry
	for {
		e, isNil := kvxNext(t, wm)
		if isNil {
			break
		}
		meta = append(meta, e)
	}
	want = []kvxEntry{
		{"x.y", "", 4, jetstream.KeyValuePut},
		{"x.z", "", 10, jetstream.KeyValuePut},
		{"c", "", 11, jetstream.KeyValuePut},
		{"b", "", 12, jetstream.KeyValuePut},
	}
	if !reflect.DeepEqual(meta, want) {
		t.Errorf("MetaOnly/IgnoreDeletes initial %+v, want %+v", meta, want)
	}
	// Many keys: the nil marker comes after all of them.
	for i := 0; i < 200; i++ {
		kvxPut(t, kv, fmt.Sprintf("many.%03d", i), fmt.Sprint(i))
	}
	wb, err := kv.Watch(tctx(t), "many.>")
	if err != nil {
		t.Fatal(err)
	}
	defer wb.Stop()
	for i := 0; i < 200; i++ {
		e, isNil := kvxNext(t, wb)
		if isNil || e.Key != fmt.Sprintf("many.%03d", i) {
			t.Fatalf("many: update %d is %+v (nil %v)", i, e, isNil)
		}
	}
	if _, isNil := kvxNext(t, wb); !isNil {
		t.Errorf("many: no nil marker after 200 keys")
	}
}

func TestKVTTLAndLimits(t *testing.T) {
	t.Parallel()
	u := startJS(t)
	_, js := jsConnect(t, u)
	kv := kvxCreate(t, js, jetstream.KeyValueConfig{Bucket: "TTL", TTL: time.Second, MaxValueSize: 16})
	if cfg := cxStreamByName(t, js, "KV_TTL").CachedInfo().Config; cfg.MaxAge != time.Second || cfg.MaxMsgSize != 16 ||
		cfg.Duplicates != time.Second || cfg.MaxMsgsPerSubject != 1 {
		t.Errorf("TTL bucket stream config: %+v", cfg)
	}
	kvxPut(t, kv, "k", "v")
	if _, err := kv.Put(tctx(t), "big", bytes.Repeat([]byte("x"), 17)); err == nil {
		t.Errorf("Put of a value over max_value_size succeeded")
	} else {
		wantAPIError(t, err, 400, 10054, "message size exceeds maximum allowed")
	}
	st, err := kv.Status(tctx(t))
	if err != nil || st.TTL() != time.Second {
		t.Errorf("Status TTL: %v %v", st, err)
	}
	waitFor(t, 5*time.Second, "the value to expire", func() bool {
		_, err := kv.Get(tctx(t), "k")
		return errors.Is(err, jetstream.ErrKeyNotFound)
	})
}

// ---------------------------------------------------------------------------
// object store

func TestObjectStore(t *testing.T) {
	u := startJS(t)
	_, js := jsConnect(t, u)
	obs, err := js.CreateObjectStore(tctx(t), jetstream.ObjectStoreConfig{Bucket: "FILES", Description: "blobs"})
	if err != nil {
		t.Fatalf("CreateObjectStore: %v", err)
	}
	s := cxStreamByName(t, js, "OBJ_FILES")
	cfg := s.CachedInfo().Config
	if !reflect.DeepEqual(cfg.Subjects, []string{"$O.FILES.C.>", "$O.FILES.M.>"}) || !cfg.AllowRollup || !cfg.AllowDirect ||
		cfg.Discard != jetstream.DiscardNew {
		t.Errorf("object store stream config: %+v", cfg)
	}

	// A multi-chunk object: 1 MiB + 123 bytes in 128 KiB chunks.
	big := make([]byte, 1<<20+123)
	rand.New(rand.NewSource(1)).Read(big)
	sum := sha256.Sum256(big)
	digest := "SHA-256=" + base64.URLEncoding.EncodeToString(sum[:])
	info, err := obs.PutBytes(tctx(t), "dir/big.bin", big)
	if err != nil {
		t.Fatalf("PutBytes: %v", err)
	}
	if info.Name != "dir/big.bin" || info.Bucket != "FILES" || info.Size != uint64(len(big)) || info.Chunks != 9 ||
		info.Digest != digest || info.NUID == "" || info.Deleted {
		t.Errorf("put info: %+v", info)
	}
	// 9 chunks + 1 meta message.
	if n := streamInfo(t, s).State.Msgs; n != 10 {
		t.Errorf("stream holds %d messages, want 10", n)
	}
	got, err := obs.GetBytes(tctx(t), "dir/big.bin")
	if err != nil {
		t.Fatalf("GetBytes: %v", err)
	}
	if !bytes.Equal(got, big) {
		t.Errorf("GetBytes returned %d bytes, not what was put", len(got))
	}
	res, err := obs.Get(tctx(t), "dir/big.bin")
	if err != nil {
		t.Fatal(err)
	}
	streamed, err := io.ReadAll(res)
	res.Close()
	if err != nil || !bytes.Equal(streamed, big) {
		t.Errorf("Get stream: %d bytes, %v", len(streamed), err)
	}
	gi, err := obs.GetInfo(tctx(t), "dir/big.bin")
	if err != nil {
		t.Fatal(err)
	}
	if gi.NUID != info.NUID || gi.Size != info.Size || gi.Digest != digest || gi.ModTime.IsZero() {
		t.Errorf("GetInfo: %+v", gi)
	}

	// A small one, with metadata.
	if _, err := obs.Put(tctx(t), jetstream.ObjectMeta{Name: "small.txt", Description: "tiny", Metadata: map[string]string{"k": "v"}},
		bytes.NewReader([]byte("hello"))); err != nil {
		t.Fatal(err)
	}
	if s, err := obs.GetString(tctx(t), "small.txt"); err != nil || s != "hello" {
		t.Errorf("GetString: %q %v", s, err)
	}
	si, err := obs.GetInfo(tctx(t), "small.txt")
	if err != nil || si.Chunks != 1 || si.Size != 5 || si.Description != "tiny" || si.Metadata["k"] != "v" {
		t.Errorf("small info: %+v %v", si, err)
	}
	// An empty object.
	if ei, err := obs.PutBytes(tctx(t), "empty", nil); err != nil || ei.Size != 0 || ei.Chunks != 0 {
		t.Errorf("empty object: %+v %v", ei, err)
	}
	if b, err := obs.GetBytes(tctx(t), "empty"); err != nil || len(b) != 0 {
		t.Errorf("GetBytes(empty): %d bytes %v", len(b), err)
	}

	// List.
	list, err := obs.List(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range list {
		names = append(names, o.Name)
	}
	sort.Strings(names)
	if !reflect.DeepEqual(names, []string{"dir/big.bin", "empty", "small.txt"}) {
		t.Errorf("List = %v", names)
	}

	// Watch: current objects, nil, then changes.
	w, err := obs.Watch(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	next := func() *jetstream.ObjectInfo {
		t.Helper()
		select {
		case o := <-w.Updates():
			return o
		case <-time.After(cxWait):
			t.Fatal("no object watch update")
			return nil
		}
	}
	var initial []string
	for o := next(); o != nil; o = next() {
		initial = append(initial, o.Name)
	}
	if !reflect.DeepEqual(initial, []string{"dir/big.bin", "small.txt", "empty"}) {
		t.Errorf("object watch initial %v", initial)
	}

	// Overwrite: the old chunks are purged.
	if _, err := obs.PutString(tctx(t), "dir/big.bin", "now small"); err != nil {
		t.Fatal(err)
	}
	if o := next(); o == nil || o.Name != "dir/big.bin" || o.Size != 9 {
		t.Errorf("watch after overwrite: %+v", o)
	}
	// big (1 chunk + meta), small (1 + 1), empty (meta).
	cxWaitMsgs(t, s, 5)
	if s, err := obs.GetString(tctx(t), "dir/big.bin"); err != nil || s != "now small" {
		t.Errorf("after overwrite: %q %v", s, err)
	}

	// Delete: marked deleted, chunks purged.
	if err := obs.Delete(tctx(t), "small.txt"); err != nil {
		t.Fatal(err)
	}
	if o := next(); o == nil || o.Name != "small.txt" || !o.Deleted {
		t.Errorf("watch after delete: %+v", o)
	}
	if _, err := obs.GetInfo(tctx(t), "small.txt"); !errors.Is(err, jetstream.ErrObjectNotFound) {
		t.Errorf("GetInfo of a deleted object: %v, want ErrObjectNotFound", err)
	}
	if di, err := obs.GetInfo(tctx(t), "small.txt", jetstream.GetObjectInfoShowDeleted()); err != nil || !di.Deleted {
		t.Errorf("GetInfo with deleted: %+v %v", di, err)
	}
	if _, err := obs.GetBytes(tctx(t), "small.txt"); !errors.Is(err, jetstream.ErrObjectNotFound) {
		t.Errorf("GetBytes of a deleted object: %v", err)
	}
	cxWaitMsgs(t, s, 4)
	if _, err := obs.GetBytes(tctx(t), "never"); !errors.Is(err, jetstream.ErrObjectNotFound) {
		t.Errorf("GetBytes of a missing object: %v", err)
	}

	// Status, names, delete the store.
	st, err := obs.Status(tctx(t))
	if err != nil || st.Bucket() != "FILES" || st.Description() != "blobs" || st.Size() != streamInfo(t, s).State.Bytes || st.Sealed() {
		t.Errorf("Status: %v %v", st, err)
	}
	var stores []string
	nl := js.ObjectStoreNames(tctx(t))
	for n := range nl.Name() {
		stores = append(stores, n)
	}
	if !reflect.DeepEqual(stores, []string{"FILES"}) {
		t.Errorf("ObjectStoreNames = %v", stores)
	}
	if err := js.DeleteObjectStore(tctx(t), "FILES"); err != nil {
		t.Fatal(err)
	}
	if _, err := js.ObjectStore(tctx(t), "FILES"); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Errorf("ObjectStore after delete: %v", err)
	}
}
