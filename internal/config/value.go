package config

import (
	"math"
	"sort"
	"strconv"
	"time"
)

// token is what nats-server's parser (conf, pedantic mode) wraps each value
// in: the value and where its key was written. The type is unexported in
// conf; its methods are not (nats-server's server/opts.go reads them
// through the same interface).
type token interface {
	Value() any
	Line() int
	Position() int
	SourceFile() string
	IsUsedVariable() bool
}

// item is one key and its value, unwrapped from its token.
type item struct {
	key     string // the key as written
	val     any    // string, int64, float64, bool, time.Time, []any or map[string]any; elements stay wrapped
	file    string
	line    int
	col     int
	usedVar bool // the key is a variable some value refers to
}

// unwrap turns a parsed value into an item; a value that is not a token
// (none are, in pedantic mode) takes the position of parent.
func unwrap(key string, v any, parent item) item {
	tk, ok := v.(token)
	if !ok {
		return item{key: key, val: v, file: parent.file, line: parent.line, col: parent.col}
	}
	// conf's columns count from 0 on the first line and from 1 on the
	// others (its lexer measures from the previous newline); they are
	// reported as they are, as nats-server reports them.
	return item{key: key, val: tk.Value(), file: tk.SourceFile(), line: tk.Line(), col: tk.Position(), usedVar: tk.IsUsedVariable()}
}

func (it item) problem(msg string) Problem {
	return Problem{File: it.file, Line: it.line, Col: it.col, Msg: msg}
}

// typeError is nats-server's text for a value of the wrong type: its
// option parser asserts the type and reports the runtime's panic message
// (server/opts.go convertPanicToErrorList).
func (r *report) typeError(it item, want string) {
	if at := r.typeAt; at != nil {
		it.file, it.line, it.col = at.file, at.line, at.col
	}
	r.errorf(it, "interface conversion: interface {} is %T, not %s", it.val, want)
}

func (r *report) int64Of(it item) (int64, bool) {
	n, ok := it.val.(int64)
	if !ok {
		r.typeError(it, "int64")
	}
	return n, ok
}

// intOf reads an integer that must fit an int32 (the limits nats-server
// keeps as int32), with nats-server's "value is too big" text, and that
// must not be negative.
func (r *report) intOf(it item) (int, bool) {
	n, ok := r.int64Of(it)
	switch {
	case !ok:
		return 0, false
	case n > 1<<31-1:
		r.errorf(it, "%s value is too big", it.key)
		return 0, false
	case n < 0:
		r.errorf(it, "%s value can not be negative", it.key)
		return 0, false
	}
	return int(n), true
}

func (r *report) stringOf(it item) (string, bool) {
	s, ok := it.val.(string)
	if !ok {
		r.typeError(it, "string")
	}
	return s, ok
}

func (r *report) boolOf(it item) (bool, bool) {
	b, ok := it.val.(bool)
	if !ok {
		r.typeError(it, "bool")
	}
	return b, ok
}

// mapOf returns a block's entries; what to call the block in the error is
// nats-server's per-block text ("Expected map to define cluster, got %T").
func (r *report) mapOf(it item, what string) (map[string]any, bool) {
	m, ok := it.val.(map[string]any)
	if !ok {
		r.errorf(it, "Expected map to define %s, got %T", what, it.val)
	}
	return m, ok
}

// durationOf reads a duration as nats-server's parseDuration does: a
// string for time.ParseDuration ("2m", "250ms"), or for backward
// compatibility an integer number of seconds, with a warning.
func (r *report) durationOf(it item) (time.Duration, bool) {
	switch v := it.val.(type) {
	case string:
		d, err := time.ParseDuration(v)
		if err != nil {
			r.errorf(it, "error parsing %s: %v", it.key, err)
			return 0, false
		}
		return d, true
	case int64:
		r.invalidUse(it, it.key+" should be converted to a duration")
		return time.Duration(v) * time.Second, true
	}
	r.typeError(it, "int64")
	return 0, false
}

// storageSizeOf reads a JetStream storage size as nats-server's
// getStorageSize does: an integer (with the parser's size suffixes, "10Gi"),
// or a string of digits and one of K, M, G, T (powers of 1024, upper case
// only); "" is 0. Errors are prefixed with name, as nats-server prefixes
// them ("max_mem_store must be int64 or string").
func (r *report) storageSizeOf(it item, name string) (int64, bool) {
	switch v := it.val.(type) {
	case int64:
		return v, true
	case string:
		if v == "" {
			return 0, true
		}
		n, err := strconv.ParseInt(v[:len(v)-1], 10, 64)
		if err != nil {
			r.errorf(it, "%s %v", name, err)
			return 0, false
		}
		shift, ok := map[byte]uint{'K': 10, 'M': 20, 'G': 30, 'T': 40}[v[len(v)-1]]
		if !ok {
			r.errorf(it, "%s sizes defined as strings must end in K, M, G, T", name)
			return 0, false
		}
		if n < 0 || n > math.MaxInt64>>shift {
			r.errorf(it, "%s %q is out of range", name, v)
			return 0, false
		}
		return n << shift, true
	}
	r.errorf(it, "%s must be int64 or string", name)
	return 0, false
}

// entries returns a block's items in key order, so that problems and
// duplicate checks do not depend on map order.
func entries(m map[string]any, parent item) []item {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]item, len(keys))
	for i, k := range keys {
		out[i] = unwrap(k, m[k], parent)
	}
	return out
}
