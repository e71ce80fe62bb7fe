package jwtstore

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func account(t *testing.T) (nkeys.KeyPair, string) {
	t.Helper()
	kp, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	return kp, pub
}

// accountJWT issues an account JWT for pub, issued at iat (unix
// seconds; 0: now), signed by op. The jwt package's Encode stamps the
// current time, so the JWT is assembled here to choose it.
func accountJWT(t *testing.T, op nkeys.KeyPair, pub string, iat int64, mod func(*jwt.AccountClaims)) string {
	t.Helper()
	ac := jwt.NewAccountClaims(pub)
	if mod != nil {
		mod(ac)
	}
	tok, err := ac.Encode(op)
	if err != nil {
		t.Fatal(err)
	}
	if iat == 0 {
		return tok
	}
	parts := strings.Split(tok, ".")
	body, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	m["iat"] = iat
	m["jti"] = fmt.Sprintf("%s-%d", pub, iat)
	body, _ = json.Marshal(m)
	signing := parts[0] + "." + base64.RawURLEncoding.EncodeToString(body)
	sig, err := op.Sign([]byte(signing))
	if err != nil {
		t.Fatal(err)
	}
	return signing + "." + base64.RawURLEncoding.EncodeToString(sig)
}

func operator(t *testing.T) nkeys.KeyPair {
	kp, err := nkeys.CreateOperator()
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

// The directory holds one <key>.jwt per account, the JWT's text exactly,
// read back by Open; the index's hash is the XOR of the JWTs' hashes.
func TestSaveLoadReopen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "jwt")
	op := operator(t)
	_, a := account(t)
	_, b := account(t)
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ja, jb := accountJWT(t, op, a, 0, nil), accountJWT(t, op, b, 0, nil)
	for _, kv := range [][2]string{{a, ja}, {b, jb}} {
		if ok, err := s.Save(kv[0], kv[1]); !ok || err != nil {
			t.Fatalf("save: %v %v", ok, err)
		}
	}
	if ok, err := s.Save(a, ja); ok || err != nil {
		t.Fatalf("same JWT again: %v %v", ok, err)
	}
	data, err := os.ReadFile(filepath.Join(dir, a+".jwt"))
	if err != nil || string(data) != ja {
		t.Fatalf("file: %q %v", data, err)
	}
	if got, err := s.Load(b); err != nil || got != jb {
		t.Fatalf("load: %v", err)
	}
	if _, err := s.Load("AXXX"); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("bad key: %v", err)
	}
	_, c := account(t)
	if _, err := s.Load(c); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing: %v", err)
	}
	if _, err := s.Save("../../etc/x", ja); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("path from input: %v", err)
	}
	want := []string{a, b}
	sort.Strings(want)
	if got := s.Keys(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("keys %v", got)
	}
	h := s.Hash()
	// A crash mid-write leaves a .tmp, which Open removes.
	if err := os.WriteFile(filepath.Join(dir, c+".jwt.tmp"), []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s2.Hash() != h || s2.Len() != 2 {
		t.Fatalf("reopened: %x %d", s2.Hash(), s2.Len())
	}
	if _, err := os.Stat(filepath.Join(dir, c+".jwt.tmp")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("tmp kept: %v", err)
	}
	if err := s2.Delete(a); !errors.Is(err, ErrNoDelete) {
		t.Fatalf("delete without allow_delete: %v", err)
	}
}

// SaveIfNewer keeps a JWT issued later, and refuses a JWT of another
// subject (nats-server saveIfNewer).
func TestSaveIfNewer(t *testing.T) {
	op := operator(t)
	_, a := account(t)
	_, b := account(t)
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	mid := accountJWT(t, op, a, 2000, nil)
	if ok, err := s.SaveIfNewer(a, mid); !ok || err != nil {
		t.Fatalf("first: %v %v", ok, err)
	}
	if ok, err := s.SaveIfNewer(a, mid); ok || err != nil {
		t.Fatalf("same id: %v %v", ok, err)
	}
	if ok, err := s.SaveIfNewer(a, accountJWT(t, op, a, 1000, nil)); ok || err != nil {
		t.Fatalf("older: %v %v", ok, err)
	}
	if _, err := s.SaveIfNewer(a, accountJWT(t, op, b, 3000, nil)); err == nil || err.Error() != "jwt subject nkey and provided nkey do not match" {
		t.Fatalf("other subject: %v", err)
	}
	newer := accountJWT(t, op, a, 3000, nil)
	if ok, err := s.SaveIfNewer(a, newer); !ok || err != nil {
		t.Fatalf("newer: %v %v", ok, err)
	}
	if got, _ := s.Load(a); got != newer {
		t.Fatal("newer not stored")
	}
}

// A store with a limit refuses one JWT more (full) or evicts the least
// recently used (cache); a ttl drops JWTs not used within it; a deleted
// JWT is renamed or removed.
func TestLimitEvictTTLDelete(t *testing.T) {
	op := operator(t)
	var keys []string
	var toks []string
	for range 3 {
		_, k := account(t)
		keys = append(keys, k)
		toks = append(toks, accountJWT(t, op, k, 0, nil))
	}
	full, _ := Open(t.TempDir(), Options{Limit: 2})
	full.Save(keys[0], toks[0])
	full.Save(keys[1], toks[1])
	if _, err := full.Save(keys[2], toks[2]); !errors.Is(err, ErrFull) || err.Error() != "jwt store is full" {
		t.Fatalf("full: %v", err)
	}
	clk := &clock{t: time.Unix(1000, 0)}
	dir := t.TempDir()
	cache, _ := Open(dir, Options{Limit: 2, Evict: true, TTL: time.Minute, Now: clk.now, Delete: HardDelete})
	cache.Save(keys[0], toks[0])
	cache.Save(keys[1], toks[1])
	if _, err := cache.Load(keys[0]); err != nil { // keys[1] is now the least recently used
		t.Fatal(err)
	}
	if ok, err := cache.Save(keys[2], toks[2]); !ok || err != nil {
		t.Fatalf("evict: %v %v", ok, err)
	}
	if _, err := cache.Load(keys[1]); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("evicted one still there: %v", err)
	}
	clk.t = clk.t.Add(30 * time.Second)
	cache.Load(keys[2])
	clk.t = clk.t.Add(45 * time.Second)
	if gone := cache.Expire(clk.t); len(gone) != 1 || gone[0] != keys[0] {
		t.Fatalf("expired %v, want %s", gone, keys[0])
	}
	if err := cache.Delete(keys[2]); err != nil {
		t.Fatal(err)
	}
	if es, _ := os.ReadDir(dir); len(es) != 0 {
		t.Fatalf("hard delete left %v", es)
	}
	ren, _ := Open(t.TempDir(), Options{Delete: RenameDeleted})
	ren.Save(keys[0], toks[0])
	if err := ren.Delete(keys[0]); err != nil {
		t.Fatal(err)
	}
	if err := ren.Delete(keys[0]); err != nil {
		t.Fatalf("again: %v", err)
	}
	if _, err := os.Stat(filepath.Join(ren.Dir(), keys[0]+".jwt.deleted")); err != nil || ren.Len() != 0 {
		t.Fatalf("renamed: %v %d", err, ren.Len())
	}
	// A JWT's own expiry removes it without a ttl, and lists skip it.
	exp := jwt.NewAccountClaims(keys[1])
	exp.Expires = time.Now().Add(-time.Hour).Unix()
	etok, _ := exp.Encode(op)
	ren.Save(keys[1], etok)
	if k := ren.Keys(); len(k) != 0 {
		t.Fatalf("expired listed: %v", k)
	}
	if gone := ren.Expire(time.Now()); len(gone) != 1 {
		t.Fatalf("expire %v", gone)
	}
}

// Pack and Merge carry the JWTs from one store to another, which then
// has the same hash.
func TestPackMerge(t *testing.T) {
	op := operator(t)
	a, _ := Open(t.TempDir(), Options{})
	for range 5 {
		_, k := account(t)
		a.Save(k, accountJWT(t, op, k, 0, nil))
	}
	b, _ := Open(t.TempDir(), Options{})
	var packs []string
	if err := a.Pack(2, func(p string) { packs = append(packs, p) }); err != nil || len(packs) != 3 {
		t.Fatalf("packs %d %v", len(packs), err)
	}
	n := 0
	for _, p := range packs {
		ch, err := b.Merge(p)
		if err != nil {
			t.Fatal(err)
		}
		n += len(ch)
	}
	if n != 5 || a.Hash() != b.Hash() || !hashEqual(a, b) {
		t.Fatalf("merged %d", n)
	}
	if _, err := b.Merge("nokey"); err == nil {
		t.Fatal("malformed line merged")
	}
	if _, err := b.Merge("../x|eyJ"); err == nil || err.Error() != "key to merge is not a valid public account key" {
		t.Fatalf("bad key: %v", err)
	}
}

func hashEqual(a, b *Store) bool {
	h := a.Hash()
	return b.HashEqual(h[:])
}

// A pack from another server is input: whatever it holds, Merge neither
// panics nor writes a file that is not <valid account key>.jwt.
func FuzzMerge(f *testing.F) {
	f.Add("ABC|eyJ\n")
	f.Add("../../x|y")
	f.Add("|\n|\n")
	f.Fuzz(func(t *testing.T, pack string) {
		dir := t.TempDir()
		s, err := Open(dir, Options{Limit: 3, Evict: true})
		if err != nil {
			t.Fatal(err)
		}
		_, _ = s.Merge(pack)
		es, _ := os.ReadDir(dir)
		for _, e := range es {
			key, ok := strings.CutSuffix(e.Name(), ".jwt")
			if !ok || !nkeys.IsValidPublicAccountKey(key) {
				t.Fatalf("wrote %q", e.Name())
			}
		}
	})
}
