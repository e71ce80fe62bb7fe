// Package transform compiles subject mappings and maps subjects with them,
// as nats-server v2.15.2 does (server/subject_transform.go and
// server/sublist.go ValidateMapping). JetStream uses them for a stream's
// subject_transform (docs/protocol.md sections 3.1 and 4.1), for the
// subject_transforms of its sources and mirror (section 3.2) and for
// republish.
//
// A transform has a source, a subject filter that may hold wildcards ("" is
// ">"), and a destination, a subject whose tokens may be:
//
//   - a literal token, copied as is ("$foo" and other tokens starting with
//     '$' that are not '$' followed by a number are literal);
//   - "$n" or "{{wildcard(n)}}": the token the n-th '*' of the source
//     matched (n counts from 1);
//   - "{{partition(p)}}" or "{{partition(p,n,...)}}": the FNV-1a 32-bit
//     hash, modulo p, of the whole subject or of the tokens of the listed
//     wildcards concatenated without separator;
//   - "{{split(n,sep)}}": the token of wildcard n cut at every sep, empty
//     pieces dropped;
//   - "{{splitfromleft(n,i)}}", "{{splitfromright(n,i)}}": the token cut in
//     two, i bytes from its left or right end;
//   - "{{slicefromleft(n,i)}}", "{{slicefromright(n,i)}}": the token cut
//     into pieces of i bytes, counted from its left or right end;
//   - "{{left(n,i)}}", "{{right(n,i)}}": the first or last i bytes of the
//     token;
//   - "{{random(p)}}": a random number in [0, p);
//   - ">" as the last token, only when the source ends in ">" too: the
//     tokens the source's ">" matched.
//
// Function names are matched with the first letter of each word in either
// case ("Wildcard", "splitFromLeft") and may have spaces around them and
// their arguments. Functions other than partition and random need a source
// with at least one '*'. The texts of the errors are nats-server's, which
// JetStream sends in its 10146, 10154 and 10156 errors.
//
// Streams, sources, mirrors and republish all use the rules of New, which
// nats-server calls NewSubjectTransform. nats-server's "strict" rules
// (only wildcard functions, every wildcard used) exist for the reversible
// mappings of service imports, which cairn does not have.
//
// A Transform is immutable once made; Map is safe for concurrent use and
// allocates at most the mapped subject. The package is a leaf: it imports
// only the standard library.
package transform
