package transform

import (
	"errors"
	"fmt"
)

// The errors New and Validate return, with nats-server v2.15.2's texts
// (server/errors.go). ErrBadSubject comes alone; the others are wrapped in
// a *DestinationError naming the token. All but ErrBadSubject wrap
// ErrInvalidDestination, so errors.Is(err, ErrInvalidDestination) tells a
// destination problem from a bad source or destination subject.
var (
	// ErrBadSubject: the source or destination is not a subject, the
	// destination has a '*' token, or only one of them ends in ">".
	ErrBadSubject = errors.New("invalid subject")

	// ErrInvalidDestination is what every destination error wraps.
	ErrInvalidDestination = errors.New("invalid mapping destination")

	// ErrDestinationSubject: an empty token, a token after ">", or
	// whitespace in a token that is not a function (Validate only).
	ErrDestinationSubject = fmt.Errorf("%w: invalid transform", ErrInvalidDestination)

	// ErrUnknownFunction: a token of the form {{...}} that names no
	// mapping function.
	ErrUnknownFunction = fmt.Errorf("%w: unknown function", ErrInvalidDestination)

	// ErrIndexOutOfRange: a wildcard index above the number of '*' in the
	// source, or a function that needs a wildcard with a source that has
	// none.
	ErrIndexOutOfRange = fmt.Errorf("%w: wildcard index out of range", ErrInvalidDestination)

	// ErrNotEnoughArgs: a function with too few arguments (random with
	// any number other than one, too).
	ErrNotEnoughArgs = fmt.Errorf("%w: not enough arguments passed to the function", ErrInvalidDestination)

	// ErrInvalidArg: an argument that is not an integer (or too large),
	// or a split separator with a space or '.'.
	ErrInvalidArg = fmt.Errorf("%w: function argument is invalid or in the wrong format", ErrInvalidDestination)

	// ErrTooManyArgs: a function with too many arguments.
	ErrTooManyArgs = fmt.Errorf("%w: too many arguments passed to the function", ErrInvalidDestination)

	// ErrNotSupportedForImport: an import mapping (NewStrict) with a
	// function other than the wildcard one.
	ErrNotSupportedForImport = fmt.Errorf("%w: the only mapping function allowed for import transforms is {{Wildcard()}}", ErrInvalidDestination)

	// ErrNotUsingAllWildcards: an import mapping (NewStrict) that refers
	// to fewer wildcards than its source has.
	ErrNotUsingAllWildcards = fmt.Errorf("%w: not using all of the token wildcard(s)", ErrInvalidDestination)
)

// DestinationError is a destination error about one token (nats-server
// mappingDestinationErr). Its text is Err's followed by " in " and Token,
// or Err's alone when Token is empty. For a wildcard index out of range,
// Token is the token followed by ": [n]", n the index.
type DestinationError struct {
	Token string
	Err   error
}

// Error returns nats-server's text, for example
// "invalid mapping destination: unknown function in {{foo(1)}}".
func (e *DestinationError) Error() string {
	if e.Token == "" {
		return e.Err.Error()
	}
	return e.Err.Error() + " in " + e.Token
}

// Unwrap returns Err, one of the package's errors.
func (e *DestinationError) Unwrap() error { return e.Err }

func destErr(token string, err error) error {
	return &DestinationError{Token: token, Err: err}
}
