package logbook

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"syscall"
)

// The journal (Config.Journal) is where an entry becomes durable first on
// a SQLite store: a file of frames, one per entry, that the writer appends
// a whole group of entries to with one write and one fdatasync. The
// entries reach logbook_entries behind it, many groups in one transaction
// that needs no fsync of its own (materialize), and in the transaction of
// any batch that commits in the store (a record with If or With, a
// checkpoint), before its own entries, so the chain in the store is always
// a prefix of the chain. The journal is emptied once a transaction with an
// fsync has made every entry in it durable in the store.
//
// A record's View (the request row a read's decision derives) is in its
// frame, so the row reaches the store in the same transaction as its
// entry: now, or when the next process replays the journal after a crash.
// Readers see an entry once it is in the store; Logbook's own readers and
// the ledger's wait for that first (Visible), so an Append that returned is
// never missing from what they read.
//
// A frame:
//
//	magic   uint32 "HMJ1", little-endian
//	length  uint32, the body's
//	crc     uint32, CRC-32C of the body
//	body    round uint64 | seq int64 | time int64 | prev hash [32] | hash [32] |
//	        kind, subjects, payload: uvarint length, bytes |
//	        view: uvarint length of its SQL (0: none), SQL, uvarint count of
//	        its arguments, each a tag byte (0 null, 1 int64, 2 string,
//	        3 bytes) and its value (int64 8 bytes little-endian; string
//	        and bytes uvarint length, bytes)
//
// A frame that is cut short or fails its CRC ends the journal: it is the
// tail of a group whose fdatasync never returned, so no Append of it
// returned either. Once the store holds all of it durably, the journal is
// written again from its first byte (empty), in a new round: every frame
// carries its round's random number, and a frame of another round than
// the first frame's ends the journal too (what follows the newest round is
// an earlier one's, whose entries the store holds). A frame whose entry
// the store holds already is checked against it: a journal and a store
// that disagree about an entry stop the start. Replay also recomputes every entry's hash and checks
// that the frames continue the store's chain, and refuses to start when
// they do not.

const journalMagic = 0x314a4d48 // "HMJ1"

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// View is a statement that writes state an entry derives (a read's request
// row), run in the same transaction as the entry's insert into the store:
// at once when the entry commits in the store, or from the journal. Its
// arguments are nil, int64, int, string or []byte.
type View struct {
	SQL  string
	Args []any
}

// journaled is an entry durable in the journal and not yet in the store.
type journaled struct {
	round         uint64 // the journal's round the frame was written in
	seq, ns       int64
	kind          Kind
	subj, payload []byte
	prev, hash    [32]byte
	view          *View
}

// journal is the open, locked journal file and the writer's view of it.
type journal struct {
	f    *os.File
	path string
	size int64 // bytes of whole frames in the file
	// pending are the entries in the journal that are not in the store
	// yet, in seq order; head is the chain's head, theirs or the store's.
	pending  []journaled
	headSeq  int64
	headHash [32]byte
	cpSize   int64  // the newest checkpoint's size, in the store
	stored   int64  // the last seq in the store, durably: every transaction that moves it has an fsync
	broken   error  // the journal cannot be trusted to be what this writer wrote: nothing more is appended
	round    uint64 // this round's number, in its frames (empty starts another)
	buf      []byte
}

// openJournal opens path, taking an exclusive lock on it that the
// process holds until close: one appending process per journal.
func openJournal(path string) (*journal, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%w: journal: %w", ErrUnavailable, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: journal %s: another process appends to this logbook", ErrUnavailable, path)
		}
		return nil, fmt.Errorf("%w: journal %s: lock: %w", ErrUnavailable, path, err)
	}
	return &journal{f: f, path: path, round: rand.Uint64()}, nil
}

func (j *journal) close() error {
	if j == nil || j.f == nil {
		return nil
	}
	err := j.f.Close() // releases the lock
	j.f = nil
	return err
}

// encode appends e's frame to b.
func encodeFrame(b []byte, e *journaled) []byte {
	at := len(b)
	b = append(b, make([]byte, 12)...)
	b = binary.LittleEndian.AppendUint64(b, e.round)
	b = binary.LittleEndian.AppendUint64(b, uint64(e.seq))
	b = binary.LittleEndian.AppendUint64(b, uint64(e.ns))
	b = append(b, e.prev[:]...)
	b = append(b, e.hash[:]...)
	for _, f := range [][]byte{[]byte(e.kind), e.subj, e.payload} {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	if e.view == nil {
		b = binary.AppendUvarint(b, 0)
	} else {
		b = binary.AppendUvarint(b, uint64(len(e.view.SQL)))
		b = append(b, e.view.SQL...)
		b = binary.AppendUvarint(b, uint64(len(e.view.Args)))
		for _, a := range e.view.Args {
			switch v := a.(type) {
			case nil:
				b = append(b, 0)
			case int64:
				b = binary.LittleEndian.AppendUint64(append(b, 1), uint64(v))
			case int:
				b = binary.LittleEndian.AppendUint64(append(b, 1), uint64(int64(v)))
			case string:
				b = binary.AppendUvarint(append(b, 2), uint64(len(v)))
				b = append(b, v...)
			case []byte:
				b = binary.AppendUvarint(append(b, 3), uint64(len(v)))
				b = append(b, v...)
			}
		}
	}
	body := b[at+12:]
	binary.LittleEndian.PutUint32(b[at:], journalMagic)
	binary.LittleEndian.PutUint32(b[at+4:], uint32(len(body)))
	binary.LittleEndian.PutUint32(b[at+8:], crc32.Checksum(body, crcTable))
	return b
}

// validView reports whether v's arguments are of the types a frame holds.
func validView(v *View) bool {
	if v == nil {
		return true
	}
	if v.SQL == "" {
		return false
	}
	for _, a := range v.Args {
		switch a.(type) {
		case nil, int64, int, string, []byte:
		default:
			return false
		}
	}
	return true
}

var errFrame = errors.New("malformed frame")

// decodeFrame reads one frame's body.
func decodeFrame(body []byte) (journaled, error) {
	var e journaled
	if len(body) < 88 {
		return e, errFrame
	}
	e.round = binary.LittleEndian.Uint64(body)
	body = body[8:]
	e.seq = int64(binary.LittleEndian.Uint64(body))
	e.ns = int64(binary.LittleEndian.Uint64(body[8:]))
	copy(e.prev[:], body[16:48])
	copy(e.hash[:], body[48:80])
	r := body[80:]
	field := func() ([]byte, error) {
		n, k := binary.Uvarint(r)
		if k <= 0 || uint64(len(r)-k) < n {
			return nil, errFrame
		}
		f := r[k : k+int(n)]
		r = r[k+int(n):]
		return f, nil
	}
	var fs [4][]byte
	for i := range fs {
		f, err := field()
		if err != nil {
			return e, err
		}
		fs[i] = f
	}
	e.kind, e.subj, e.payload = Kind(fs[0]), fs[1], fs[2]
	if len(fs[3]) == 0 {
		if len(r) != 0 {
			return e, errFrame
		}
		return e, nil
	}
	v := &View{SQL: string(fs[3])}
	n, k := binary.Uvarint(r)
	if k <= 0 || n > uint64(len(r)) {
		return e, errFrame
	}
	r = r[k:]
	for range n {
		if len(r) == 0 {
			return e, errFrame
		}
		tag := r[0]
		r = r[1:]
		switch tag {
		case 0:
			v.Args = append(v.Args, nil)
		case 1:
			if len(r) < 8 {
				return e, errFrame
			}
			v.Args = append(v.Args, int64(binary.LittleEndian.Uint64(r)))
			r = r[8:]
		case 2, 3:
			f, err := field()
			if err != nil {
				return e, err
			}
			if tag == 2 {
				v.Args = append(v.Args, string(f))
			} else {
				v.Args = append(v.Args, []byte(f))
			}
		default:
			return e, errFrame
		}
	}
	if len(r) != 0 {
		return e, errFrame
	}
	e.view = v
	return e, nil
}

// readFrames reads the journal's newest round from the start; it stops at
// the first frame cut short or failing its CRC, or of another round, and
// returns the byte length of the frames it read.
func (j *journal) readFrames() ([]journaled, int64, error) {
	if _, err := j.f.Seek(0, io.SeekStart); err != nil {
		return nil, 0, err
	}
	r := bufio.NewReaderSize(j.f, 1<<16)
	var out []journaled
	var off int64
	var hdr [12]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return out, off, nil // the end, or a header cut short
		}
		n := binary.LittleEndian.Uint32(hdr[4:])
		if binary.LittleEndian.Uint32(hdr[:]) != journalMagic || n > 64<<20 {
			return out, off, nil
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(r, body); err != nil {
			return out, off, nil
		}
		if crc32.Checksum(body, crcTable) != binary.LittleEndian.Uint32(hdr[8:]) {
			return out, off, nil
		}
		e, err := decodeFrame(body)
		if err != nil {
			return nil, 0, fmt.Errorf("journal frame at byte %d: %w", off, err)
		}
		if len(out) > 0 && e.round != out[0].round {
			return out, off, nil
		}
		out = append(out, e)
		off += 12 + int64(n)
	}
}

// append writes the frames of es and waits for fdatasync: they are durable
// when it returns nil. On failure the file is cut back to its last whole
// frame, durably, so that no frame of the failed group is left for a
// replay to take for an entry; if that fails too, the journal is broken,
// and the writer appends nothing more (write): an entry it committed
// elsewhere could take a seq a frame left in the journal holds.
func (j *journal) append(es []journaled) error {
	b := j.buf[:0]
	for i := range es {
		es[i].round = j.round
		b = encodeFrame(b, &es[i])
	}
	j.buf = b
	_, err := j.f.WriteAt(b, j.size)
	if err == nil {
		err = syscall.Fdatasync(int(j.f.Fd()))
	}
	if err != nil {
		if terr := j.f.Truncate(j.size); terr != nil {
			j.broken = errors.Join(err, terr)
		} else if serr := j.f.Sync(); serr != nil {
			j.broken = errors.Join(err, serr)
		}
		return fmt.Errorf("%w: journal: %w", ErrUnavailable, err)
	}
	j.size += int64(len(b))
	return nil
}

// empty starts the journal again from its first byte once the store
// holds every entry in it durably. The file keeps its length: the next
// groups overwrite blocks it has already written, so their fdatasync
// flushes data and no file size (about 25 µs less each on this machine's
// disk). Frames of earlier rounds past the newest are entries the store
// holds durably, which replay skips.
func (j *journal) empty() {
	if j.size == 0 || len(j.pending) > 0 || j.stored < j.headSeq {
		return
	}
	j.size, j.round = 0, rand.Uint64()
}

// replay brings the store up to the journal at open: every frame past the
// store's head, checked against the chain, inserted with its view in one
// transaction with an fsync; then the journal is emptied.
func (l *Logbook) replay(ctx context.Context, j *journal) (int, error) {
	frames, _, err := j.readFrames()
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	db := l.st.DB()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("%w: replay: %w", ErrUnavailable, err)
	}
	defer func() { _ = tx.Rollback() }()
	var seqCol sql.NullInt64
	var headRaw []byte
	var cpSize int64
	if err := tx.QueryRowContext(ctx, headQuery).Scan(&seqCol, &headRaw, &cpSize); err != nil {
		return 0, fmt.Errorf("%w: replay: read head: %w", ErrUnavailable, err)
	}
	var headHash [32]byte
	copy(headHash[:], headRaw)
	headSeq := seqCol.Int64
	var h hasher
	n := 0
	for i := range frames {
		e := &frames[i]
		sum := h.sum(e.seq, e.ns, []byte(e.kind), e.subj, e.payload, &e.prev)
		if sum != e.hash {
			return 0, fmt.Errorf("%w: journal %s: entry %d's frame does not hash to its hash (run logbook verify)", ErrUnavailable, j.path, e.seq)
		}
		if e.seq <= headSeq {
			// In the store already: the same entry, or the two disagree.
			var stored []byte
			switch err := tx.QueryRowContext(ctx, "SELECT hash FROM logbook_entries WHERE seq = ?", e.seq).Scan(&stored); {
			case errors.Is(err, sql.ErrNoRows): // pruned since
			case err != nil:
				return 0, fmt.Errorf("%w: replay: read entry %d: %w", ErrUnavailable, e.seq, err)
			case !bytes.Equal(stored, e.hash[:]):
				return 0, fmt.Errorf("%w: journal %s: entry %d differs from the store's (run logbook verify)", ErrUnavailable, j.path, e.seq)
			}
			continue
		}
		if e.seq != headSeq+1 || e.prev != headHash {
			return 0, fmt.Errorf("%w: journal %s: entry %d does not continue the logbook at %d (run logbook verify)", ErrUnavailable, j.path, e.seq, headSeq)
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO logbook_entries (seq, time_ns, kind, subjects, payload, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?)",
			e.seq, e.ns, string(e.kind), string(e.subj), string(e.payload), e.prev[:], e.hash[:]); err != nil {
			return 0, fmt.Errorf("%w: replay: entry %d: %w", ErrUnavailable, e.seq, err)
		}
		if v := e.view; v != nil {
			err := savepointed(ctx, tx, nil, nil, func() error {
				_, err := tx.ExecContext(ctx, v.SQL, v.Args...)
				return err
			})
			if errors.Is(err, errTxBroken) {
				return 0, fmt.Errorf("%w: replay: entry %d: %w", ErrUnavailable, e.seq, err)
			}
			if err != nil {
				// Derived state: the entry is the record (the ledger's
				// reconciliation reads decisions without a row).
				l.log.Error("logbook: replay: an entry's view failed", "seq", e.seq, "err", err)
			}
		}
		headSeq, headHash = e.seq, e.hash
		n++
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("%w: replay: commit: %w", ErrUnavailable, err)
	}
	j.size, j.round = 0, rand.Uint64() // every frame in it is in the store, durably (empty)
	j.headSeq, j.headHash, j.cpSize, j.stored = headSeq, headHash, cpSize, headSeq
	return n, nil
}

// journalable reports whether reqs may commit in the journal: entries
// only, none with If or With, on a log with a checkpoint (the first batch
// commits in the store, with the first checkpoint). A checkpoint that
// falls due in the journal is signed when its entries reach the store.
func (w *writer) journalable(reqs []*request) bool {
	// Entries the store has not taken for a while (it is locked, say)
	// stop the journal too: what cannot reach the store does not pile up.
	if w.j.cpSize == 0 || len(w.j.pending) >= 2*w.l.cfg.IndexBatch {
		return false
	}
	for _, r := range reqs {
		if r.kind != reqEntry || r.rec.cond != nil {
			return false
		}
		for rec := &r.rec; rec != nil; rec = rec.then {
			if rec.with != nil {
				return false
			}
		}
	}
	return true
}

// writeJournal commits reqs in the journal: chained onto its head, one
// write and one fdatasync. Their entries reach the store later
// (materialize, or the next batch that commits in the store).
func (w *writer) writeJournal(ctx context.Context, reqs []*request, out written) (written, error) {
	j := w.j
	// The store's write lock, held while the group is written: as for a
	// commit in the store, nothing is recorded while another process holds
	// it, and no other process appends to the chain meanwhile. Its head
	// must be where the journal left it.
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return out, fmt.Errorf("%w: begin: %w", ErrUnavailable, err)
	}
	defer func() { _ = tx.Rollback() }()
	var seqCol sql.NullInt64
	var headRaw []byte
	var cpSize int64
	if err := tx.StmtContext(ctx, w.head).QueryRowContext(ctx).Scan(&seqCol, &headRaw, &cpSize); err != nil {
		return out, fmt.Errorf("%w: read head: %w", ErrUnavailable, err)
	}
	if seqCol.Int64 != j.stored {
		j.broken = fmt.Errorf("the store's logbook is at %d where this writer left it at %d: another process appends to it", seqCol.Int64, j.stored)
		return out, fmt.Errorf("%w: journal: %w", ErrUnavailable, j.broken)
	}
	now := w.l.clock().UTC()
	ns := now.UnixNano()
	headSeq, headHash := j.headSeq, j.headHash
	at := len(j.pending)
	var hexBuf [64]byte
	for i, r := range reqs {
		for rec := &r.rec; rec != nil; rec = rec.then {
			e := journaled{seq: headSeq + 1, ns: ns, kind: rec.kind, subj: rec.subjJSON, payload: rec.payload, prev: headHash, view: rec.view}
			e.hash = w.h.sum(e.seq, ns, []byte(rec.kind), rec.subjJSON, rec.payload, &headHash)
			if rec == &r.rec {
				hex.Encode(hexBuf[:], headHash[:])
				prev := string(hexBuf[:])
				hex.Encode(hexBuf[:], e.hash[:])
				out.entries[i] = Entry{Seq: e.seq, Time: now, Kind: rec.kind, Subjects: rec.subjects,
					Payload: rec.payload, PrevHash: prev, Hash: string(hexBuf[:])}
			}
			j.pending = append(j.pending, e)
			headSeq, headHash = e.seq, e.hash
		}
	}
	if err := j.append(j.pending[at:]); err != nil {
		clear(j.pending[at:])
		j.pending = j.pending[:at]
		return out, err
	}
	firstSeq := j.headSeq + 1
	j.headSeq, j.headHash = headSeq, headHash
	w.l.jPending.Store(int64(len(j.pending)))
	w.l.stats.commits.Add(1)
	w.l.stats.entries.Add(headSeq - firstSeq + 1)
	w.l.stats.journaled.Add(1)
	w.defer_(reqs, nil, firstSeq)
	return out, nil
}

// prepareViews prepares, on the write handle, the View statements of
// reqs and of the journal's pending entries that are not prepared yet:
// before a transaction holds the handle's one connection.
func (w *writer) prepareViews(ctx context.Context, reqs []*request) error {
	prep := func(v *View) error {
		if v == nil || w.views[v.SQL] != nil {
			return nil
		}
		stmt, err := w.db.PrepareContext(ctx, v.SQL)
		if err != nil {
			return fmt.Errorf("%w: prepare a view: %w", ErrUnavailable, err)
		}
		w.views[v.SQL] = stmt
		return nil
	}
	for _, r := range reqs {
		for rec := &r.rec; rec != nil; rec = rec.then {
			if err := prep(rec.view); err != nil {
				return err
			}
		}
	}
	if w.j != nil {
		for i := range w.j.pending {
			if err := prep(w.j.pending[i].view); err != nil {
				return err
			}
		}
	}
	return nil
}

// insertJournaled inserts the journal's pending entries and their views in
// tx. A view that fails is undone alone (a savepoint) and logged, not
// fatal: its entry is durable already, and the state it derives can be
// rebuilt from it; one that took the transaction with it fails tx.
func (w *writer) insertJournaled(ctx context.Context, tx *sql.Tx) error {
	es := w.j.pending
	args := w.args[:0]
	for i := range es {
		e := &es[i]
		args = append(args, e.seq, e.ns, string(e.kind), string(e.subj), string(e.payload), e.prev[:], e.hash[:])
	}
	err := w.insert(ctx, tx, w.insEntry, 7, args)
	clear(args)
	w.args = args[:0]
	if err != nil {
		return fmt.Errorf("%w: insert the journal's entries: %w", ErrUnavailable, err)
	}
	// The views in one savepoint; only when one fails, each again in a
	// savepoint of its own, so a view's failure undoes its own statements
	// only. Each view's statement is bound to tx once.
	bound := map[string]*sql.Stmt{}
	run := func(v *View) error {
		s, ok := bound[v.SQL]
		if !ok {
			s = tx.StmtContext(ctx, w.views[v.SQL])
			bound[v.SQL] = s
		}
		_, err := s.ExecContext(ctx, v.Args...)
		return err
	}
	err = savepointed(ctx, tx, w.savepoint, w.release, func() error {
		for i := range es {
			if v := es[i].view; v != nil {
				if err := run(v); err != nil {
					return err
				}
			}
		}
		return nil
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errTxBroken):
		return fmt.Errorf("%w: an entry's view: %w", ErrUnavailable, err)
	}
	for i := range es {
		v := es[i].view
		if v == nil {
			continue
		}
		err := savepointed(ctx, tx, w.savepoint, w.release, func() error { return run(v) })
		if errors.Is(err, errTxBroken) {
			return fmt.Errorf("%w: an entry's view: %w", ErrUnavailable, err)
		}
		if err != nil {
			w.l.log.Error("logbook: an entry's view failed", "seq", es[i].seq, "err", err)
		}
	}
	return nil
}

// materialized records that the store holds the whole chain, durably
// (a transaction with an fsync committed it): the journal's pending
// entries are in, and the journal can start again.
func (w *writer) materialized() {
	j := w.j
	clear(j.pending)
	j.pending = j.pending[:0]
	j.stored = j.headSeq
	w.l.jPending.Store(0)
	j.empty()
}

// materialize moves the journal's pending entries into the store in one
// transaction with an fsync, signing the checkpoint that falls due with
// them, and empties the journal.
func (w *writer) materialize(ctx context.Context) error {
	j := w.j
	if j == nil || len(j.pending) == 0 {
		return nil
	}
	if err := w.prepareViews(ctx, nil); err != nil {
		return err
	}
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%w: materialize: %w", ErrUnavailable, err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := w.insertJournaled(ctx, tx); err != nil {
		return err
	}
	every := w.l.cfg.CheckpointEvery
	var cp Checkpoint
	if j.headSeq/every > j.cpSize/every {
		if cp, err = signCheckpoint(w.l.signer, w.l.cfg.Origin, j.headSeq, j.headHash, w.l.clock().UTC()); err != nil {
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		if _, err := tx.StmtContext(ctx, w.insCP).ExecContext(ctx, cp.Size, cp.Hash, w.l.clock().UnixNano(), cp.Note); err != nil {
			return fmt.Errorf("%w: insert checkpoint %d: %w", ErrUnavailable, cp.Size, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%w: materialize: commit: %w", ErrUnavailable, err)
	}
	j.cpSize = max(j.cpSize, cp.Size)
	w.materialized()
	return nil
}
