// Package raftnode runs many Raft groups on one server (multi-raft) on
// go.etcd.io/raft/v3 v3.7.0, behind an API that names none of etcd's types.
// It owns the groups' shared write-ahead log, the scheduler that drives
// them and the framing of their messages; it knows nothing of streams,
// consumers or routes. The design is docs/cluster.md, "Decisions"
// (decisions 1, 3, 4, 7, 10, 12); the contract it
// keeps is docs/durability.md section 6: an entry is acknowledged only
// once it is fsynced on a majority.
//
// # Using it
//
//  1. Open a Node on a directory of a vfs.FS. Open replays the WAL; a torn
//     tail is cut, damage anywhere else fences every group (Node.Damage).
//     With Config.DeferReplay, Open only reads the store's incarnation,
//     and Replay, called on a goroutine of the caller's, replays the WAL
//     (a server accepts clients meanwhile; no round runs before it).
//  2. AddGroup for each replica this server holds (GroupConfig: group ID,
//     this replica's ID, the store incarnation it is bound to, its peers
//     and their servers), with the group's StateMachine. A replica whose
//     binding does not match the WAL is fenced, never started as new.
//     With ForceSole, a replica the WAL holds is made its group's only
//     voter first (force.go: an operator's last resort after a majority
//     lost its logs).
//  3. Start (goroutines: one ticker, one round loop, a worker pool), or, in
//     single-goroutine tests, call Tick and RunRound yourself.
//  4. Feed every frame the transport receives to Node.Receive; hand frames
//     to send to the Transport given in Config.
//  5. Propose on the leader; the returned Proposal resolves when that exact
//     entry (term, index) has been applied here, also after this replica
//     lost the leadership (handed over or deposed: the next leader may
//     commit it), and fails with ErrNoReply when another entry applies
//     at its index, a snapshot passes it, or nothing is learnt of it for
//     ten election timeouts after the loss (kept.go).
//  6. When a state machine has made its state durable up to an index, call
//     Compact so the WAL may drop the group's entries up to it.
//  7. To stop cleanly: Isolate (the node leaves its peers: no frame in or
//     out), wait for Settled (every group applied what it knows
//     committed), take the state machines' last checkpoints, then Close;
//     nothing commits here between the checkpoints and Close, so a
//     restart applies no entry again (isolate.go).
//
// # A scheduling round
//
// Groups with work (received messages, proposals, ticks, requests) are
// queued; the round loop takes every queued group and:
//
//  1. in the worker pool, per group: steps proposals, messages and ticks
//     into the RawNode, takes its Ready, installs a received snapshot into
//     the state machine (Restore is durable when it returns), and encodes
//     the Ready's entries, HardState and snapshot metadata as WAL items and
//     its messages as frame envelopes. A state machine that restores in
//     the background (BackgroundRestorer: a stream fetching the data its
//     manifest names) has its Restore run on a goroutine: the group is
//     parked with its Ready, neither written, sent nor advanced, and runs
//     no round until Restore returns; the round after that writes and
//     sends the Ready as usual. A Restore failing with ErrRestoreRetry
//     writes a snapabort item and rebuilds raft from the durable log, as
//     if the snapshot had never come;
//  2. on the loop goroutine: writes one WAL record holding every group's
//     items (not yet fsynced);
//  3. if the round needs an fsync (step 4), sends what promises nothing
//     about this node's disk: one frame per destination server (more
//     when they would pass Config.MaxFrameBytes: "Frames") holding
//     every MsgApp, MsgSnap and MsgHeartbeat of the round, every message
//     of a group whose Ready needs no fsync (a heartbeat response, an
//     append response for entries fsynced in an earlier round), and the
//     liveness beat a tick asked for. The leaders' appends go out before
//     its fsync so that the followers write and fsync their copies while
//     the leader fsyncs its own (the leader's parallel write of the Raft
//     thesis, section 10.2.1, which etcd-server does too); the other
//     groups' answers so that one group's large write does not hold up
//     every group's heartbeats past an election timeout. A started
//     node then yields (yieldToSenders), so that the transport's
//     writers these frames woke write them before the fsync blocks the
//     loop's thread. A round without an fsync sends everything in step
//     5: one frame per server;
//  4. fsyncs once if any Ready needed it (MustSync: new entries, term or
//     vote). This is the durability point: no vote, append response or
//     other message that speaks for what this round wrote has left yet;
//  5. sends the rest, one frame per destination server (or more): the
//     vote and pre-vote responses, append responses, vote requests and
//     everything else of the groups whose Ready needed the fsync;
//  6. in the worker pool, per group: appends to the in-memory log, applies
//     committed entries to the state machine, resolves proposals, calls
//     Advance, and requeues the group if it has more work.
//
// A leader counts its own copy of an entry toward the commit only in
// step 6 of the round that fsynced it: raft (v3.6 and later, without
// AsyncStorageWrites, as here) queues the leader's acknowledgement of its
// own append and steps it on Advance. So a commit index is always backed
// by a majority of fsynced copies, though the leader's copy was written
// alongside the followers'. If the fsync fails, the WAL is failed for
// good: every group of the round is fenced in step 6 without Advance (the
// leader never counts its copy and its waiters get ErrNoReply; the other
// groups are fenced when they next run), and the node sends nothing
// more, liveness beats included, so its peers find it dead and elect
// another leader, which may commit the entries the followers hold
// durably. A crash between steps 3 and 4 is a leader that lost an
// unsynced tail: its appends may be on the followers, but no leader
// counts them before a majority has acknowledged them.
//
// A round that would step a large entry (a proposal, or a received
// message, of at least Config.AsideBytes: 4 MiB) runs beside the loop
// instead, on a goroutine of its own for that one group, while the loop's
// rounds go on serving the others (docs/cluster.md, "Large entries
// beside the round loop"). Its steps are those above, but for step 3,
// which it takes before step 2 (the leader's appends promise nothing
// about its disk, whether its record is written yet or not); it shares
// the WAL with the loop under its lock, record by record and fsync by
// fsync, and the ticks its group missed meanwhile are not stepped. A
// leader that sent a large append this way steps no tick for an election
// timeout more, while its followers write the entry in rounds of their
// own.
//
// There is no goroutine, file or fsync per group (but for a large
// entry's round).
//
// # Directory layout
//
//	<Dir>/<seq>.wal        WAL segments; <seq> is 20 decimal digits, zero
//	                       padded, counting up from 1 (00000000000000000001.wal)
//	<Dir>/<seq>.wal.new    a segment being created (ignored; replaced by the
//	                       next creation of that segment)
//
// Other files are left alone. Segments are consecutive: a missing number
// between the first and the last is damage.
//
// # Byte order, sizes, checksums
//
// Integers are little endian. Every CRC is CRC-32C (Castagnoli). Sizes
// that are part of the format:
//
//	segmentHeaderSize = 48
//	recordHeaderSize  = 24
//	MaxRecordBody     = 256 MiB (a round that would write more fences
//	                    the node: no single Ready comes near it)
//
// # Segment header
//
//	offset size field
//	 0      8   magic "CAIRNWAL"
//	 8      4   version, u32 = 1
//	12      4   header size, u32 = 48
//	16     16   store incarnation: random bytes drawn when the WAL was
//	            created; the same in every segment of one WAL
//	32      8   seq, u64: the number in the file name
//	40      4   reserved, 0
//	44      4   CRC-32C of bytes 0..43
//
// A segment is created as <seq>.wal.new holding its header and (but for
// the first segment of a new WAL) its checkpoint record (below), fsynced,
// renamed to <seq>.wal, and the directory fsynced, so a segment under its
// final name always has a whole header and checkpoint.
//
// # Preallocated space
//
// On a vfs.FS that writes in place (vfs.InPlaceFS: the OS, CrashFS), the
// active segment holds zeros ahead of its records, and records are
// written over them (WriteAt) rather than appended:
//
//	| header | checkpoint | record | record | 0 0 0 0 0 0 0 ... 0 |
//	                                        ^ size        end ^
//
// A new segment is created with its header, its checkpoint and a first
// run of zeros (preallocChunk, 1 MiB; less for segments smaller than
// that), all in the fsync before its rename. When a record would pass
// the end, another run of zeros is written at the end first, made
// durable by the round's fsync with the record; a record that would pass
// it by more than a run (a large entry) is written past the end as it
// is, with no zeros under it. An fsync thus usually
// finds only data to write: no new file size, no block to allocate.
// On ext4 here such an fsync took 150 to 260 µs against 300 to 1,100 µs
// after an append (docs/cluster.md, "The WAL's preallocated space").
// Before a segment rotates out, its zeros are cut (truncated and
// fsynced), so only the last segment ever ends in zeros; recovery cuts
// them too, and the next write writes new ones. On an FS without in-place
// writes (a test wrapper) records are appended, as the format allows
// both.
//
// # Record
//
// Records follow the header back to back, without padding.
//
//	offset size field
//	 0      4   magic, u32 0x4C415743 ("CWAL" read as bytes)
//	 4      4   L, u32: body length, 1 <= L <= MaxRecordBody
//	 8      8   synced, u64: how many bytes of this file had been fsynced
//	            when the record was written (a record boundary, at most
//	            this record's offset)
//	16      4   body CRC: CRC-32C of the previous record's body CRC (u32;
//	            for the first record of a segment, the header's CRC), then
//	            the body. The records of a segment form a hash chain, so a
//	            rolled-back or misplaced run of records is caught.
//	20      4   header CRC: CRC-32C of bytes 0..19, then the record's
//	            offset in the file (u64); a header is valid only where it
//	            was written.
//	24      L   body
//
// Body: kind (u8; 1 = batch, the only kind) followed by items back to
// back up to L. One round writes one batch record, so a round's items are
// all present after a crash or all absent. Items start with a kind (u8)
// and a group ID (u64); then, per kind (values are on disk, append only):
//
//	1 replica    replica u64, flags u8: this store holds that replica of
//	             the group (flags 0), or it was removed (flags 1, a
//	             tombstone: the group's log is dropped and no replica ID up
//	             to it is accepted for the group again)
//	2 hardstate  term u64, vote u64, commit u64
//	3 entries    first index u64, n u32, then n times: term u64, type u8
//	             (raft's EntryType: 0 normal, 1 conf change, 2 conf change
//	             v2), data length u32, data. Entries at and above the first
//	             index replace what the group held there.
//	4 snapshot   index u64, term u64, conf state (below): a snapshot was
//	             installed; the group's log is replaced by it (entries are
//	             dropped, the state machine holds the data)
//	5 compact    index u64, term u64, conf state: the state machine is
//	             durable through index; entries up to it are dropped and
//	             the conf state is the one in force at index
//	6 snapbegin  index u64, term u64, conf state: the install of a
//	             snapshot begins; written and fsynced alone before the
//	             state machine's Restore, and followed by the snapshot item
//	             in the round's record. If recovery finds it without its
//	             snapshot item and the state machine is at or past index,
//	             the install finished: it is completed from this item
//	             (and written again as a snapshot item); otherwise it is
//	             ignored and the old log stands.
//	7 snapabort  index u64, term u64, conf state: the install begun by
//	             the last snapbegin was abandoned (a background Restore
//	             failed with ErrRestoreRetry: the state machine kept its
//	             state); recovery forgets that snapbegin.
//
// A bootstrapped group's log starts after a synthetic base at index 1,
// term 1 (a compact item with the initial voters, and a hardstate with
// term 1 and commit 1): its first real entry is at index 2, and the state
// machine is handed an empty entry at index 1. A replica created with
// Join has base 0/0 and an empty conf state; the leader cannot send it
// index 1, so it is given a snapshot, which carries the conf state.
//
// Conf state: four lists of replica IDs, each a count u32 then u64s
// (voters, learners, outgoing voters, next learners), then auto-leave u8.
//
// The first record of every segment but the first is a checkpoint (its
// synced field is 0): a batch holding, for every group the WAL knows, its
// replica item (and tombstone), its hardstate and its base as a compact
// item. Records of older
// segments are thus needed only for entries, and a segment is deleted
// (oldest first, never the active one) once every group whose entries it
// holds has compacted past them or been removed.
//
// # Recovery
//
// Open reads the segments in order. In a segment, a record is valid when
// its magic, header CRC, length (within the file) and chained body CRC
// hold and its body decodes. At the first invalid record at offset P:
//
//   - if P is in the last segment and every byte from P on is zero, P is
//     the end of the records: what follows is preallocated space. The
//     file is cut at P and fsynced, and nothing is reported.
//   - if P is in the last segment and no valid record header after P
//     (scanning every offset) says synced > P, the bytes from P on were
//     never fsynced: a torn tail. The file is cut at P and fsynced.
//     Nothing there was acknowledged, since acknowledgements follow the
//     fsync (a leader's appends may have been sent, but no commit counted
//     this copy). (If the last round's record was fsynced and then damaged, it
//     looks the same: no later record vouches for it.)
//   - otherwise the damage is in data that was fsynced: Open succeeds, but
//     Damage reports the segment and offset and every group is fenced.
//     Nothing is cut, skipped or deleted.
//
// Replay then checks each group: its log is contiguous from its snapshot
// or compaction point, terms do not decrease, the commit index is within
// the log; a group failing a check is fenced.
//
// The last segment is read first, alone: its checkpoint record and the
// compactions, snapshots and tombstones after it give each group's base
// at the end of the log (every index for a removed group). The replay
// proper checks every record as above but does not decode the entries
// at or below that base (their data is not copied): the end of the log
// drops them. Overwrites among them still drop what they overwrote.
//
// # Frames
//
// A frame carries the messages of one round from one server to another:
// those that leave before the round's fsync in one, the rest in another
// (steps 3 and 5), each split into as many frames, in order, as keep it
// within Config.MaxFrameBytes (64 MiB by default, the cluster transport's
// largest frame). An envelope always fits an empty frame, so a message
// near the limit travels alone whatever else the round sends that
// server. The largest entry a follower can receive is MaxFrameBytes less
// EntryOverhead (150 bytes: the frame's 9, the envelope's 13, and 128 for
// an append message around one entry, every field at its widest;
// DefaultMaxEntryBytes, 67,108,714), and Propose refuses a larger one
// (ErrTooLarge) rather than log an entry no follower would ever receive.
//
//	offset size field
//	 0      1   version = 1
//	 1      4   count N, u32
//	 5      ... N envelopes: group u64, flags u8, length u32, message (a
//	            raftpb.Message in protobuf encoding)
//	end-4   4   CRC-32C of everything before it
//
// Flags: bit 0 quiesce (on a heartbeat: the leader is going quiet); bit
// 3 in sync (with bit 0: the receiver holds the leader's whole log, so the
// heartbeat's commit index is the leader's).
// Envelopes with flag bit 1 (wake) or 2 (liveness) carry no message (length
// 0). A frame that fails its CRC or does not parse is dropped whole
// (Receive returns ErrBadFrame); Raft recovers from lost messages.
package raftnode
