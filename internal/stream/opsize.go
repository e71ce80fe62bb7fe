package stream

import "math/bits"

// Sizes of the byte form (AppendOp) of the operations that carry
// messages, computed without encoding them: a replicated stream's
// proposer keeps each operation within its log's largest entry
// (docs/cluster.md, "Entries larger than a frame") as it gathers
// publishes, stages an atomic batch or cuts a copy.

// EntrySize returns the bytes e takes in the byte form of a Publish or a
// Copy (appendEntry), a mirror's origin sequence not counted.
func EntrySize(e *Entry) int {
	n := lenSize(len(e.Subject)) + lenSize(len(e.Data)) + varintLen(e.Time) + 1 // the flags byte
	n += headerSize(e.Header)
	if e.MaxPayload > 0 {
		n += uvarintLen(uint64(e.MaxPayload))
	}
	return n
}

// PublishSize returns the bytes of the byte form of a Publish of n
// entries whose EntrySizes add up to entries: kind, version, count, and
// the entries.
func PublishSize(n, entries int) int {
	return 2 + uvarintLen(uint64(n)) + entries
}

// CopyEntrySize returns the bytes entry i of c takes in c's byte form:
// EntrySize, and a mirror's origin sequence.
func CopyEntrySize(c *Copy, i int) int {
	n := EntrySize(&c.Entries[i])
	if c.Mirror && i < len(c.OriginSeqs) {
		n += uvarintLen(c.OriginSeqs[i])
	}
	return n
}

// CopySize returns the bytes of the byte form of a Copy of n entries
// whose CopyEntrySizes add up to entries: a Publish's and the mirror
// flag.
func CopySize(n, entries int) int { return PublishSize(n, entries) + 1 }

// batchEntrySize returns the bytes e takes in the byte form of a
// BatchCommit (EncodeBatchCommit): subject, header, data.
func batchEntrySize(e *Entry) int {
	return lenSize(len(e.Subject)) + headerSize(e.Header) + lenSize(len(e.Data))
}

// batchCommitSize returns the bytes of the byte form of a BatchCommit of
// id at time t with maxPayload and n entries whose batchEntrySizes add
// up to entries.
func batchCommitSize(id string, t, maxPayload int64, n, entries int) int {
	return 2 + 1 + lenSize(len(id)) + varintLen(t) + uvarintLen(uint64(max(maxPayload, 0))) + uvarintLen(uint64(n)) + entries
}

// BatchCommitSize returns the bytes of c's byte form (AppendOp).
func BatchCommitSize(c *BatchCommit) int {
	entries := 0
	for i := range c.Entries {
		entries += batchEntrySize(&c.Entries[i])
	}
	return batchCommitSize(c.ID, c.Time, c.MaxPayload, len(c.Entries), entries)
}

// headerSize is the bytes of a header in an entry: 0 for none, else its
// length plus one, then the header.
func headerSize(h []byte) int {
	if h == nil {
		return 1
	}
	return uvarintLen(uint64(len(h))+1) + len(h)
}

// lenSize is the bytes of a length-prefixed field of n bytes (appendBytes).
func lenSize(n int) int { return uvarintLen(uint64(n)) + n }

// uvarintLen is the length of binary.AppendUvarint(nil, v).
func uvarintLen(v uint64) int { return (bits.Len64(v|1) + 6) / 7 }

// varintLen is the length of binary.AppendVarint(nil, v).
func varintLen(v int64) int {
	u := uint64(v) << 1
	if v < 0 {
		u = ^u
	}
	return uvarintLen(u)
}
