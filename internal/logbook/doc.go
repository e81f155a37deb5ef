// Package logbook is the append-only, hash-chained, checkpoint-signed record
// of every decision Harbormaster makes (DESIGN.md, invariant 7): a decision
// is durable here before its marque reaches the Pilot, and the execution's
// outcome after.
//
// # Invariants
//
//   - Append-only. Entries are only ever inserted; the schema's triggers
//     abort UPDATE and DELETE on the logbook tables (a guard against our own
//     mistakes, not against an attacker with the file), except that Prune
//     (retention) removes the oldest entries through a signed checkpoint:
//     it appends a logbook.pruned entry naming the checkpoint's size and
//     head first, then moves the prune mark and deletes the entries at or
//     below it, the only rows the triggers let a DELETE reach. Verify
//     resumes the chain at the mark and requires both the checkpoint and
//     the chained entry.
//   - Gapless. Seq starts at 1 (at the prune mark plus one once pruned) and
//     every entry's seq is its predecessor's plus one.
//   - Durable before acknowledged. Append returns an entry only after the
//     SQLite transaction holding it has committed with WAL and
//     synchronous=FULL. If Append returns an error the entry does not exist
//     and never will (a request the writer had not yet taken is abandoned; a
//     batch that fails rolls back whole). Callers treat an error as "nothing
//     executes".
//   - Hash chain. Each entry's hash covers its seq, time, kind, subjects,
//     payload and the previous entry's hash (64 zeros for entry 1), so
//     changing, deleting, inserting or reordering any entry breaks every
//     link after it.
//   - Signed checkpoints. The writer signs the chain head with the control
//     plane's Ed25519 key with the log's first batch, at every multiple of
//     Config.CheckpointEvery entries (default 1000), every
//     Config.CheckpointInterval (default 10 s) when entries were appended
//     since the last one, and when Run stops.
//
// # Entry hash
//
// hash = hex(SHA-256(input)), where input is, with integers big-endian and
// each variable-length field prefixed by its byte length as a uint32:
//
//	"github.com/harbormaster-dev/harbormaster/logbook/entry/v1\n"   domain separation
//	seq       uint64
//	time      int64, Unix nanoseconds (UTC)
//	kind      uint32 length, bytes
//	subjects  uint32 length, canonical JSON of the subjects object
//	payload   uint32 length, canonical JSON payload, as stored
//	prev      32 raw bytes: the previous entry's hash (zeros for seq 1)
//
// Canonical JSON is CanonicalJSON's (RFC 8785-like; integers kept digit for
// digit). HashEntry recomputes it for an exported entry, so the chain can be
// checked without this package's database. The store keeps hashes as 32 raw
// bytes; the API and exports write them as 64 lower-case hex digits.
//
// Time is the injected clock's reading (UTC) when the writer commits the
// batch; entries of one batch share it. It is recorded, not trusted: the
// chain orders entries, and a clock that steps back yields earlier times at
// later seqs.
//
// # Checkpoints
//
// A checkpoint is a C2SP signed note (golang.org/x/mod/sumdb/note) whose
// body follows tlog-checkpoint:
//
//	<origin>\n<size>\n<base64 of the 32-byte hash of entry <size>>\n
//
// The third line is the hash-chain head, not a Merkle tree root: this log
// proves its history by replaying the chain, not by inclusion or
// consistency proofs, so a verifier needs the entries, not just two
// checkpoints. Checkpoints are stored in the logbook_checkpoints table and
// exported as JSON lines (ExportCheckpoints); the note field alone is
// authoritative and verifies with any note implementation given the key
// from CheckpointVerifierKey.
//
// # Lifecycle
//
// New builds a Logbook over an open store. Reads (Get, Tail, Find, Iterate,
// Export, Checkpoints) and Verify work at any time, from any process. Append
// needs the writer: the owner runs Run(ctx) in a goroutine it waits for, and
// cancels ctx to stop it. Run commits every batch it has taken, settles (see
// below), answers every queued Append with ErrClosed, signs a last
// checkpoint and returns; later Appends return ErrClosed at once. Concurrent
// Appends are batched by that one goroutine into one transaction (group
// commit): while one batch's fsync runs, the next batch gathers. While its
// recent batches held one appender's entry each, an appender that finds
// the writer idle commits its entry itself, with the lazy records the
// writer holds, in its own goroutine (the group commit's leader, as in
// PostgreSQL's WAL flush): a lone appender pays no hand-off to the writer
// goroutine and back. It leaves the deferred work below to the writer. While its
// recent batches held several entries that are not lazy (several appenders
// at once), the writer also holds a batch open for up to
// Config.CommitWindow until it holds as many, so that they share one fsync;
// a lone appender never waits. The writer re-reads the chain head inside
// each transaction, under SQLite's write lock, so two processes writing the
// same file cannot fork the chain (they only take turns).
//
// # The subject index and After work
//
// An entry's transaction holds the entry (and its record's With) only. Its
// subject index rows (logbook_subjects) and its record's After callback
// are written behind it by the writer, in a transaction of its own that
// batches many entries (a "settle": every Config.IndexBatch entries or
// Config.IndexDelay, on Settle, when Run starts and when it stops). A
// settle commits with synchronous=NORMAL on a connection it holds
// throughout, so no other transaction ever commits on the write handle
// without an fsync; the next entry commit's fsync makes it durable. Its
// work is derived (the index) or, by After's contract, rebuildable, so a
// crash that loses a settle loses no entry.
//
// logbook_index.indexed_through, committed with the index rows, is the
// last seq they cover. A lookup by subject reads the index up to it and
// matches the entries after it on their subjects field, in one statement:
// it sees every committed entry the moment its Append returns, however
// far the index lags, after a crash and with another process writing. The
// next settle indexes every entry past indexed_through, reading from the
// store those its own writer did not write.
//
// # What Verify proves, and what it cannot
//
// Verify replays the chain from entry 1 in one read snapshot and reports the
// first bad seq and what is wrong: a changed entry, a gap (deleted entries),
// a reordering, a rewritten entry (broken link), a checkpoint whose
// signature fails, whose stored fields disagree with its signed body, or
// whose signed hash differs from the chain at its size.
//
// It cannot tell, from the database alone:
//
//   - that the tail was deleted, if the checkpoints covering it were deleted
//     with it. Checkpoints exported earlier and kept outside the control
//     plane's trust domain reveal it: one that signs more entries than the
//     log holds reports ProblemTruncated.
//   - that the whole log was rewritten and re-signed by someone holding the
//     checkpoint key. Every hash and signature would be consistent; only a
//     checkpoint exported before the rewrite (it signs a different hash at
//     its size) reveals it. Export checkpoints regularly to somewhere the
//     control plane cannot write.
//   - that entries written after the last checkpoint are the ones the writer
//     wrote: they are chained but not yet signed (Report.SignedThrough,
//     Report.Unsigned). The writer signs in the same transaction as the
//     log's first batch and as the batch that brings the unsigned tail to
//     CheckpointEvery entries, so an intact log never has a longer tail; Verify sets Report.TailTooLong
//     when it does, or when there are entries and no checkpoint at all:
//     what deleting checkpoints and rewriting the entries after them leaves.
//     The command refuses such a log unless told otherwise.
//   - whether the subject index (logbook_subjects, logbook_index) is
//     complete. It is derived data, not covered by the chain: an attacker
//     could hide an entry from "entries about request X" (a deleted index
//     row, or a raised indexed_through) without breaking the chain. The
//     entries themselves, and their subjects field, are covered.
//
// Verify never trusts the stored size and hash columns of a checkpoint: they
// must agree with the signed note. On a long log it first checks ranges of
// entries in parallel on several read connections (reading rows is most of
// its cost); that fast path can only answer "intact", and anything else
// hands over to the sequential walk, which produces the report.
package logbook
