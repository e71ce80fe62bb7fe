package config

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Problem is one error or warning about a configuration file: where the
// offending key was written and what is wrong. Line is 1-based; Col is
// nats-server's parser's column, 0-based on the first line and 1-based on
// the others, as nats-server v2.15.2 prints it (docs/configuration.md,
// "Problems"). Line is 0 when the problem has no position (a syntax error,
// whose text names the line, or a check across several keys).
type Problem struct {
	File string
	Line int
	Col  int
	Msg  string
}

// Error formats the problem as nats-server does (server/errors.go
// configErr): "<file>:<line>:<col>: <msg>", or "<file>: <msg>" without a
// position.
func (p Problem) Error() string {
	switch {
	case p.Line > 0:
		return fmt.Sprintf("%s:%d:%d: %s", p.File, p.Line, p.Col, p.Msg)
	case p.File != "":
		return p.File + ": " + p.Msg
	}
	return p.Msg
}

// Error is returned by Load when a file cannot be used: every error found
// in it, in file order, and the warnings found beside them.
type Error struct {
	Errors   []Problem
	Warnings []Problem
}

// Error lists the warnings, then the errors, one per line, as nats-server
// prints a failed configuration (processConfigErr).
func (e *Error) Error() string {
	var b strings.Builder
	for i, p := range append(slices.Clip(e.Warnings), e.Errors...) {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p.Error())
	}
	return b.String()
}

// report collects the problems of one load.
type report struct {
	errs  []Problem
	warns []Problem
	// typeAt, when set, is where a type error is reported instead of at
	// the value: the top-level key of a block nats-server parses with no
	// panic handler of its own (jetstream), whose type assertion panics
	// reach the top level's (server/opts.go convertPanicToErrorList).
	typeAt *item
}

// errorf records an error at it's position.
func (r *report) errorf(it item, format string, args ...any) {
	r.errs = append(r.errs, it.problem(fmt.Sprintf(format, args...)))
}

// warnf records a warning at it's position.
func (r *report) warnf(it item, format string, args ...any) {
	r.warns = append(r.warns, it.problem(fmt.Sprintf(format, args...)))
}

// invalidUse records nats-server's warning for a value it accepts in an
// old form (server/errors.go configWarningErr).
func (r *report) invalidUse(it item, reason string) {
	r.warnf(it, "invalid use of field %q: %s", it.key, reason)
}

// ignored records the warning for a key cairn accepts and does not act
// on, because ignoring it changes nothing a client sees.
func (r *report) ignored(it item, why string) {
	r.warnf(it, "field %q is ignored: %s", it.key, why)
}

// sorted returns the problems in file order.
func sorted(ps []Problem) []Problem {
	slices.SortStableFunc(ps, func(a, b Problem) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line), cmp.Compare(a.Col, b.Col))
	})
	return ps
}
