package logbook

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Limits on what one entry may carry. A record over a limit is refused by
// Append (ErrInvalidRecord); they keep one hostile or buggy caller from
// bloating every verification.
const (
	MaxKindBytes         = 64
	MaxSubjects          = 32
	MaxSubjectKeyBytes   = 64
	MaxSubjectValueBytes = 512
)

// hashDomain starts every entry's hash input, so a logbook hash can never be
// confused with a hash of anything else the system computes.
const hashDomain = "github.com/harbormaster-dev/harbormaster/logbook/entry/v1\n"

// ZeroHash is the previous hash of the first entry: 64 hex zeros.
const ZeroHash = "0000000000000000000000000000000000000000000000000000000000000000"

// Record is what a caller appends. The logbook assigns Seq, Time, PrevHash
// and Hash.
type Record struct {
	// Kind says what the entry records: "decision", "execution",
	// "delegation", "approval", "finding", "switch", ... Lower-case ASCII
	// letters, digits, '.', '_', '-'; at most 64 bytes.
	Kind Kind
	// Subjects are the ids the entry is about, by role: "request",
	// "delegation", "marque", "principal", ... Entries are indexed by every
	// (key, value) pair. Keys follow Kind's alphabet; values are non-empty
	// and at most 512 bytes. At most 32 subjects.
	Subjects map[string]string
	// Payload is the entry's content, encoded with CanonicalJSON (a
	// json.RawMessage is taken as the JSON it holds). A nil Payload is JSON
	// null. At most Config.MaxPayloadBytes once canonical.
	Payload any
	// With, when set, runs inside the transaction that commits the entry, so
	// state the entry records (a request row, say) commits atomically with
	// it, in the same group commit. If it fails, the whole batch rolls back
	// and every Append in it fails: keep it to simple statements.
	With func(ctx context.Context, tx *sql.Tx) error
	// If, when set, runs first in the entry's transaction and decides
	// whether the entry is appended at all: false leaves it out (Append
	// returns ErrNotApplied) and the rest of the batch commits without it.
	// It is the compare-and-set of state the entry records, evaluated in
	// the same transaction as the entry: a statement such as a conditional
	// UPDATE whose rows-affected says whether the state was still as read.
	// If it fails, the whole batch rolls back, as With.
	If func(ctx context.Context, tx *sql.Tx) (bool, error)
	// After, when set, runs once the entry is durable, off the append's
	// path: in a later transaction of the writer that batches the After
	// work of many records with the subject index, without an fsync of its
	// own (see Config.IndexBatch and IndexDelay). Append does not wait for
	// it; Settle does. Records' After callbacks run in seq order, each
	// after its own record's With. One that fails is rolled back alone and
	// logged, and nothing reports it to the caller; the others in its
	// transaction are then rolled back and run again, so a callback may
	// run more than once and must act only through tx.
	//
	// It is for state that can be rebuilt from the logbook (the request
	// row of a decision): a crash or power loss between the entry's commit
	// and this transaction's loses the After work but never the entry.
	// When both are set, With runs first, in the entry's transaction.
	After func(ctx context.Context, tx *sql.Tx) error
	// View, when set, is state the entry derives (a read's request row),
	// written in the same transaction as the entry reaches the store. A
	// record with a View and no With or If may commit in the journal
	// (Config.Journal) first, with its View in its frame, and reach the
	// store behind it; a record with With or If commits in the store.
	View *View
	// Lazy lets the writer hold the entry for up to Config.LazyWait, so it
	// commits with the next entry that is not lazy and shares its fsync.
	// Append still returns only once the entry is durable. It is for
	// records whose content is provable elsewhere until they land (an
	// execution, whose receipt committed in the target) and that no caller
	// is waiting on.
	Lazy bool
	// Then, when set, is a second record appended right after this one,
	// in the same transaction: both entries exist, consecutive in the
	// chain, or neither does (Append returns this record's entry). Its
	// own If and Lazy are not allowed (an If of this record decides for
	// both); its With runs after this record's. It is for a decision and
	// its outcome known together: a read that ran while its decision was
	// being made, recorded before any of its rows leave.
	Then *Record
}

// Entry is one record in the logbook, as stored and as exported (one JSON
// object per line).
type Entry struct {
	Seq      int64             `json:"seq"`
	Time     time.Time         `json:"time"`
	Kind     Kind              `json:"kind"`
	Subjects map[string]string `json:"subjects"`
	Payload  json.RawMessage   `json:"payload"`
	PrevHash string            `json:"prev_hash"`
	Hash     string            `json:"hash"`
}

// ErrInvalidRecord is returned (wrapped) by Append for a record that breaks
// the rules on Record's fields.
var ErrInvalidRecord = errors.New("logbook: invalid record")

func validName(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// prepared is a validated record in stored form.
type prepared struct {
	kind     Kind
	subjects map[string]string
	subjJSON []byte // canonical JSON of subjects
	payload  []byte // canonical JSON
	cond     func(ctx context.Context, tx *sql.Tx) (bool, error)
	with     func(ctx context.Context, tx *sql.Tx) error
	after    func(ctx context.Context, tx *sql.Tx) error
	view     *View
	lazy     bool
	// then is Record.Then, prepared: a record and its Then are the chain
	// rec, rec.then.
	then *prepared
}

func prepare(r Record, maxPayload int) (prepared, error) {
	if !validName(string(r.Kind), MaxKindBytes) {
		return prepared{}, fmt.Errorf("%w: kind %q", ErrInvalidRecord, r.Kind)
	}
	if len(r.Subjects) > MaxSubjects {
		return prepared{}, fmt.Errorf("%w: %d subjects, at most %d", ErrInvalidRecord, len(r.Subjects), MaxSubjects)
	}
	subjects := make(map[string]string, len(r.Subjects))
	for k, v := range r.Subjects {
		if !validName(k, MaxSubjectKeyBytes) {
			return prepared{}, fmt.Errorf("%w: subject key %q", ErrInvalidRecord, k)
		}
		if v == "" || len(v) > MaxSubjectValueBytes {
			return prepared{}, fmt.Errorf("%w: subject %q: value must be 1 to %d bytes", ErrInvalidRecord, k, MaxSubjectValueBytes)
		}
		subjects[k] = v
	}
	subjJSON, err := CanonicalJSON(subjects)
	if err != nil {
		return prepared{}, fmt.Errorf("%w: subjects: %w", ErrInvalidRecord, err)
	}
	payload, err := CanonicalJSON(r.Payload)
	if err != nil {
		return prepared{}, fmt.Errorf("%w: payload: %w", ErrInvalidRecord, err)
	}
	if len(payload) > maxPayload {
		return prepared{}, fmt.Errorf("%w: payload is %d bytes, at most %d", ErrInvalidRecord, len(payload), maxPayload)
	}
	if !validView(r.View) {
		return prepared{}, fmt.Errorf("%w: a view needs its SQL, and arguments of nil, int64, int, string or []byte", ErrInvalidRecord)
	}
	p := prepared{kind: r.Kind, subjects: subjects, subjJSON: subjJSON, payload: payload, cond: r.If, with: r.With, after: r.After, view: r.View, lazy: r.Lazy}
	if r.Then != nil {
		if r.Then.If != nil || r.Then.Lazy || r.Then.Then != nil {
			return prepared{}, fmt.Errorf("%w: a record's Then has its own If, Lazy or Then", ErrInvalidRecord)
		}
		then, err := prepare(*r.Then, maxPayload)
		if err != nil {
			return prepared{}, fmt.Errorf("%w (its Then)", err)
		}
		p.then = &then
	}
	return p, nil
}

// hasher computes entry hashes, reusing its buffer across calls.
type hasher struct{ buf []byte }

// sum computes an entry's hash. The input, with integers big-endian and each
// variable-length field prefixed by its length as a uint32:
//
//	"github.com/harbormaster-dev/harbormaster/logbook/entry/v1\n"
//	seq            uint64
//	time           int64, Unix nanoseconds (UTC)
//	len(kind)      uint32, kind bytes
//	len(subjects)  uint32, subjects: canonical JSON object (string to string)
//	len(payload)   uint32, payload: canonical JSON, as stored
//	prev hash      32 bytes (raw, not hex)
//
// and the entry's hash is the SHA-256 of that, written as 64 lower-case hex
// digits.
func (h *hasher) sum(seq, timeNS int64, kind, subjects, payload []byte, prev *[32]byte) [32]byte {
	b := h.buf[:0]
	b = append(b, hashDomain...)
	b = binary.BigEndian.AppendUint64(b, uint64(seq))
	b = binary.BigEndian.AppendUint64(b, uint64(timeNS))
	b = binary.BigEndian.AppendUint32(b, uint32(len(kind)))
	b = append(b, kind...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(subjects)))
	b = append(b, subjects...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(payload)))
	b = append(b, payload...)
	b = append(b, prev[:]...)
	h.buf = b
	return sha256.Sum256(b)
}

// HashEntry recomputes e's hash from its Seq, Time, Kind, Subjects, Payload
// (taken byte for byte: it must be the canonical JSON the logbook stored) and
// PrevHash, with the encoding documented on the package. It ignores e.Hash;
// an entry is intact when HashEntry(e) == e.Hash.
func HashEntry(e Entry) (string, error) {
	prev, err := decodeHash(e.PrevHash)
	if err != nil {
		return "", fmt.Errorf("logbook: hash entry %d: prev hash: %w", e.Seq, err)
	}
	subj := e.Subjects
	if subj == nil {
		subj = map[string]string{}
	}
	subjJSON, err := CanonicalJSON(subj)
	if err != nil {
		return "", fmt.Errorf("logbook: hash entry %d: %w", e.Seq, err)
	}
	var h hasher
	sum := h.sum(e.Seq, e.Time.UnixNano(), []byte(e.Kind), subjJSON, e.Payload, &prev)
	return hex.EncodeToString(sum[:]), nil
}

var errBadHash = errors.New("not 64 lower-case hex digits")

func decodeHash(s string) ([32]byte, error) {
	var out [32]byte
	if err := decodeHashBytes(&out, []byte(s)); err != nil {
		return out, err
	}
	return out, nil
}

func decodeHashBytes(dst *[32]byte, s []byte) error {
	if len(s) != 64 {
		return errBadHash
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return errBadHash
		}
	}
	_, err := hex.Decode(dst[:], s)
	return err
}
