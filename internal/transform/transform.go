package transform

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Transform maps the subjects that match its source to its destination.
// Make one with New; the zero value is not usable. It is immutable and
// safe for concurrent use.
type Transform struct {
	src, dest string
	stoks     []string // source tokens
	all       bool     // source is ">": every subject matches
	any       bool     // source ">" and destination ">" or "": Map returns every subject as is
	keep      bool     // destination "": Map returns a matching subject as is
	constant  bool     // destination of literal tokens only: Map returns dest
	parts     []part   // destination tokens, without a final ">"
	tail      bool     // destination ends in ">"

	// A mapped subject has at most fixed + perSubject*len(subject) bytes.
	fixed, perSubject int
}

// part is one destination token, compiled.
type part struct {
	kind kind
	lit  string // kindLiteral: the token
	pos  []int  // zero-based positions of the source tokens it reads
	n    int32  // partitions, position, size or ceiling
	sep  string // kindSplit: the separator
}

// maxDigits is the length of the longest partition or random number.
const maxDigits = 10

// New compiles a transform from src (a subject filter, may be "" meaning
// ">") to dest (a mapping), with nats-server v2.15.2's rules
// (NewSubjectTransform): both must be subjects without empty tokens and
// with ">" only last, dest has no '*', and dest ends in ">" exactly when src
// does (else ErrBadSubject); each destination token must parse (a
// *DestinationError). New does not look for whitespace; Validate does.
//
// An empty dest, for which nats-server makes no transform, gives a
// transform that keeps every subject matching src as it is, which is what
// nats-server does with such a config (a stream stores the subject
// unchanged; a source only filters).
func New(src, dest string) (*Transform, error) {
	if src == "" {
		src = ">"
	}
	stoks, wildcards, srcTail, ok := tokens(src)
	if !ok {
		return nil, ErrBadSubject
	}
	t := &Transform{src: src, dest: dest, stoks: stoks, all: src == ">"}
	if dest == "" {
		t.keep, t.any = true, t.all
		return t, nil
	}
	dtoks, dwildcards, destTail, ok := tokens(dest)
	if !ok || len(dwildcards) > 0 || srcTail != destTail {
		return nil, ErrBadSubject
	}
	t.any = t.all && dest == ">"
	if err := t.compile(dtoks, wildcards, srcTail); err != nil {
		return nil, err
	}
	return t, nil
}

// tokens splits a subject into its tokens and returns the positions of
// its '*' tokens and whether it ends in ">". ok is false for an empty
// subject, an empty token or a token after ">" (nats-server subjectInfo,
// which does not look for whitespace).
func tokens(s string) (toks []string, wildcards []int, tail, ok bool) {
	if s == "" {
		return nil, nil, false, false
	}
	toks = strings.Split(s, ".")
	for i, tok := range toks {
		switch {
		case tok == "" || tail:
			return nil, nil, false, false
		case tok == ">":
			tail = true
		case tok == "*":
			wildcards = append(wildcards, i)
		}
	}
	return toks, wildcards, tail, true
}

// compile turns the destination tokens into parts. wildcards holds the
// positions of the source's '*' tokens; srcTail tells whether the source
// ends in ">". Without either, only literal tokens, partition (which then
// hashes the whole subject, whatever its arguments) and random are
// allowed.
func (t *Transform) compile(dtoks []string, wildcards []int, srcTail bool) error {
	wild := len(wildcards) > 0 || srcTail
	t.constant = true
	for _, tok := range dtoks {
		if tok == ">" {
			t.tail = true
			t.constant = false
			break
		}
		c, err := parseToken(tok)
		if err != nil {
			return err
		}
		p, err := resolve(tok, c, wild, wildcards)
		if err != nil {
			return err
		}
		t.constant = t.constant && p.kind == kindLiteral
		t.parts = append(t.parts, p)
	}
	t.bound()
	return nil
}

// resolve turns the wildcard numbers of c into source token positions.
// A number of 0 or less reads the subject's first token, as in
// nats-server.
func resolve(tok string, c call, wild bool, wildcards []int) (part, error) {
	p := part{kind: c.kind, n: c.n, sep: c.sep}
	switch {
	case c.kind == kindLiteral:
		p.lit = tok
		return p, nil
	case c.kind == kindRandom:
		return p, nil
	case !wild && c.kind == kindPartition:
		return p, nil
	case !wild:
		return part{}, destErr(tok, ErrIndexOutOfRange)
	}
	for _, w := range c.wild {
		if w > len(wildcards) {
			return part{}, destErr(fmt.Sprintf("%s: [%d]", tok, w), ErrIndexOutOfRange)
		}
		pos := 0
		if w >= 1 {
			pos = wildcards[w-1]
		}
		p.pos = append(p.pos, pos)
	}
	return p, nil
}

// bound sets fixed and perSubject, a bound on the size of a mapped
// subject, so that Map allocates its result once.
func (t *Transform) bound() {
	t.fixed = len(t.parts)
	if t.tail {
		t.perSubject++
	}
	for _, p := range t.parts {
		switch p.kind {
		case kindLiteral:
			t.fixed += len(p.lit)
		case kindPartition, kindRandom:
			t.fixed += maxDigits
		case kindWildcard, kindLeft, kindRight:
			t.perSubject++
		default: // the functions that add separators
			t.perSubject += 2
		}
	}
}

// Map returns the subject mapped by t, and false when subject does not
// match t's source; it then returns subject itself, so that
// "s, _ = t.Map(s)" maps what matches and keeps the rest, as a stream does
// (nats-server processJetStreamMsg). A subject with an empty or wildcard
// token matches nothing, except that a transform from ">" to ">" or ""
// returns every subject as it is (nats-server subjectTransform.Match).
//
// The result is the destination with each token replaced as the package
// documentation describes. It may have empty tokens: split and
// nats-server do not drop every empty piece (splitting "--a" at "-" gives
// ".a"). A destination with random gives a different result from call to
// call; every other transform is a pure function of subject.
func (t *Transform) Map(subject string) (string, bool) {
	if t.any {
		return subject, true
	}
	var buf [32]string
	toks, ok := t.match(subject, buf[:0])
	switch {
	case !ok:
		return subject, false
	case t.keep:
		return subject, true
	case t.constant:
		return t.dest, true
	}
	return t.build(subject, toks), true
}

// match splits subject into toks (appending to toks) and reports whether
// it is a literal subject that t's source matches.
func (t *Transform) match(subject string, toks []string) ([]string, bool) {
	for {
		tok, rest, more := strings.Cut(subject, ".")
		if tok == "" || tok == "*" || tok == ">" {
			return toks, false
		}
		toks = append(toks, tok)
		if !more {
			break
		}
		subject = rest
	}
	return toks, t.all || matchTokens(toks, t.stoks)
}

// matchTokens reports whether the literal tokens toks match the filter
// tokens stoks. As in nats-server (isSubsetMatchTokenized), a filter token
// that starts with '*', such as "*x", matches any token, though only "*"
// counts as a wildcard for "$n".
func matchTokens(toks, stoks []string) bool {
	for i, st := range stoks {
		switch {
		case st == ">":
			return len(toks) > i
		case i >= len(toks):
			return false
		case st[0] != '*' && st != toks[i]:
			return false
		}
	}
	return len(toks) == len(stoks)
}

// build writes the mapped subject of subject, whose tokens are toks.
func (t *Transform) build(subject string, toks []string) string {
	var b strings.Builder
	b.Grow(t.fixed + t.perSubject*len(subject))
	for i := range t.parts {
		if i > 0 {
			b.WriteByte('.')
		}
		t.parts[i].write(&b, subject, toks)
	}
	if t.tail {
		if len(t.parts) > 0 {
			b.WriteByte('.')
		}
		for i, tok := range toks[len(t.stoks)-1:] {
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(tok)
		}
	}
	return b.String()
}

// write writes the token p makes from subject and its tokens toks.
func (p *part) write(b *strings.Builder, subject string, toks []string) {
	switch p.kind {
	case kindLiteral:
		b.WriteString(p.lit)
	case kindPartition:
		writeNumber(b, p.partition(subject, toks))
	case kindRandom:
		writeNumber(b, random(p.n))
	case kindWildcard:
		b.WriteString(toks[p.pos[0]])
	default:
		p.cut(b, toks[p.pos[0]])
	}
}

// cut writes what the functions that take one source token make of tok.
// Sizes and positions outside (0, len(tok)) leave tok whole.
func (p *part) cut(b *strings.Builder, tok string) {
	n := int(p.n)
	if p.kind == kindSplit {
		writeSplit(b, tok, p.sep)
		return
	}
	if n <= 0 || n >= len(tok) {
		b.WriteString(tok)
		return
	}
	switch p.kind {
	case kindSplitFromLeft:
		writeTwo(b, tok, n)
	case kindSplitFromRight:
		writeTwo(b, tok, len(tok)-n)
	case kindSliceFromLeft:
		writeSlices(b, tok, n, 0)
	case kindSliceFromRight:
		writeSlices(b, tok, n, len(tok)%n)
	case kindLeft:
		b.WriteString(tok[:n])
	case kindRight:
		b.WriteString(tok[len(tok)-n:])
	}
}

// writeTwo writes tok cut in two at byte i.
func writeTwo(b *strings.Builder, tok string, i int) {
	b.WriteString(tok[:i])
	b.WriteByte('.')
	b.WriteString(tok[i:])
}

// writeSlices writes tok cut into pieces of size bytes, the first piece
// being first bytes long when first > 0.
func writeSlices(b *strings.Builder, tok string, size, first int) {
	if first > 0 {
		b.WriteString(tok[:first])
		b.WriteByte('.')
		tok = tok[first:]
	}
	for len(tok) > size {
		b.WriteString(tok[:size])
		b.WriteByte('.')
		tok = tok[size:]
	}
	b.WriteString(tok)
}

// writeSplit writes the pieces of tok between the occurrences of sep (or
// its UTF-8 sequences when sep is empty, as strings.Split does), with the
// rule of nats-server: empty pieces are dropped, and a '.' goes before
// every non-empty piece except the first piece, and except the second
// when the first is empty.
func writeSplit(b *strings.Builder, tok, sep string) {
	firstEmpty := false
	for k := 0; ; k++ {
		piece, rest, more := nextPiece(tok, sep)
		if k == 0 {
			firstEmpty = piece == ""
		}
		if piece != "" {
			if k > 1 || k == 1 && !firstEmpty {
				b.WriteByte('.')
			}
			b.WriteString(piece)
		}
		if !more {
			return
		}
		tok = rest
	}
}

// nextPiece returns the first piece of s and what follows its separator.
func nextPiece(s, sep string) (piece, rest string, more bool) {
	if sep == "" {
		_, n := utf8.DecodeRuneInString(s)
		return s[:n], s[n:], n < len(s)
	}
	return strings.Cut(s, sep)
}

// partition returns the partition of subject: the FNV-1a 32-bit hash of
// the tokens at p.pos concatenated without separator, or of the whole
// subject when p.pos is empty, modulo the partition count taken as an
// unsigned 32-bit number (nats-server getHashPartition; 0 partitions give
// 0).
func (p *part) partition(subject string, toks []string) uint64 {
	if p.n == 0 {
		return 0
	}
	h := fnvOffset
	if len(p.pos) == 0 {
		h = fnv1a(h, subject)
	}
	for _, i := range p.pos {
		h = fnv1a(h, toks[i])
	}
	return uint64(h % uint32(p.n))
}

// The FNV-1a 32-bit parameters (hash/fnv New32a).
const (
	fnvOffset uint32 = 2166136261
	fnvPrime  uint32 = 16777619
)

// fnv1a continues the FNV-1a 32-bit hash h over s.
func fnv1a(h uint32, s string) uint32 {
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= fnvPrime
	}
	return h
}

// random returns a random number in [0, |ceiling|), or 0 when ceiling is
// 0 (nats-server getRandomPartition).
func random(ceiling int32) uint64 {
	if ceiling == 0 {
		return 0
	}
	return uint64(int(rand.Int32()) % int(ceiling))
}

// writeNumber writes n in decimal.
func writeNumber(b *strings.Builder, n uint64) {
	var buf [maxDigits]byte
	b.Write(strconv.AppendUint(buf[:0], n, 10))
}
