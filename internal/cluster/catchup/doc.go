// Package catchup moves a replicated stream's messages from a current
// replica to a replica catching up: the data out of band of a stream
// snapshot, whose Raft snapshot is only a manifest (docs/cluster.md,
// decision 8 and "Stream snapshots"). nats-server does the same over
// $JSC.CATCHUP.* subjects (v2.15.2 jetstream_cluster.go,
// runCatchup/processCatchupMsg: the follower asks the leader for a range
// and the leader streams the messages from its store with flow control);
// cairn keeps the idea and uses its own frames, internal to the cluster,
// on the Raft transport (internal/cluster/transport), which admits only
// the cluster's servers and carries their TLS.
//
// A Service runs on every server. As a source it serves the replicas
// registered with it (Register): a request names a group, a range of
// sequences and the sequences not wanted in it, and is answered by one
// chunk of the messages, read from the replica's store, or a refusal.
// As a fetcher (Fetch) it asks one source after another for what a
// replica lacks, keeping a few requests in flight, and hands the
// messages, verified, to a sink in sequence order. Sources keep no state
// between requests: a fetch that fails over to another source, or starts
// again after a crash, asks again from where its sink stopped.
//
// # Frames
//
// Catch-up frames go in the transport's frames, next to raftnode's; the
// receiver tells them apart by the first byte: raftnode's frames start
// with their version (1), catch-up frames with Magic (0x43, 'C').
// Integers are little endian; CRCs are CRC-32C (Castagnoli).
//
//	offset size field
//	 0      1   Magic 0x43
//	 1      1   version = 1
//	 2      1   kind: 1 request, 2 chunk, 3 refusal
//	 3      8   group, u64 (raftnode.GroupID)
//	11      8   fetch, u64: chosen at random by the fetcher for one Fetch;
//	            echoed by the source
//	19      8   request, u64: numbered by the fetcher; echoed
//	27      N   body, per kind
//	27+N    4   CRC-32C of bytes 0 .. 26+N
//
// Request body (fetcher to source):
//
//	first u64, last u64   the sequences asked for, first <= last
//	max u32               bytes of messages a chunk should not pass (a
//	                      chunk holds at least one message whatever its size)
//	n u32, then n x (from u64, to u64)
//	                      the gaps: sequences in first..last that are not
//	                      wanted (deleted at the snapshot's index), ascending,
//	                      disjoint, within first..last; n <= MaxGaps
//
// Chunk body (source to fetcher):
//
//	first u64             the request's first
//	through u64           the last sequence the chunk accounts for,
//	                      first-1 <= through <= the request's last: every
//	                      wanted sequence of first..through is in it
//	n u32, then n records:
//	  seq u64, time i64 (unix ns), subject length u16, header length u32,
//	  data length u32, subject, header, data,
//	  CRC-32C u32 of the record's bytes before it
//
// The records are the wanted sequences of first..through in order; the
// fetcher checks that, each record's CRC, and the frame's.
//
// Refusal body (source to fetcher):
//
//	code u8   1 the source holds no replica of the group, 2 a wanted
//	          sequence is not available (removed and its record gone, or
//	          past the replica's end), 3 busy (too many requests queued),
//	          4 a wanted sequence is damaged in the source's store, 5 a
//	          message too large for one frame
//	seq u64   the sequence refused (0 when none)
//	text      the rest of the body, for the log
//
// A frame whose CRC fails, or that does not decode, is dropped (the
// transport's connection is closed by ErrBadFrame, as for raftnode's);
// a fetch waiting for it times out and asks again or elsewhere.
//
// # Flow control
//
// A fetch keeps at most Window requests in flight to its source, each
// for at most Span sequences and at most MaxGaps gaps, each answered by a
// chunk of at most ChunkBytes of messages (a single larger message alone):
// the bytes in flight for one fetch are bounded by Window chunks, and a
// source holds one chunk at a time per worker. A chunk that ends before
// its request's last asks for the rest next. Requests queue at the source
// (MaxQueued); beyond, it refuses (busy) and the fetcher waits and asks
// again. A request unanswered for RequestTimeout fails the source: the
// fetch goes on with the next one, from the first sequence its sink has
// not taken. The transport's own queue bound (64 MiB per peer) is never
// approached by one fetch.
package catchup
