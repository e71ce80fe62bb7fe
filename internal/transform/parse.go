package transform

import (
	"math"
	"regexp"
	"strconv"
	"strings"
)

// kind is what a destination token does.
type kind uint8

const (
	kindLiteral kind = iota
	kindWildcard
	kindPartition
	kindSplitFromLeft
	kindSplitFromRight
	kindSliceFromLeft
	kindSliceFromRight
	kindSplit
	kindLeft
	kindRight
	kindRandom
)

// call is a destination token as written: its kind and its arguments.
type call struct {
	kind kind
	wild []int // wildcard indexes as written (from 1; 0 or less is the first token)
	n    int32 // partitions, position, size or ceiling
	sep  string
}

// function is one mapping function: the pattern that recognises it and
// the parser of its comma-separated arguments.
type function struct {
	re    *regexp.Regexp
	parse func(token string, args []string) (call, error)
}

// argSep separates a function's arguments.
var argSep = regexp.MustCompile(`,\s*`)

// functions are tried in this order on a token that looks like a function
// call; the first whose pattern occurs in the token wins (nats-server
// indexPlaceHolders). The patterns are not anchored, as in nats-server.
var functions = []function{
	{funcPattern("wildcard"), parseWildcard},
	{funcPattern("partition"), parsePartition},
	{funcPattern("split_from_left"), indexAndInt(kindSplitFromLeft)},
	{funcPattern("split_from_right"), indexAndInt(kindSplitFromRight)},
	{funcPattern("slice_from_left"), indexAndInt(kindSliceFromLeft)},
	{funcPattern("slice_from_right"), indexAndInt(kindSliceFromRight)},
	{funcPattern("right"), indexAndInt(kindRight)},
	{funcPattern("left"), indexAndInt(kindLeft)},
	{funcPattern("split"), parseSplit},
	{funcPattern("random"), parseRandom},
}

// funcPattern returns the pattern of a call of the function whose words
// are joined by '_' in name: "{{", the words run together with the first
// letter of each in either case, "(", the arguments, ")" and "}}", with
// optional whitespace around the name and before "}}".
func funcPattern(name string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString(`{{\s*`)
	for word := range strings.SplitSeq(name, "_") {
		first := word[:1]
		b.WriteString("[" + first + strings.ToUpper(first) + "]" + word[1:])
	}
	b.WriteString(`\s*\((.*)\)\s*}}`)
	return regexp.MustCompile(b.String())
}

// looksLikeCall reports whether token has the form {{...}}.
func looksLikeCall(token string) bool {
	n := len(token)
	return n > 4 && token[:2] == "{{" && token[n-2:] == "}}"
}

// isCall reports whether the pattern of some function occurs in token.
func isCall(token string) bool {
	for _, f := range functions {
		if f.re.MatchString(token) {
			return true
		}
	}
	return false
}

// parseToken reads one destination token.
func parseToken(token string) (call, error) {
	if len(token) > 1 && token[0] == '$' {
		i, err := strconv.Atoi(token[1:])
		if err != nil {
			return call{kind: kindLiteral}, nil // "$foo" is a literal token
		}
		return call{kind: kindWildcard, wild: []int{i}}, nil
	}
	if !looksLikeCall(token) {
		return call{kind: kindLiteral}, nil
	}
	for _, f := range functions {
		if m := f.re.FindStringSubmatch(token); m != nil {
			return f.parse(token, argSep.Split(m[1], -1))
		}
	}
	return call{}, destErr(token, ErrUnknownFunction)
}

// atoi reads an integer argument, ignoring spaces around it.
func atoi(s string) (int, error) {
	return strconv.Atoi(strings.Trim(s, " "))
}

// atoi32 reads an integer argument that may not exceed math.MaxInt32.
// Smaller values are truncated to 32 bits, as nats-server does.
func atoi32(token, s string) (int32, error) {
	n, err := atoi(s)
	if err != nil || n > math.MaxInt32 {
		return 0, destErr(token, ErrInvalidArg)
	}
	return int32(n), nil
}

func parseWildcard(token string, args []string) (call, error) {
	switch {
	case len(args) == 1 && args[0] == "":
		return call{}, destErr(token, ErrNotEnoughArgs)
	case len(args) > 1:
		return call{}, destErr(token, ErrTooManyArgs)
	}
	i, err := atoi(args[0])
	if err != nil {
		return call{}, destErr(token, ErrInvalidArg)
	}
	return call{kind: kindWildcard, wild: []int{i}}, nil
}

func parsePartition(token string, args []string) (call, error) {
	n, err := atoi32(token, args[0])
	if err != nil {
		return call{}, err
	}
	c := call{kind: kindPartition, n: n}
	for _, a := range args[1:] {
		i, err := atoi(a)
		if err != nil {
			return call{}, destErr(token, ErrInvalidArg)
		}
		c.wild = append(c.wild, i)
	}
	return c, nil
}

// indexAndInt returns the parser of a function whose arguments are a
// wildcard index and a 32-bit integer.
func indexAndInt(k kind) func(string, []string) (call, error) {
	return func(token string, args []string) (call, error) {
		switch {
		case len(args) < 2:
			return call{}, destErr(token, ErrNotEnoughArgs)
		case len(args) > 2:
			return call{}, destErr(token, ErrTooManyArgs)
		}
		i, err := atoi(args[0])
		if err != nil {
			return call{}, destErr(token, ErrInvalidArg)
		}
		n, err := strconv.ParseInt(strings.Trim(args[1], " "), 10, 32)
		if err != nil {
			return call{}, destErr(token, ErrInvalidArg)
		}
		return call{kind: k, wild: []int{i}, n: int32(n)}, nil
	}
}

func parseSplit(token string, args []string) (call, error) {
	switch {
	case len(args) < 2:
		return call{}, destErr(token, ErrNotEnoughArgs)
	case len(args) > 2:
		return call{}, destErr(token, ErrTooManyArgs)
	}
	i, err := atoi(args[0])
	if err != nil || strings.ContainsAny(args[1], " .") {
		return call{}, destErr(token, ErrInvalidArg)
	}
	return call{kind: kindSplit, wild: []int{i}, sep: args[1]}, nil
}

func parseRandom(token string, args []string) (call, error) {
	if len(args) != 1 {
		return call{}, destErr(token, ErrNotEnoughArgs)
	}
	n, err := atoi32(token, args[0])
	if err != nil {
		return call{}, err
	}
	return call{kind: kindRandom, n: n}, nil
}
