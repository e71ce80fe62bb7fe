package vfs

import (
	"errors"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"syscall"
)

// Op names one FS or File operation, for FaultFS rules and counters.
type Op int

// The operations FaultFS counts and can fail.
const (
	OpCreate Op = iota
	OpOpen
	OpOpenAppend
	OpRemove
	OpRename
	OpMkdirAll
	OpReadDir
	OpSyncDir
	OpStat
	OpWrite
	OpReadAt
	OpSync
	OpTruncate
	OpSize
	OpClose
	numOps
)

var opNames = [numOps]string{
	"create", "open", "openappend", "remove", "rename", "mkdirall", "readdir",
	"syncdir", "stat", "write", "readat", "sync", "truncate", "size", "close",
}

// String returns the lower-case name of op, also used as the Op of the
// *os.PathError of an injected error.
func (op Op) String() string {
	if op < 0 || op >= numOps {
		return "unknown"
	}
	return opNames[op]
}

// Rule says which calls a FaultFS fails and how. A call matches when its op
// is Op and its name (for Rename, either name; for File methods, the name
// the file was opened with) contains Path and satisfies Match, if set.
// Among matching calls, the first After pass; from then on each fails with
// probability Prob (always, if Prob is 0), until Count have failed (no
// limit if Count is 0). So {After: k-1, Count: 1} fails exactly the k-th
// matching call.
type Rule struct {
	// Op is the operation the rule fails.
	Op Op
	// Path must be a substring of the name; "" matches every name.
	Path string
	// Match, if set, must also return true for the name. It is called
	// under the FaultFS lock, so it must not call the FaultFS.
	Match func(name string) bool
	// After is the number of matching calls let through first.
	After int
	// Count is the number of failures after which the rule stops firing;
	// 0 means no limit.
	Count int
	// Prob, in [0, 1], is the probability that an eligible call fails;
	// 0 means 1 (always).
	Prob float64
	// Rand draws for Prob and is required if Prob > 0. The FaultFS draws
	// from it under its lock, so it must not be used elsewhere meanwhile.
	Rand *rand.Rand
	// Err is the error inside the returned *os.PathError (*os.LinkError
	// for Rename), for example syscall.ENOSPC; nil means syscall.EIO.
	Err error
	// Short, for OpWrite only, makes the failing Write first write
	// min(Short, len(p)-1) bytes of p through to the inner file and
	// return that count with the error, like a write that fills the disk.
	Short int
}

// ruleState is an injected Rule and its counters.
type ruleState struct {
	Rule
	seen  int // matching calls so far
	fired int // failures so far
}

// FaultFS wraps an FS and fails the calls chosen by its rules; other calls
// go to the inner FS unchanged. A failed call does nothing on the inner FS
// (except the prefix of a Short write, and Close, which always closes the
// inner File), so a failed Sync leaves the data unsynced. It counts every call per Op. It is safe for concurrent use
// if the inner FS is.
type FaultFS struct {
	inner FS
	mu    struct {
		sync.Mutex
		rules    []*ruleState
		calls    [numOps]int // calls per op, since NewFaultFS
		injected [numOps]int // injected failures per op, since NewFaultFS
	}
}

// NewFaultFS returns a FaultFS over inner with no rules.
func NewFaultFS(inner FS) *FaultFS { return &FaultFS{inner: inner} }

// Inject adds r after the rules already injected. Rules are checked in that
// order for each call: every matching rule counts the call, and the first
// that fires decides the error. It panics on an invalid rule.
func (fs *FaultFS) Inject(r Rule) {
	validate(r)
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.mu.rules = append(fs.mu.rules, &ruleState{Rule: r})
}

func validate(r Rule) {
	switch {
	case r.Op < 0 || r.Op >= numOps:
		panic("vfs: Rule with an unknown Op")
	case r.Prob < 0 || r.Prob > 1:
		panic("vfs: Rule.Prob outside [0, 1]")
	case r.Prob > 0 && r.Rand == nil:
		panic("vfs: Rule.Prob without Rule.Rand")
	case r.After < 0 || r.Count < 0 || r.Short < 0:
		panic("vfs: Rule with a negative After, Count or Short")
	case r.Short > 0 && r.Op != OpWrite:
		panic("vfs: Rule.Short for an Op other than OpWrite")
	}
}

// Clear removes every rule. The counters keep counting.
func (fs *FaultFS) Clear() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.mu.rules = nil
}

// Calls returns how many calls of op the FaultFS has seen since
// NewFaultFS, failed ones included.
func (fs *FaultFS) Calls(op Op) int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.mu.calls[op]
}

// Injected returns how many calls of op the rules have failed since
// NewFaultFS.
func (fs *FaultFS) Injected(op Op) int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.mu.injected[op]
}

// fault counts a call and returns the rule that fails it, or nil.
func (fs *FaultFS) fault(op Op, names ...string) *Rule {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.mu.calls[op]++
	var fired *Rule
	for _, r := range fs.mu.rules {
		if !r.matches(op, names) {
			continue
		}
		r.seen++
		if fired == nil && r.fires() {
			r.fired++
			fired = &r.Rule
		}
	}
	if fired != nil {
		fs.mu.injected[op]++
	}
	return fired
}

func (r *ruleState) matches(op Op, names []string) bool {
	if r.Op != op {
		return false
	}
	for _, name := range names {
		if strings.Contains(name, r.Path) && (r.Match == nil || r.Match(name)) {
			return true
		}
	}
	return false
}

// fires reports whether the rule fails the call it just counted.
func (r *ruleState) fires() bool {
	if r.seen <= r.After || (r.Count > 0 && r.fired >= r.Count) {
		return false
	}
	return r.Prob == 0 || r.Rand.Float64() < r.Prob
}

// errno returns the error r injects, before wrapping.
func (r *Rule) errno() error {
	if r.Err == nil {
		return syscall.EIO
	}
	return r.Err
}

// err returns the error of r for a call of op on name.
func (r *Rule) err(op Op, name string) error {
	return &os.PathError{Op: op.String(), Path: name, Err: r.errno()}
}

// Create creates name on the inner FS unless a rule fails it.
func (fs *FaultFS) Create(name string) (File, error) {
	return fs.open(OpCreate, name, fs.inner.Create)
}

// Open opens name on the inner FS unless a rule fails it.
func (fs *FaultFS) Open(name string) (File, error) {
	return fs.open(OpOpen, name, fs.inner.Open)
}

// OpenAppend opens name on the inner FS unless a rule fails it.
func (fs *FaultFS) OpenAppend(name string) (File, error) {
	return fs.open(OpOpenAppend, name, fs.inner.OpenAppend)
}

// OpenInPlace opens name on the inner FS for writing in place, unless a
// rule of OpOpenAppend fails it; an error wrapping errors.ErrUnsupported
// when the inner FS cannot (InPlaceFS).
func (fs *FaultFS) OpenInPlace(name string) (InPlaceFile, error) {
	ip, ok := fs.inner.(InPlaceFS)
	if !ok {
		return nil, &os.PathError{Op: "open", Path: name, Err: errors.ErrUnsupported}
	}
	f, err := fs.open(OpOpenAppend, name, func(name string) (File, error) { return ip.OpenInPlace(name) })
	if err != nil {
		return nil, err
	}
	return f.(*faultFile), nil
}

func (fs *FaultFS) open(op Op, name string, open func(string) (File, error)) (File, error) {
	if r := fs.fault(op, name); r != nil {
		return nil, r.err(op, name)
	}
	f, err := open(name)
	if err != nil {
		return nil, err
	}
	return &faultFile{fs: fs, name: name, inner: f}, nil
}

// Remove removes name on the inner FS unless a rule fails it.
func (fs *FaultFS) Remove(name string) error {
	if r := fs.fault(OpRemove, name); r != nil {
		return r.err(OpRemove, name)
	}
	return fs.inner.Remove(name)
}

// Rename renames on the inner FS unless a rule fails it; the error is then
// an *os.LinkError.
func (fs *FaultFS) Rename(oldname, newname string) error {
	if r := fs.fault(OpRename, oldname, newname); r != nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: r.errno()}
	}
	return fs.inner.Rename(oldname, newname)
}

// MkdirAll creates dir on the inner FS unless a rule fails it.
func (fs *FaultFS) MkdirAll(dir string) error {
	if r := fs.fault(OpMkdirAll, dir); r != nil {
		return r.err(OpMkdirAll, dir)
	}
	return fs.inner.MkdirAll(dir)
}

// ReadDir lists dir on the inner FS unless a rule fails it.
func (fs *FaultFS) ReadDir(dir string) ([]string, error) {
	if r := fs.fault(OpReadDir, dir); r != nil {
		return nil, r.err(OpReadDir, dir)
	}
	return fs.inner.ReadDir(dir)
}

// SyncDir syncs dir on the inner FS unless a rule fails it.
func (fs *FaultFS) SyncDir(dir string) error {
	if r := fs.fault(OpSyncDir, dir); r != nil {
		return r.err(OpSyncDir, dir)
	}
	return fs.inner.SyncDir(dir)
}

// Stat stats name on the inner FS unless a rule fails it.
func (fs *FaultFS) Stat(name string) (int64, bool, error) {
	if r := fs.fault(OpStat, name); r != nil {
		return 0, false, r.err(OpStat, name)
	}
	return fs.inner.Stat(name)
}
