package transform

import (
	"strconv"
	"strings"
)

// Tokenize writes each '*' token of an import's "to" subject as the
// wildcard reference of its rank ("a.*.b.*" becomes "a.$1.b.$2"), the
// destination an import mapping compiles (nats-server v2.15.2
// transformTokenize).
func Tokenize(subject string) string {
	toks := strings.Split(subject, ".")
	n := 0
	for i, t := range toks {
		if t == "*" {
			n++
			toks[i] = "$" + strconv.Itoa(n)
		}
	}
	return strings.Join(toks, ".")
}

// NewStrict compiles a transform as New does, with the further rules of
// an import mapping, which must be reversible (nats-server v2.15.2
// NewSubjectTransformStrict): when src has wildcards, dest may use no
// function but the wildcard one (ErrNotSupportedForImport, naming the
// token) and must refer to at least as many wildcards as src has '*'
// tokens (ErrNotUsingAllWildcards, naming dest).
func NewStrict(src, dest string) (*Transform, error) {
	t, err := New(src, dest)
	if err != nil || dest == "" {
		return t, err
	}
	_, wildcards, srcTail, _ := tokens(t.src)
	if len(wildcards) == 0 && !srcTail {
		return t, nil
	}
	refs := 0
	for i, p := range t.parts {
		switch p.kind {
		case kindLiteral:
		case kindWildcard:
			refs += len(p.pos)
		default:
			return nil, destErr(strings.Split(dest, ".")[i], ErrNotSupportedForImport)
		}
	}
	if refs < len(wildcards) {
		return nil, destErr(dest, ErrNotUsingAllWildcards)
	}
	return t, nil
}
