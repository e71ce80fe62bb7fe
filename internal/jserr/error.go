package jserr

import (
	"errors"
	"fmt"
	"strings"
)

// ErrCode is a JetStream API error code, the err_code on the wire.
type ErrCode uint16

// Error is the JetStream API error object. Its fields, JSON keys and
// omitempty rules are those of nats-server's ApiError, so encoding/json
// produces the same bytes (including its \u003c, \u003e and \u0026
// escapes).
type Error struct {
	Code        int    `json:"code"`
	ErrCode     uint16 `json:"err_code,omitempty"`
	Description string `json:"description,omitempty"`
}

// entry is one catalog row.
type entry struct {
	code int    // HTTP-like code
	desc string // description template
}

// Arg fills one {name} marker of a description; make it with Sub.
type Arg struct {
	marker, value string
}

// Sub returns the Arg that replaces the marker {name} with value,
// formatted as by fmt.Sprint (an error gives its Error text).
func Sub(name string, value any) Arg {
	return Arg{marker: "{" + name + "}", value: fmt.Sprint(value)}
}

// New returns error c with the markers of its description replaced by
// args, in one pass, so that values are never themselves substituted. As in
// nats-server, a marker without an Arg stays as it is and an Arg without a
// marker is ignored. New panics if c is not in the catalog.
func New(c ErrCode, args ...Arg) *Error {
	e, ok := catalog[c]
	if !ok {
		panic(fmt.Sprintf("jserr: unknown error code %d", c))
	}
	desc := e.desc
	if len(args) > 0 {
		pairs := make([]string, 0, 2*len(args))
		for _, a := range args {
			pairs = append(pairs, a.marker, a.value)
		}
		desc = strings.NewReplacer(pairs...).Replace(desc)
	}
	return &Error{Code: e.code, ErrCode: uint16(c), Description: desc}
}

// From returns the *Error in err's chain if there is one, so that an API
// error made further down passes through unchanged, and otherwise
// New(c, Sub("err", err)). This is nats-server's Unless(err) option; c is
// normally a code whose description is "{err}", such as StreamCreate.
func From(err error, c ErrCode) *Error {
	if e, ok := errors.AsType[*Error](err); ok {
		return e
	}
	return New(c, Sub("err", err))
}

// Error returns the description followed by the err_code in parentheses.
func (e *Error) Error() string {
	return fmt.Sprintf("%s (%d)", e.Description, e.ErrCode)
}

// Is reports whether target is an *Error with the same err_code, whatever
// the substitutions in either description, so that
// errors.Is(err, jserr.New(jserr.StreamNotFound)) works. An Error without
// an err_code matches only an equal Error.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok || t == nil {
		return false
	}
	if e.ErrCode == 0 {
		return *e == *t
	}
	return e.ErrCode == t.ErrCode
}
