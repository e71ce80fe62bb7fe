// Package filestore is the durable engine of store.Store: an append-only,
// segmented log of checksummed records, written with group commit, and a
// recovery that verifies every record it reads on open (a sealed segment
// with a valid index file is not read: its records are verified when
// loaded). A PubAck built on it means the message is fsynced (the default
// SyncAlways policy), and corrupt data is detected and never served
// (docs/durability.md).
//
// Every file operation goes through vfs.FS, so tests run the same code on
// a crash-simulating or error-injecting file system.
//
// # Directory layout
//
//	<Dir>/meta                       store metadata (see "Metadata file")
//	<Dir>/checkpoint                 how far the log was durable (see
//	                                 "Checkpoint file")
//	<Dir>/checkpoint.new             a checkpoint being replaced (ignored)
//	<Dir>/msgs/<base>.blk            segments; <base> is the first sequence
//	                                 the segment may hold, 20 decimal digits,
//	                                 zero padded (00000000000000000001.blk)
//	<Dir>/msgs/<base>.idx            the index of a sealed segment (see
//	                                 "Index file"); optional
//	<Dir>/consumers/<name>/state     one consumer's state (one of two copies)
//	<Dir>/consumers/<name>/state.1   the other copy
//	<Dir>/consumers/<name>/*.new     a copy being written (ignored on read)
//	<Dir>/consumers/<name>/state.damaged[.<n>] a damaged copy, kept aside
//	<Dir>/consumers/.new-<name>/     a consumer being created (ignored on read)
//	<Dir>/acks/<gen>.log             the ack journal, one file per generation;
//	                                 <gen> is 20 decimal digits, zero padded
//	<Dir>/msgs/<base>.blk.rolledback[.<n>]
//	                                 a segment a rollback set aside until
//	                                 the next saved position (see
//	                                 "Positions and rollback")
//	<Dir>/msgs/<base>.blk.from-<offset>.rolledback[.<n>]
//	                                 the bytes a rollback cut from the end of
//	                                 a segment, from <offset> on
//
// Files other than these are left alone: recovery never deletes what it
// does not understand.
//
// # Byte order and sizes
//
// Every integer is little endian. Sizes, all part of the format:
//
//	SegmentHeaderSize = 48   bytes of the segment header
//	RecordOverhead    = 32   bytes of a record that are not subject,
//	                         header or payload (28 before, 4 of CRC after)
//	MaxSubjectLen     = 65535 bytes (the field is a u16)
//	MaxRecordSize     = 128 MiB (a larger message is refused with
//	                   store.ErrMaxMsgSize)
//
// A segment never exceeds 4 GiB (record offsets are u32); a new segment
// is started once the active one would pass Config.BlockSize, so a record
// larger than BlockSize sits alone in its segment.
//
// Every CRC is CRC-32C (Castagnoli, hash/crc32).
//
// # Segment file
//
// A segment starts with its header, followed by records back to back up to
// the end of the file; there is no padding and no trailer.
//
//	offset size field
//	 0      8   magic "CAIRNSEG"
//	 8      4   version, u32: 1, or 2 when the segment may hold records
//	            with a compressed payload (see "Compression")
//	12      4   header size, u32 = 48
//	16      8   base: the first sequence this segment may hold; equal to
//	            the number in the file name
//	24      8   low water when the segment was made: every sequence below
//	            it had been removed (0 in a new store without FirstSeq)
//	32      8   last time (i64 unix ns) of the store when the segment was
//	            made: State.LastTime survives the removal of the message
//	40      4   reserved, 0
//	44      4   CRC-32C of bytes 0..43
//
// # Record
//
//	offset size field
//	 0      4   L, u32: the length of the whole record, these 4 bytes and
//	            the CRC included; 32 <= L <= MaxRecordSize
//	 4      1   type (below)
//	 5      1   flags: 0, or flagS2 = 0x01 on a message record whose
//	            payload is S2-compressed (see "Compression"); a record
//	            with any other flag bit is invalid
//	 6      2   S, u16: subject length
//	 8      8   seq, u64 (meaning per type)
//	16      8   time, i64 unix nanoseconds (messages; 0 otherwise)
//	24      4   H, u32: header length
//	28      S   subject
//	28+S    H   header (the raw NATS header block)
//	28+S+H  D   payload, D = L - 32 - S - H, as stored (compressed
//	            when flagS2 is set)
//	L-4     4   CRC-32C
//
// The CRC covers, in this order, 16 bytes that are not stored: the
// segment's base (u64) and the record's offset in the file (u64); then
// bytes 0 .. L-5 of the record: the length, so a torn or flipped length is
// caught; every field; subject, header and payload as they are on disk
// (the compressed bytes of a compressed payload). Binding the CRC to its
// place means a record is valid only where it was written: a stale chunk,
// a misdirected write or a record-shaped payload elsewhere never passes.
// A record is valid when L fits in the file, the type is known, flags is
// 0 (or flagS2 on a message record), S+H <= L-32, the CRC matches, and,
// with flagS2, the payload's decoded length P (below) is readable and the
// record it decodes to fits: 32+S+H+P <= MaxRecordSize.
//
// Record types (append only; the values are on disk):
//
//	1 message   seq is the message's sequence; time, subject, header and
//	            payload are the message. Within a segment, message
//	            sequences strictly increase, are at least base, and are
//	            below the next segment's base.
//	2 delete    seq was removed (a tombstone). No subject, header, payload.
//	3 compact   every sequence below seq has been removed (the low water);
//	            LastSeq is at least seq-1 (a compact past the end raises
//	            it). Written for removals at the front of the stream:
//	            limits, expiry, Compact, purges, and before front segments
//	            are removed; and, when the low water is above 0, in the
//	            first batch written to each new segment and after each
//	            Open, so that the low water never rests on a segment
//	            header alone (a damaged header loses nothing).
//	4 syncmark  seq = D: the first D bytes of this file had been fsynced
//	            when this record was written. The flusher ends the bytes
//	            of every batch it writes to the active segment with one.
//	5 skip      seq = S, the sequence the next message gets; payload D = 8
//	            bytes, F (u64): the sequences F .. S-1 were never stored
//	            (Store.SkipTo of a mirror). No subject or header; valid
//	            only with 1 <= F < S. LastSeq is at least S-1. Written to
//	            the active segment when messages or lost sequences remain
//	            below F (an empty store raises the low water instead). A
//	            message S may follow in the same segment or start a new
//	            one; F .. S-1 have no record of their own.
//
// # Compression
//
// With store.Config.Compress (a stream's compression "s2", docs/protocol.md
// section 3.1) the payload of a message record may be stored as one S2
// block (github.com/klauspost/compress/s2, s2.Encode's block format: a
// uvarint decoded length P, then the compressed stream), marked by
// flagS2. Subject and header are never compressed, so recovery, subject
// filters, NumPending and the TTL index never decode anything. Rules:
//
//   - A payload is compressed only when it pays: payloads below 64 bytes
//     are never tried, and the compressed form is kept only when it is at
//     least 1/16 smaller. An incompressible or small message is stored
//     exactly as without compression.
//   - Compressed records are written only to segments whose header says
//     version 2; a segment started while Compress is on gets version 2.
//     Turning Compress on (UpdateConfig) therefore takes effect from the
//     next segment, and turning it off at once; records of both kinds stay
//     readable in every segment. nats-server v2.15.2 likewise compresses
//     only blocks created under the new setting.
//   - A build that predates compression fails Open on a version-2 header
//     (unsupported format version) rather than take compressed records for
//     damaged ones. Version-1 segments are unchanged, so such a build still
//     reads a store that never had Compress on.
//   - The CRC covers the compressed bytes, so damage is caught before
//     anything is decoded: a flipped bit is a failed record (lost, never
//     served), never garbage from the decoder. Before decoding, P is
//     checked against MaxRecordSize (P is bounded by the record the
//     message would be uncompressed, which Append limits), so hostile bytes
//     cannot make the decoder allocate more. A record whose CRC matches
//     but whose block does not decode to P bytes is reported corrupt like
//     any damaged record.
//   - Everything a client sees is unchanged: loads return the original
//     payload, and State.Bytes and MaxBytes count store.MsgSize of the
//     uncompressed message, as nats-server's state.bytes does for a
//     compressed stream. The index keeps the uncompressed record length
//     of a compressed message (4 bytes per slot, only in segments holding
//     one) so that Bytes needs no read.
//
// # Index file
//
// What recovery needs of each record of a sealed segment, without its
// payload, so that a segment of large messages is opened without being
// read (before, a restart read every byte of every stream: 4 s for 750 MB
// of 128 KiB object chunks). Written by the flusher's writer once the
// segment is sealed and fsynced (it collects the entries as it writes the
// records), and by Open for a sealed segment it read in full and found
// undamaged; never fsynced, never changed after. Only when it pays: at
// most 1/16 of the segment and 128 KiB (a segment of small messages has
// none; reading it costs about as much). Version 1 (formatVersion):
//
//	offset size field
//	 0      8   magic "CAIRNIDX"
//	 8      4   version, u32 = 1
//	12      4   N, u32: the entries
//	16      8   the segment file's size, u64
//	24     48   the segment's header, byte for byte
//	72      4   the segment's last 4 bytes (its last record's CRC)
//	76      …   N entries, back to back
//	end-4   4   CRC-32C of every byte before
//
// Entry, one per record but syncmarks, in file order:
//
//	offset size field
//	 0      4   the record's offset in the segment, u32
//	 4      4   for a message, its record length uncompressed (L, or
//	            32+S+H+P with flagS2); 0 otherwise
//	 8      …   the record's bytes 0 .. 27+S+H (length, type, flags, S,
//	            seq, time, H, subject, header), and a skip record's 8
//	            payload bytes
//
// Open uses the index of a segment that is not the last when the index
// file's CRC, magic, version and base hold, its entries are well formed
// (known types, offsets increasing within the segment's size), and the
// segment file's size, header and last 4 bytes are the ones it records:
// a file truncated, rewritten after a rollback or of other content is
// read in full instead. The index is then the segment's records for
// every recovery rule below; the segment's records themselves are
// verified when loaded (every Load and scan checks the record's CRC,
// bound to base and offset, and its sequence against the index), so a
// payload damaged in a sealed segment is found when first read rather
// than at open: the load fails with a *store.CorruptError and the
// sequence is reported lost from then on, as a record damaged after the
// open always was. It is still never served. Until read, such a message
// counts in Msgs and Bytes. The last segment is always read in full.
//
// An index goes with its segment: removed before the segment file
// (Writing, rule 5), the truncated segment's removed by a rollback, and
// an index without its segment (a removal or rollback cut short) removed
// by Open. A build before index files leaves them alone (logging each as
// an unknown file) and reads every segment, as always.
//
// # Metadata file
//
//	offset size field
//	 0      8   magic "CAIRNSTR"
//	 8      4   version, u32 = 1
//	12      4   reserved, 0
//	16      8   the FirstSeq the store was created with
//	24      4   reserved, 0
//	28      4   CRC-32C of bytes 0..27
//
// It marks the directory as a store: a meta file with no segment beside it
// means the messages were lost, and Open fails with store.ErrCorrupt
// rather than start an empty stream. It is written once, at creation, by
// write-new, fsync, rename, fsync-directory.
//
// # Checkpoint file
//
// A record, outside the segments, of how far the log was durable, so
// that a lost end of the log is reported lost instead of being numbered
// again (below, Recovery rule 4). A header, then 16-byte records, back to
// back:
//
//	offset size field
//	 0      8   magic "CAIRNCKP"
//	 8      4   version, u32 = 1
//	12      4   CRC-32C of bytes 0..11
//	16+16k      record k:
//	 +0     8   seq, u64: every sequence through seq had been assigned
//	            and was durable (fsynced) when the record was written
//	 +8     4   reserved, 0
//	 +12    4   CRC-32C of the record's offset in the file (u64), then
//	            bytes +0..+11
//
// The file's value is the largest seq of a valid record. A record that
// fails its CRC (torn by a power loss) is skipped, and so is a damaged
// header: each record is true on its own. A valid header of another
// version fails Open. Writing:
//
//   - Creating a store writes the file (one record: LastSeq) before the
//     metadata file, whose directory fsync covers its entry.
//   - After each fsync of the segments, the syncer appends a record of the
//     LastSeq the synced batches were taken at, before any of them is
//     acknowledged, and without fsync: no fsync is added to a publish.
//     Not after a failed fsync (the store is fenced): a batch that wrote
//     nothing then synced nothing.
//   - Once the file passes 64 KiB (4096 records), the syncer replaces it
//     with a file of one record: write-new, fsync, rename. The directory
//     is not fsynced: after a power loss either file may be found, and
//     both hold only true records.
//   - Open replaces it with one record of the recovered LastSeq, unless it
//     is clean (valid header and records, nothing else), already says
//     LastSeq and is under 64 KiB: a clean shutdown's, kept as it is.
//   - Close fsyncs it after the last batch.
//
// The window. The file says at most what was durable, so it never makes a
// power loss report something lost. It says at least what was
// acknowledged (under SyncAlways) after a clean shutdown (Close fsyncs
// it) and after a crash of the process, kill -9 included (its records are
// written before the acknowledgements, and the kernel keeps them). After
// a power loss or a crash of the operating system, it may be as old as
// its last fsync: the last replacement (at most 4096 group commits ago),
// Open or Close, or the kernel's own writeback. Sequences acknowledged
// since then can be assigned again only if the durable end of the last
// segment is lost as well: a second fault (a disk that loses fsynced
// data, a file cut by hand after the power loss), since a power loss
// alone keeps every fsynced record. An fsync of the file at each group
// commit would close that window at the price of doubling the fsyncs of
// the publish path. Under SyncEveryInterval (jetstream's opt-in
// ack_before_sync_interval), acknowledged is not durable:
// what a crash loses of the last interval is not in the file either, and
// its sequences are assigned again.
//
// # Positions and rollback
//
// A replica of a replicated stream applies committed log entries to its
// store without waiting for the store's fsync (the log holds them), and
// must be able to return, after a crash, to a point it recorded together
// with the log index its store reflected there (docs/cluster.md,
// "Checkpoints"). Position gives that point; opening with
// Config.RollbackTo returns to it.
//
// A position is the end of the record log when it was taken: the base of
// the segment that was active, the size in bytes of that segment, and
// LastSeq. Position makes everything appended before it durable first
// (one flusher batch, fsynced; the batch ends with its syncmark), so the
// bytes below it are the store's whole state then. Its encoding
// (AppendPosition, DecodePosition; 25 bytes, integers little endian, no
// CRC of its own: the file that keeps it has one):
//
//	offset size field
//	 0      1   version = 1
//	 1      8   base of the segment, u64
//	 9      8   offset in it, u64: the segment's size at the position,
//	            at least SegmentHeaderSize
//	17      8   LastSeq, u64, at the position
//
// Opening with RollbackTo = P (which needs Config.RollbackMode), before
// recovery:
//
//  1. The segment of base P.base must exist, P.offset must not exceed its
//     size, and P.offset must be the end of its header or of a valid
//     record (scanned as recovery scans); else Open fails with
//     ErrBadPosition and nothing is touched. The caller fences the
//     replica (a replica is replaced, never repaired in place).
//  2. The bytes of that segment from P.offset on are copied to
//     <base>.blk.from-<offset>.rolledback (written, fsynced), every
//     segment of a higher base is renamed to <name>.rolledback, highest
//     first, the msgs directory is fsynced, and only then is the segment
//     truncated at P.offset and fsynced. Nothing is deleted yet: what was
//     cut is set aside (one log line says how much). An Open cut short by
//     a crash repeats the steps with the same P (a second copy of a tail
//     gets the next free suffix .<n>).
//  3. Recovery runs as usual, with P.LastSeq in place of the checkpoint
//     file's value (which may name sequences appended after P): the store
//     is what it was at P, LastSeq included, and it replaces the
//     checkpoint file. If the segments hold a sequence past P.LastSeq,
//     Open fails with ErrBadPosition, and what was set aside stays.
//  4. The store verified at P, the files earlier rollbacks set aside are
//     removed (they lay after positions at or before P: superseded), and
//     those of this rollback are removed by the first PositionSaved of a
//     position taken after it: the caller (a replica, whose log holds the
//     entries after P and applies them again) has then made its state
//     durable past them for good. So set-aside files never outlive the
//     replica's next checkpoint, nor pile up over repeated crashes.
//
// Rollback mode (Config.RollbackMode) keeps what a rollback needs: the
// segments that exist at a position. Segments are never written in place
// below their end, so only the removal of front segments (Writing, rule
// 5) could take one away: in rollback mode a segment emptied after the
// newest position the caller reported saved (PositionSaved) stays on
// disk, even once the record that covers its removal is durable, until a
// position taken after its removal is saved. A rollback to a saved
// position then finds every segment it needs: segments emptied before it
// are below its low water (recovery completes their removal), the others
// are still there. Recovery's own removals count as done before the
// position a rollback returns to; an Open without RollbackTo in rollback
// mode keeps them until the first PositionSaved.
//
// Everything else a rollback must undo lies after P in the log and is cut
// with it: messages, delete, compact and skip records, the compact
// record Open writes, and segments started after P (their headers carry
// the low water then). The checkpoint file is taken care of by rule 3,
// consumer state files and the ack journal are not the stream's and are
// left alone.
//
// # Deferred fsync
//
// With Config.DeferSync (rollback mode and SyncAlways only: a replica's
// store, internal/cluster/streamckpt) the writer writes each batch as
// under SyncAlways, but the syncer keeps the batches written, without
// their data, and fsyncs them (one fsync, then the checkpoint file and
// the batches published in order, as a group commit) only when:
//
//   - someone waits for a batch to be durable: Position, and Append's
//     throttle when too many sealed segments wait (waitGen records the
//     batch it waits for; the syncer fsyncs once the batches it holds
//     reach it);
//   - deferMaxBatches batches are held (segments emptied meanwhile are
//     removed only once a batch after them is durable);
//   - the store closes.
//
// The writer still fsyncs a segment before it writes to a newer one.
// WaitDurable waits only for the write (as WaitWritten), DurableSeq is
// the written sequence, and removals return without waiting. A crash,
// a power loss included, may lose what was written after the last
// Position; the caller returns the store to a Position it saved
// (RollbackTo) and applies its own log's entries after it again, which
// hold everything it applied: a replica applies an entry only after a
// majority of its group's WALs fsynced it.
//
// # Consumer state file
//
// Two copies, state and state.1; Update writes the one that does not hold
// the newest state, so a damaged copy leaves the other, one save older.
//
//	offset size field
//	 0      8   magic "CAIRNCSM"
//	 8      4   version, u32 = 2, or 3 with a dead-letter section (1: no
//	            generation field; still read)
//	12      4   N, u32: body length
//	16      N   body
//	16+N    4   CRC-32C of bytes 0 .. 15+N
//
// Body: (versions 2 and 3) the copy's generation, u64, one more at each Update;
// delivered consumer and stream sequences, ack floor consumer and
// stream sequences (4 x u64); u32 count of pending entries, each stream
// sequence, consumer sequence (u64) and timestamp (i64), ascending by
// stream sequence; u32 count of redelivered entries, each stream sequence
// and count (u64), ascending. Version 3 adds the dead-letter section
// (store.ConsumerState.DeadLetter): a u32 count (at least 1), then each
// entry, ascending: stream sequence (u64: a pending entry's, or a
// redelivered entry's without a pending entry, a message out of
// deliveries), After (u64) and reason (u8: 1 max_deliver, 2 term). A
// state without dead-letter marks is written as version 2, which a build
// without them reads; messages out of deliveries alone (redelivered
// entries without pending entries) need no version 3.
// Update writes <copy>.new, fsyncs it, renames
// it over the copy and fsyncs the directory; a consumer directory is made
// under .new-<name> with its first (empty) state and renamed into place,
// so a state copy exists in every consumer directory. State reads both
// and uses the valid one with the higher generation. A copy that fails
// its checks is renamed to state.damaged (state.damaged.<n> when taken)
// and reported, never written over; when no valid copy is left, or a
// consumer directory holds none, State returns an error wrapping
// store.ErrCorrupt: it is never read as an empty state (jetstream then
// restores the consumer from its config with nothing acknowledged).
//
// # Ack journal
//
// The acknowledgements a client asked to have confirmed (a double ack,
// +NXT, -NAK or +TERM with a reply subject; store.ConsumerOp) of every
// consumer of the store, appended by ConsumerJournal.Journal. Its
// goroutine takes everything appended since its last pass, writes it to
// the file of its generation, fsyncs it (and the directory, for a new
// file) and only then calls the waiters: every op waiting at the moment
// of a sync shares that one fsync, whichever consumer it belongs to. The
// consumer's confirmation is sent by that callback.
//
// File header (28 bytes):
//
//	offset size field
//	 0      8   magic "CAIRNACK"
//	 8      4   version, u32 = 1
//	12      4   reserved, 0
//	16      8   gen, u64: equal to the number in the file name
//	24      4   CRC-32C of bytes 0..23
//
// Records follow back to back:
//
//	offset size field
//	 0      4   L, u32: the whole record, these 4 bytes and the CRC included
//	            (36 + N)
//	 4      1   kind: 1 ack, 2 nak, 3 term (store.ConsumerOpKind), or
//	            0x10 reset: forget every earlier record of this consumer
//	 5      1   reserved, 0
//	 6      2   N, u16: length of the consumer's name
//	 8      8   stream sequence, u64
//	16      8   consumer sequence, u64
//	24      8   time, i64 unix ns (nak: redeliver not before)
//	32      N   the consumer's name
//	32+N    4   CRC-32C of the file's gen (u64) and the record's offset in
//	            the file (u64), then bytes 0 .. L-5
//
// A new generation starts once the current one holds 1 MiB; each Open
// starts a new one too, so a file is only ever appended to by one
// process. Replay is idempotent (store.ConsumerOp), so the journal needs
// no link to the state file: at Open, every record of every file is read,
// oldest first, and handed to its consumer (Journaled), which replays it
// onto its stored state. A file's replay stops at its first invalid
// record, with a warning naming file and offset: what follows (an unsynced,
// torn tail, or damage) is redelivered, never guessed. Records of a name
// without a consumer directory are ignored; a consumer created under a
// used name first appends a reset record and waits for its fsync, so it
// never inherits its predecessor's acks.
//
// A generation's file is removed once every consumer that wrote to it has
// stored two state snapshots taken after the generation ended (Covered,
// with the generation read before the snapshot was taken): its records
// are then in both copies of each state file, so that a damaged newest
// copy, read past at the next open, leaves the older copy plus the
// journal, still holding every confirmed ack. A removal undone by a power
// loss brings back records whose replay changes nothing.
//
// # Writing (group commit)
//
//  1. Append checks the limits, encodes the record into the in-memory
//     image of the active segment under the store lock, updates the index
//     and returns the sequence. It does no I/O.
//  2. The flusher's writer goroutine takes everything not yet written
//     (appending a compact record for removals at the front, then a
//     syncmark) and writes it, one Write per segment, then publishes the
//     written sequence (waking WaitWritten, which the PubAcks of a stream
//     with persist_mode async wait for), while its syncer
//     goroutine fsyncs what was written before. Only after an fsync does
//     the syncer record the new durable sequence in the checkpoint file
//     (without fsync), then publish it and wake every WaitDurable waiting
//     at or below it. Appends that arrive during an
//     fsync are written meanwhile and covered by the next one: one fsync
//     covers every append written before it.
//  3. A segment is fsynced before anything is written to a newer one. A
//     new segment is created, its header written and fsynced, and the
//     msgs directory fsynced, before any record is written to it.
//  4. Delete, Purge, Compact, ExpireUpTo and UpdateConfig return once
//     their records are durable.
//  5. A segment whose messages are all removed, at the front of the log,
//     is removed (remove, fsync the directory) only after the compact
//     record or header that covers it is durable (and, in rollback mode,
//     once a position taken after its removal was saved: "Positions and
//     rollback").
//  6. Any write, fsync, create, remove or directory fsync error fences the
//     store: Append, WaitDurable and the removals return store.ErrFenced
//     wrapping the cause until the store is reopened; nothing written
//     after the last good fsync is ever acknowledged.
//
// SyncEveryInterval (opt in) acknowledges at once and writes and fsyncs on
// the interval: a power loss can lose up to an interval of acknowledged
// messages.
//
// Reads never wait for the flusher: a message not yet written is read
// from memory, a written one from the file, synced or not (the file
// returns what was written either way). A read of an unsynced message is
// of data that a power loss may still remove; the layers above deliver
// nothing past the durable sequence (Store.DurableSeq).
//
// # Recovery (Open)
//
//  1. Every file msgs/<base>.blk is read in order of base, and every
//     record is verified (length, type, flags, CRC bound to base and
//     offset); a sealed segment with a valid index file is taken from
//     the index instead, its records verified when loaded ("Index
//     file"). Nothing is trusted without a CRC: the record's, or the
//     index file's together with the segment's size, header and last
//     record's CRC.
//  2. A segment header that fails its checks is reported; the base is
//     taken from the file name and the records are still verified one by
//     one. A header of a version this build does not know (above 2)
//     fails Open.
//  3. After an invalid record, the scan resynchronizes at the next offset
//     where a valid record starts; the bytes in between are a bad region.
//  4. In the last segment, let D be the largest syncmark value found. The
//     first bad region that starts at or after D (or at or after the end
//     of the header when there is no syncmark) is the tail of a write that
//     was never fsynced, torn or partly written by a power loss: the file
//     is truncated there, fsynced, and the number of bytes and the offset
//     are logged. A power loss leaves such a tail only from a write that
//     was never fsynced, so never acknowledged under SyncAlways (a batch
//     is acknowledged only after its fsync, and the next batch's syncmark
//     records that fsync); its sequences are used again by the next
//     appends, and the layers above never hand out a sequence past the
//     durable one, so nothing outside the store can have seen them. A
//     media error confined to the last batch of the last segment, a
//     truncation of the file that also removed every later syncmark, or a
//     removed last segment looks the same to the segments; the checkpoint
//     file tells them apart: every sequence through its value that the
//     segments no longer account for is lost (rule 7), and LastSeq stays
//     at least that value (rule 6), so a durable sequence is never
//     assigned again (within the window that section describes).
//     A last segment whose header fails its checks and that holds no
//     syncmark was being created (no byte of it was ever fsynced): it is
//     removed when an older segment exists, else its header is written
//     again.
//  5. Every other bad region is corruption: it is logged with file and
//     offset, and nothing is deleted or rewritten.
//  6. The low water is the largest of the headers' low water and the
//     compact records' seq. LastSeq is the largest of the last message
//     sequence, the last segment's base minus one, the low water minus
//     one, the skip records' seq minus one and the checkpoint's value: it
//     never goes back except by the step 4 truncation of what was never
//     durable.
//  7. Every sequence from the low water to LastSeq must be accounted for:
//     by a message record, a delete record, a compact record, or a skip
//     record. A
//     sequence that is not (inside a bad region, past a damaged end of a
//     sealed segment, in a missing segment, past the end of the log up to
//     the checkpoint's value) is lost: it is reported by
//     the log, in State().Lost, and by Load and LoadNext (a
//     *store.CorruptError naming the range) until a Delete, Purge or
//     Compact removes it. It counts in FirstSeq and as a gap, not in
//     Msgs or Bytes. The store stays usable for everything else.
//  8. Messages below the low water or named by a delete record are
//     removed; front segments left with no message and no lost sequence
//     (up to the next segment's base) are removed once their compact
//     record is durable (the continuation of an interrupted removal,
//     justified by that record, not by inference). A file holding lost
//     sequences stays until a Delete, Purge or Compact removes them.
//  9. The last segment and the msgs directory are fsynced before Open
//     returns, so what was recovered is durable and DurableSeq = LastSeq.
//  10. The stream's limits given to Open are applied as UpdateConfig
//     applies them (store.EnforceAfterUpdate): a crash may have come
//     between a stream update and its removals. The removals are written
//     by the first batch; a crash before it makes the next Open remove the
//     same messages again.
//
// A delete record inside a bad region is lost with it, and the message it
// removed would reappear; this is the limit of a single copy, reported
// with the region.
//
// # Memory
//
// Per stored sequence the index keeps the record offset, its length (with
// a has-header bit), a subject id and the distance to the next message on
// the same subject (4 x u32), and one bit in a removed bitmap: 16.125
// bytes; 4 more in a segment that holds a compressed record (its
// uncompressed length). A skip costs the same per skipped sequence (removed slots) while
// the active segment stays within BlockSize/64 slots (128Ki with the
// default BlockSize); a longer skip costs
// nothing per sequence: the skipped range lies between segments, and the
// next message starts a new one. State(true) still lists every gap, as
// nats-server does (8 bytes per gap, only for that call). Subjects are kept once, in a map from subject to id, count, first
// and last sequence, which grows with subjects, not messages. Each segment
// keeps a 256-bit filter of the subject ids it holds, so that filtered
// scans skip segments that cannot match, and scans with one literal
// subject follow the same-subject links. Of the active segment, only the
// bytes not yet written and the 64 KiB chunk being filled are in memory
// (an image of about 320 KiB plus up to twice what waits for the writer,
// whatever BlockSize is: the writer drops what it wrote in steps of at
// least 256 KiB, once the bytes to keep are fewer than those dropped);
// every other read goes to the file, scans through a bounded cache of
// whole 64 KiB chunks (Config.CacheBytes, 4 MiB by default). Before, the
// whole active segment and a spare image of it were kept: 16 MiB per
// stream with the default BlockSize. The active segment's index builder
// ("Index file") adds at most 128 KiB, and nothing once the segment's
// first MiB shows its messages are too small for an index to pay.
//
// Per-message TTLs (store.Config.MsgTTL) add nothing to the format: the
// TTL is the Nats-TTL field of the stored header. The store keeps a
// store.TTLIndex (16 bytes per message with a TTL, 8 per message with
// "never", nothing for the others); recovery rebuilds it from the headers
// of the message records it verifies, and a removal by expiry is written
// as any removal is (delete or compact record).
//
// NumPending counts from the index alone, never reading a record: whole
// segments by their live count and partial ones by the removed bitmap
// when unfiltered, the slots' subject ids (segments skipped by their
// filter) when filtered, and the per-subject counts when the range holds
// every match. A range longer than the rest of the stream is counted as
// the total minus the rest.
//
// # Limits of this version
//
//   - Only segments at the front of the log are removed; a segment in the
//     middle whose messages were all removed stays on disk (its index
//     slots stay in memory) until the front reaches it.
//   - Every segment file stays open (one descriptor per segment).
//   - Nothing stops two processes from opening the same directory.
//
// # Concurrency
//
// Goroutines:
//
//   - The flusher's writer and syncer, started by Open and stopped by
//     Close (which waits for them after a last batch). The writer owns the
//     writing of segment files and waits on a kick channel, the sync
//     interval's ticker, or Close; it hands each written batch to the
//     syncer over a channel. The syncer owns fsync, publishing durable
//     progress (the notifier) and removing segments; it stops when the
//     writer closes that channel.
//   - The ack journal's goroutine (journal.run), started by Open and
//     stopped by Close after it wrote what was appended; it owns the
//     journal's files, waits on its kick channel, and calls the waiters'
//     callbacks holding no lock.
//   - During Open only, a read-ahead goroutine reads the next segment file
//     while the previous one is verified; Open ends it before returning.
//     It reads only the segments Open does not take from their index.
//
// A segment's index builder (segment.ix) is the writer's: Open creates
// it for the active segment before the flusher starts, the writer adds
// the records it writes and writes the index file once it moves on from
// the sealed segment (after fsyncing it).
//
// The checkpoint file has one owner at a time, so no lock: Open, then
// the syncer, then Close once the flusher has stopped.
//
// Locks, in the order they may be taken:
//
//  1. consumerStore.mu (one consumer's state), then Store.cons (the open
//     consumer stores; held across the I/O of creating or deleting a
//     consumer).
//  2. Store.mu, an RWMutex over the index, the in-memory images and the
//     counters. The writer and syncer hold it only to take a batch and to
//     publish its result, never across I/O; loads hold it shared and read files
//     after releasing it (State and ExpireUpTo read one record's time
//     under it).
//  3. notifier.mu, chunkCache.mu, matchCache.mu, journal.mu: leaves,
//     taken with or without Store.mu, never holding another lock.
package filestore
