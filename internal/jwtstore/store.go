// Package jwtstore is the directory of account JWTs of the nats-based
// account resolvers (resolver { type: full } and { type: cache };
// docs/security.md, "The nats-based resolvers"), laid out as nats-server
// v2.15.2 lays it out (server/dirstore.go, not sharded), so that a
// directory written by one server is read by the other:
//
//	<dir>/<account public key>.jwt          the account's JWT, the exact text pushed or fetched
//	<dir>/<account public key>.jwt.deleted  a JWT deleted with allow_delete (and not hard_delete)
//	<dir>/<account public key>.jwt.tmp      a write in progress (cairn's; removed at open)
//
// A .jwt file holds the JWT and nothing else (no newline, no checksum: the
// JWT's own Ed25519 signature covers its content, and every JWT read is
// decoded, signature checked, before the server uses it). Only files
// named after a valid public nkey are read. cairn writes each file as the
// durability contract says metadata is written (docs/durability.md):
// the new text to <key>.jwt.tmp, fsync, rename over <key>.jwt, fsync of
// the directory; nats-server writes in place.
//
// The store keeps an index of its JWTs: for each, the SHA-256 of its text,
// when it expires (the JWT's exp, or for a cache with a ttl the time it
// was last stored or read plus the ttl) and its place in a
// least-recently-used list. Hash is the XOR of the hashes of the indexed
// JWTs: two stores hold the same JWTs when their hashes are equal, which
// is how full resolvers find out that they differ (nats-server
// DirJWTStore.Hash). A Store is safe for concurrent use; it starts no
// goroutine and reads the clock only through Options.Now: Expire removes
// what expired up to a time its caller passes.
package jwtstore

import (
	"bytes"
	"container/list"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

// File name suffixes (the layout above).
const (
	jwtSuffix     = ".jwt"
	deletedSuffix = ".deleted"
	tmpSuffix     = ".tmp"
)

// Permissions of the directory and its files (nats-server
// defaultDirPerms, defaultFilePerms).
const (
	dirPerm  = 0o700
	filePerm = 0o600
)

// DeleteMode is what Delete does (nats-server deleteType).
type DeleteMode int

// Delete modes.
const (
	NoDelete      DeleteMode = iota // Delete refuses (ErrNoDelete)
	RenameDeleted                   // <key>.jwt becomes <key>.jwt.deleted
	HardDelete                      // <key>.jwt is removed
)

// Options configure a Store.
type Options struct {
	// Limit is the most JWTs kept, 0 for no limit.
	Limit int64
	// Evict: a store at its limit makes room by removing the JWT used
	// least recently (a cache); otherwise it refuses (ErrFull).
	Evict bool
	// TTL, when not zero, is how long a JWT is kept after it was last
	// stored or read, whatever its own expiry.
	TTL time.Duration
	// Delete is what Delete does.
	Delete DeleteMode
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Errors of the store; their texts are nats-server's where nats-server
// has one (they reach clients in the error descriptions of the
// $SYS.REQ.CLAIMS answers).
var (
	ErrInvalidKey = errors.New("invalid public key")
	ErrInvalidJWT = errors.New("invalid JWT")
	ErrFull       = errors.New("jwt store is full")
	ErrNoDelete   = errors.New("store is not set up to for delete")
	// ErrNotFound is wrapped by Load for a key without a JWT; it also
	// matches fs.ErrNotExist.
	ErrNotFound = fmt.Errorf("jwtstore: no such JWT: %w", fs.ErrNotExist)
)

// Store is one directory of account JWTs.
type Store struct {
	dir  string
	opts Options

	mu   sync.Mutex
	idx  map[string]*entry
	lru  *list.List // of *entry, least recently used first
	hash [sha256.Size]byte
}

// entry is one indexed JWT.
type entry struct {
	key     string
	hash    [sha256.Size]byte
	jwtExp  int64 // the JWT's exp (unix seconds), 0 when it has none
	expires int64 // when the store drops it (unix nanoseconds), 0 never
	elem    *list.Element
}

// Open opens (making it when missing) the directory and indexes the JWTs
// in it. It returns the file system's error when the directory cannot be
// made or read.
func Open(dir string, o Options) (*Store, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(abs, dirPerm); err != nil {
		return nil, err
	}
	names, err := os.ReadDir(abs)
	if err != nil {
		return nil, err
	}
	s := &Store{dir: abs, opts: o, idx: map[string]*entry{}, lru: list.New()}
	for _, de := range names {
		name := de.Name()
		if strings.HasSuffix(name, jwtSuffix+tmpSuffix) {
			_ = os.Remove(filepath.Join(abs, name)) // a write a crash interrupted
			continue
		}
		key, ok := strings.CutSuffix(name, jwtSuffix)
		if !ok || de.IsDir() || !nkeys.IsValidPublicKey(key) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(abs, name))
		if err != nil || len(data) == 0 {
			continue
		}
		s.track(key, string(data))
	}
	return s, nil
}

// Dir returns the directory's absolute path.
func (s *Store) Dir() string { return s.dir }

// path returns the file of key, or ErrInvalidKey when key is not a public
// nkey (so no name built from input leaves the directory: nats-server
// CVE-2022-28357).
func (s *Store) path(key string) (string, error) {
	if !nkeys.IsValidPublicKey(key) {
		return "", ErrInvalidKey
	}
	return filepath.Join(s.dir, key+jwtSuffix), nil
}

// Load returns the JWT of key; an error wrapping ErrNotFound (and
// fs.ErrNotExist) when there is none, ErrInvalidKey for a key that is
// not a public nkey. It counts as a use of the JWT (least recently used,
// ttl).
func (s *Store) Load(key string) (string, error) {
	p, err := s.path(key)
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return "", ErrNotFound
	} else if err != nil {
		return "", err
	}
	s.touchLocked(key)
	return string(data), nil
}

// Save stores token as key's JWT, whatever the one stored (a push:
// nats-server DirJWTStore.save). It reports whether the stored JWT
// changed; ErrInvalidKey, ErrInvalidJWT (empty), ErrFull or the file
// system's error.
func (s *Store) Save(key, token string) (bool, error) {
	p, err := s.path(key)
	if err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writeLocked(p, key, token)
}

// SaveIfNewer stores token as key's JWT unless the one stored has the
// same id or was issued later (a JWT from another server or a preload:
// nats-server DirJWTStore.saveIfNewer). It reports whether the stored
// JWT changed. Besides Save's errors it returns the decoding error of
// token, or an error when token's subject is not key.
func (s *Store) SaveIfNewer(key, token string) (bool, error) {
	p, err := s.path(key)
	if err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if existing, err := os.ReadFile(p); err == nil {
		nc, err := jwt.DecodeGeneric(token)
		if err != nil {
			return false, err
		}
		if old, err := jwt.DecodeGeneric(string(existing)); err == nil {
			switch {
			case old.ID == nc.ID, old.IssuedAt > nc.IssuedAt:
				return false, nil
			case nc.Subject != key:
				return false, errors.New("jwt subject nkey and provided nkey do not match")
			case old.Subject != nc.Subject:
				return false, errors.New("subject of existing and new jwt do not match")
			}
		}
	}
	return s.writeLocked(p, key, token)
}

// writeLocked writes token as key's JWT unless it is the one stored,
// making room first when the store is full and evicts.
func (s *Store) writeLocked(p, key, token string) (bool, error) {
	if token == "" {
		return false, ErrInvalidJWT
	}
	sum := sha256.Sum256([]byte(token))
	if e := s.idx[key]; e != nil {
		s.touchLocked(key)
		if e.hash == sum {
			return false, nil
		}
	} else if s.opts.Limit > 0 && int64(len(s.idx)) >= s.opts.Limit {
		if !s.opts.Evict {
			return false, ErrFull
		}
		oldest := s.lru.Front().Value.(*entry)
		if err := os.Remove(filepath.Join(s.dir, oldest.key+jwtSuffix)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return false, err
		}
		s.untrackLocked(oldest.key)
	}
	if err := writeFileSynced(s.dir, p, []byte(token)); err != nil {
		return false, err
	}
	s.track(key, token)
	return true, nil
}

// writeFileSynced replaces path with data: a temporary file, fsync,
// rename, fsync of the directory.
func writeFileSynced(dir, path string, data []byte) error {
	tmp := path + tmpSuffix
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, filePerm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// Delete removes key's JWT as the store's DeleteMode says (nats-server
// DirJWTStore.delete): ErrNoDelete when it may not; nil when there is no
// such JWT.
func (s *Store) Delete(key string) error {
	if s.opts.Delete == NoDelete {
		return ErrNoDelete
	}
	p, err := s.path(key)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.opts.Delete == RenameDeleted {
		err = os.Rename(p, p+deletedSuffix)
	} else {
		err = os.Remove(p)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	if d, err := os.Open(s.dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	s.untrackLocked(key)
	return nil
}

// Keys returns the keys of the JWTs indexed and not expired, sorted (the
// answer to $SYS.REQ.CLAIMS.LIST).
func (s *Store) Keys() []string {
	now := s.opts.Now().Unix()
	s.mu.Lock()
	out := make([]string, 0, len(s.idx))
	for k, e := range s.idx {
		if e.jwtExp == 0 || e.jwtExp >= now {
			out = append(out, k)
		}
	}
	s.mu.Unlock()
	sort.Strings(out)
	return out
}

// Pack calls emit with the JWTs indexed and not expired, max per call, as
// lines "<key>|<jwt>" joined by "\n" (nats-server PackWalk, the answer to
// $SYS.REQ.CLAIMS.PACK). It returns the file system's error.
func (s *Store) Pack(max int, emit func(pack string)) error {
	if max <= 0 || emit == nil {
		return errors.New("bad arguments to PackWalk")
	}
	var lines []string
	for _, k := range s.Keys() {
		data, err := os.ReadFile(filepath.Join(s.dir, k+jwtSuffix))
		if errors.Is(err, fs.ErrNotExist) || len(data) == 0 {
			continue // deleted since
		} else if err != nil {
			return err
		}
		lines = append(lines, k+"|"+string(data))
		if len(lines) == max {
			emit(strings.Join(lines, "\n"))
			lines = nil
		}
	}
	if lines != nil {
		emit(strings.Join(lines, "\n"))
	}
	return nil
}

// Merge stores the JWTs of a pack (Pack's lines) that are newer than the
// ones stored (SaveIfNewer) and returns the keys whose JWT changed. It
// stops at the first malformed line, key or JWT with an error (the keys
// changed before it are returned too).
func (s *Store) Merge(pack string) ([]string, error) {
	var changed []string
	for _, line := range strings.Split(pack, "\n") {
		if line == "" {
			continue
		}
		key, token, ok := strings.Cut(line, "|")
		if !ok || strings.Contains(token, "|") {
			return changed, fmt.Errorf("line in package didn't contain 2 entries: %q", line)
		}
		if !nkeys.IsValidPublicAccountKey(key) {
			return changed, errors.New("key to merge is not a valid public account key")
		}
		ok, err := s.SaveIfNewer(key, token)
		if err != nil {
			return changed, err
		}
		if ok {
			changed = append(changed, key)
		}
	}
	return changed, nil
}

// Hash returns the XOR of the SHA-256 of every indexed JWT.
func (s *Store) Hash() [sha256.Size]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hash
}

// HashEqual reports whether b is the store's Hash.
func (s *Store) HashEqual(b []byte) bool {
	h := s.Hash()
	return bytes.Equal(h[:], b)
}

// Len returns how many JWTs are indexed.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.idx)
}

// Expire removes the JWTs whose time is up at now: past their ttl, or
// without a ttl past their own expiry (nats-server's expiration
// tracker), and returns their keys.
func (s *Store) Expire(now time.Time) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var gone []string
	for k, e := range s.idx {
		if e.expires != 0 && e.expires <= now.UnixNano() {
			if err := os.Remove(filepath.Join(s.dir, k+jwtSuffix)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				continue
			}
			s.untrackLocked(k)
			gone = append(gone, k)
		}
	}
	sort.Strings(gone)
	return gone
}

// track indexes key's JWT (a new one, or a new text of one indexed).
// The lock is held (or the store is not shared yet).
func (s *Store) track(key, token string) {
	sum := sha256.Sum256([]byte(token))
	var jwtExp int64
	if g, err := jwt.DecodeGeneric(token); err == nil {
		jwtExp = g.Expires
	}
	e := s.idx[key]
	if e == nil {
		e = &entry{key: key}
		e.elem = s.lru.PushBack(e)
		s.idx[key] = e
	} else {
		xor(&s.hash, e.hash)
		s.lru.MoveToBack(e.elem)
	}
	e.hash, e.jwtExp = sum, jwtExp
	switch {
	case s.opts.TTL != 0:
		e.expires = s.opts.Now().Add(s.opts.TTL).UnixNano()
	case jwtExp != 0:
		e.expires = time.Unix(jwtExp, 0).UnixNano()
	default:
		e.expires = 0
	}
	xor(&s.hash, sum)
}

// touchLocked counts a use of key's JWT: it becomes the most recently
// used, and a ttl starts again.
func (s *Store) touchLocked(key string) {
	e := s.idx[key]
	if e == nil {
		return
	}
	s.lru.MoveToBack(e.elem)
	if s.opts.TTL != 0 {
		e.expires = s.opts.Now().Add(s.opts.TTL).UnixNano()
	}
}

func (s *Store) untrackLocked(key string) {
	if e := s.idx[key]; e != nil {
		xor(&s.hash, e.hash)
		s.lru.Remove(e.elem)
		delete(s.idx, key)
	}
}

func xor(dst *[sha256.Size]byte, v [sha256.Size]byte) {
	for i := range v {
		dst[i] ^= v[i]
	}
}
