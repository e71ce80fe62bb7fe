package subject

import "strings"

// Match reports whether the published subject literal is matched by the
// subscription pattern (docs/protocol.md section 1.7). Tokens of literal are
// compared byte-wise as literal tokens, so a "*" or ">" token in it matches
// only a wildcard in pattern; in pattern "*" matches exactly one token and a
// final ">" matches one or more tokens ("foo.>" does not match "foo").
//
// Match returns false when literal has an empty token, or when pattern has
// an empty token or a ">" token that is not last. It does not look for
// whitespace: patterns are checked with ValidSubject when they are stored,
// and the protocol parser never yields a published subject containing any.
// It does not allocate. The semantics are those of nats-server v2.15.2
// (server/sublist.go matchLevel and matchLiteral).
func Match(literal, pattern string) bool {
	for {
		pt, prest, pmore := strings.Cut(pattern, ".")
		var lrest string
		var lmore, ok bool
		switch pt {
		case "":
			return false
		case ">":
			return !pmore && noEmptyToken(literal)
		case "*":
			var lt string
			lt, lrest, lmore = strings.Cut(literal, ".")
			ok = lt != ""
		default:
			lrest, lmore, ok = cutToken(literal, pt)
		}
		if !ok || lmore != pmore || !pmore {
			return ok && lmore == pmore
		}
		literal, pattern = lrest, prest
	}
}

// cutToken reports whether the first token of s is tok and returns what
// follows it, like strings.Cut, without searching s for the separator.
func cutToken(s, tok string) (rest string, more, ok bool) {
	if !strings.HasPrefix(s, tok) {
		return "", false, false
	}
	rest = s[len(tok):]
	if rest == "" {
		return "", false, true
	}
	if rest[0] != '.' {
		return "", false, false
	}
	return rest[1:], true, true
}

// noEmptyToken reports whether s is non-empty and every '.'-separated token
// of s is non-empty.
func noEmptyToken(s string) bool {
	return s != "" && s[0] != '.' && s[len(s)-1] != '.' && !strings.Contains(s, "..")
}

// SubsetOf reports whether every subject matched by the pattern sub is also
// matched by the pattern super, for example SubsetOf("foo.*", "foo.>") and
// SubsetOf("a.b", "*.b") are true, SubsetOf("foo.>", "foo.*") is false. A
// pattern is a subset of itself. It returns false when either argument is
// not a ValidSubject. JetStream uses it to check that a consumer filter lies
// within a stream's subjects (nats-server v2.15.2 server/sublist.go
// SubjectMatchesFilter / isSubsetMatchTokenized).
func SubsetOf(sub, super string) bool {
	if !ValidSubject(sub) || !ValidSubject(super) {
		return false
	}
	for {
		st, srest, smore := strings.Cut(sub, ".")
		pt, prest, pmore := strings.Cut(super, ".")
		switch {
		case pt == ">":
			return true
		case st == ">", pt != "*" && pt != st:
			return false
		case !smore || !pmore:
			return smore == pmore
		}
		sub, super = srest, prest
	}
}

// Overlap reports whether at least one published subject is matched by both
// patterns a and b, for example Overlap("foo.*", "*.bar") is true and
// Overlap("foo.>", "foo") is false. The relation is symmetric. It returns
// false when either argument is not a ValidSubject. JetStream uses it to
// reject streams with overlapping subjects (nats-server v2.15.2
// server/sublist.go SubjectsCollide).
func Overlap(a, b string) bool {
	if !ValidSubject(a) || !ValidSubject(b) {
		return false
	}
	for {
		at, arest, amore := strings.Cut(a, ".")
		bt, brest, bmore := strings.Cut(b, ".")
		switch {
		case at == ">" || bt == ">":
			return true
		case at != "*" && bt != "*" && at != bt:
			return false
		case !amore || !bmore:
			return amore == bmore
		}
		a, b = arest, brest
	}
}
