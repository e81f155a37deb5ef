package logbook

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/store"
)

// querier is what the read helpers need: *sql.DB or *sql.Tx.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

const entryCols = "e.seq, e.time_ns, e.kind, e.subjects, e.payload, e.prev_hash, e.hash"

type scanner interface{ Scan(dest ...any) error }

func scanEntry(s scanner) (Entry, error) {
	var e Entry
	var ns int64
	var subjects, payload, prev, hash []byte
	if err := s.Scan(&e.Seq, &ns, &e.Kind, &subjects, &payload, &prev, &hash); err != nil {
		return Entry{}, err
	}
	e.PrevHash, e.Hash = hex.EncodeToString(prev), hex.EncodeToString(hash)
	e.Time = time.Unix(0, ns).UTC()
	e.Payload = json.RawMessage(payload)
	if err := json.Unmarshal(subjects, &e.Subjects); err != nil {
		return Entry{}, fmt.Errorf("entry %d: subjects: %w", e.Seq, err)
	}
	if e.Subjects == nil {
		e.Subjects = map[string]string{}
	}
	return e, nil
}

// Head returns the seq and hash of the last entry: 0 and ZeroHash when the
// logbook is empty.
func (l *Logbook) Head(ctx context.Context) (int64, string, error) {
	if err := l.Visible(ctx); err != nil {
		return 0, "", fmt.Errorf("logbook: head: %w", err)
	}
	var seq int64
	var hash []byte
	err := l.st.ReadDB().QueryRowContext(ctx, "SELECT seq, hash FROM logbook_entries ORDER BY seq DESC LIMIT 1").Scan(&seq, &hash)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, ZeroHash, nil
	case err != nil:
		return 0, "", fmt.Errorf("logbook: head: %w", err)
	}
	return seq, hex.EncodeToString(hash), nil
}

// Get returns the entry seq, or ErrNotFound.
func (l *Logbook) Get(ctx context.Context, seq int64) (Entry, error) {
	if err := l.Visible(ctx); err != nil {
		return Entry{}, fmt.Errorf("logbook: get %d: %w", seq, err)
	}
	row := l.st.ReadDB().QueryRowContext(ctx, l.st.SQL("SELECT "+entryCols+" FROM logbook_entries e WHERE e.seq = ?"), seq)
	e, err := scanEntry(row)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return Entry{}, fmt.Errorf("logbook: get %d: %w", seq, ErrNotFound)
	case err != nil:
		return Entry{}, fmt.Errorf("logbook: get %d: %w", seq, err)
	}
	return e, nil
}

// Tail returns the last n entries, oldest first.
func (l *Logbook) Tail(ctx context.Context, n int) ([]Entry, error) {
	if n <= 0 {
		return nil, nil
	}
	if err := l.Visible(ctx); err != nil {
		return nil, fmt.Errorf("logbook: tail: %w", err)
	}
	rows, err := l.st.ReadDB().QueryContext(ctx, l.st.SQL("SELECT "+entryCols+" FROM logbook_entries e ORDER BY e.seq DESC LIMIT ?"), n)
	if err != nil {
		return nil, fmt.Errorf("logbook: tail: %w", err)
	}
	defer rows.Close()
	var out []Entry
	for rows.Next() {
		e, err := scanEntry(rows)
		if err != nil {
			return nil, fmt.Errorf("logbook: tail: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("logbook: tail: %w", err)
	}
	slices.Reverse(out)
	return out, nil
}

// Query selects entries for Iterate and Find. Zero fields select everything.
type Query struct {
	// From is the first seq to return (inclusive).
	From int64
	// Through, if positive, is the last seq to return (inclusive).
	Through int64
	// Kind, if set, keeps only entries of that kind.
	Kind Kind
	// SubjectKey and SubjectValue, if set (both), keep only entries about
	// that subject, e.g. ("request", "r-42"). Served by the subject index.
	SubjectKey, SubjectValue string
	// Limit, if positive, caps the number of entries.
	Limit int
}

func (q Query) sql(pg bool) (string, []any, error) {
	if q.Through > 0 && (q.SubjectKey != "" || q.SubjectValue != "") {
		return "", nil, errors.New("Through is for a query without a subject")
	}
	var b strings.Builder
	var args []any
	kind := func() {
		if q.Kind != "" {
			b.WriteString(" AND e.kind = ?")
			args = append(args, q.Kind)
		}
	}
	switch {
	case q.SubjectKey != "" && q.SubjectValue != "":
		// The index holds entries up to indexed_through; the entries past
		// it (the writer indexes them in batches) are matched on their
		// subjects field. One statement: one snapshot.
		b.WriteString("SELECT " + entryCols + " FROM logbook_subjects s JOIN logbook_entries e ON e.seq = s.seq" +
			" WHERE s.key = ? AND s.value = ? AND s.seq >= ? AND s.seq <= (SELECT indexed_through FROM logbook_index WHERE id = 1)")
		args = append(args, q.SubjectKey, q.SubjectValue, q.From)
		kind()
		b.WriteString(" UNION ALL SELECT " + entryCols + " FROM logbook_entries e" +
			" WHERE e.seq > COALESCE((SELECT indexed_through FROM logbook_index WHERE id = 1), 0) AND e.seq >= ?" +
			" AND " + subjectMatch(pg))
		if pg {
			args = append(args, q.From, subjectKey(q.SubjectKey), q.SubjectValue)
		} else {
			args = append(args, q.From, subjectPath(q.SubjectKey), q.SubjectValue)
		}
		kind()
		b.WriteString(" ORDER BY 1")
	case q.SubjectKey != "" || q.SubjectValue != "":
		return "", nil, errors.New("SubjectKey and SubjectValue go together")
	default:
		b.WriteString("SELECT " + entryCols + " FROM logbook_entries e WHERE e.seq >= ?")
		args = append(args, q.From)
		if q.Through > 0 {
			b.WriteString(" AND e.seq <= ?")
			args = append(args, q.Through)
		}
		kind()
		b.WriteString(" ORDER BY e.seq")
	}
	if q.Limit > 0 {
		b.WriteString(" LIMIT ?")
		args = append(args, q.Limit)
	}
	return b.String(), args, nil
}

// subjectMatch is the condition "the entry's subject (key) is (value)" on
// its stored subjects field, in each driver's JSON dialect: SQLite's
// json_extract takes a path, PostgreSQL's ->> a key.
func subjectMatch(pg bool) string {
	if pg {
		return "(e.subjects::jsonb ->> ?) = ?"
	}
	return "json_extract(e.subjects, ?) = ?"
}

// subjectKey is key for PostgreSQL's ->>; as subjectPath, a key the
// logbook would not have stored matches nothing.
func subjectKey(key string) string {
	if !validName(key, MaxSubjectKeyBytes) {
		return ""
	}
	return key
}

// subjectPath is the JSON path of subject key in an entry's subjects
// object. A key the logbook would not have stored becomes a path that
// matches nothing, as the index would.
func subjectPath(key string) string {
	if !validName(key, MaxSubjectKeyBytes) {
		return "$.\"\""
	}
	return "$.\"" + key + "\""
}

// Iterate calls fn for each entry q selects, in seq order, from one
// consistent snapshot. It stops at fn's first error and returns it.
func (l *Logbook) Iterate(ctx context.Context, q Query, fn func(Entry) error) error {
	if err := l.Visible(ctx); err != nil {
		return fmt.Errorf("logbook: iterate: %w", err)
	}
	query, args, err := q.sql(l.st.Driver() == store.Postgres)
	if err != nil {
		return fmt.Errorf("logbook: iterate: %w", err)
	}
	rows, err := l.st.ReadDB().QueryContext(ctx, l.st.SQL(query), args...)
	if err != nil {
		return fmt.Errorf("logbook: iterate: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		e, err := scanEntry(rows)
		if err != nil {
			return fmt.Errorf("logbook: iterate: %w", err)
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("logbook: iterate: %w", err)
	}
	return nil
}

// Find returns the entries q selects, in seq order.
func (l *Logbook) Find(ctx context.Context, q Query) ([]Entry, error) {
	var out []Entry
	err := l.Iterate(ctx, q, func(e Entry) error {
		out = append(out, e)
		return nil
	})
	return out, err
}

// Export writes the entries from seq fromSeq on as JSON lines, one Entry
// object per line, and returns how many it wrote. Payloads are written byte
// for byte as stored, so HashEntry of a decoded line reproduces its hash.
func (l *Logbook) Export(ctx context.Context, w io.Writer, fromSeq int64) (int64, error) {
	return l.exportRange(ctx, w, fromSeq, 0)
}

// exportRange is Export of the entries from..through (through 0: to the
// end).
func (l *Logbook) exportRange(ctx context.Context, w io.Writer, from, through int64) (int64, error) {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	var n int64
	err := l.Iterate(ctx, Query{From: from, Through: through}, func(e Entry) error {
		if err := enc.Encode(e); err != nil {
			return err
		}
		n++
		return nil
	})
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		return n, fmt.Errorf("logbook: export: %w", err)
	}
	return n, nil
}

// Checkpoints returns the stored checkpoints, smallest size first.
func (l *Logbook) Checkpoints(ctx context.Context) ([]Checkpoint, error) {
	cps, err := loadCheckpoints(ctx, l.st.ReadDB())
	if err != nil {
		return nil, fmt.Errorf("logbook: checkpoints: %w", err)
	}
	return cps, nil
}

// ExportCheckpoints writes the stored checkpoints as JSON lines (see
// ReadCheckpoints), so they can be kept outside the control plane's trust
// domain and given back to Verify later.
func (l *Logbook) ExportCheckpoints(ctx context.Context, w io.Writer) error {
	cps, err := loadCheckpoints(ctx, l.st.ReadDB())
	if err != nil {
		return fmt.Errorf("logbook: export checkpoints: %w", err)
	}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	for _, cp := range cps {
		if err := enc.Encode(cp); err != nil {
			return fmt.Errorf("logbook: export checkpoints: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("logbook: export checkpoints: %w", err)
	}
	return nil
}

func loadCheckpoints(ctx context.Context, q querier) ([]Checkpoint, error) {
	rows, err := q.QueryContext(ctx, "SELECT size, hash, time_ns, note FROM logbook_checkpoints ORDER BY size")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var cps []Checkpoint
	for rows.Next() {
		var cp Checkpoint
		var ns int64
		if err := rows.Scan(&cp.Size, &cp.Hash, &ns, &cp.Note); err != nil {
			return nil, err
		}
		cp.Time = time.Unix(0, ns).UTC()
		cps = append(cps, cp)
	}
	return cps, rows.Err()
}

func latestCheckpoint(ctx context.Context, q querier) (Checkpoint, error) {
	var cp Checkpoint
	var ns int64
	err := q.QueryRowContext(ctx, "SELECT size, hash, time_ns, note FROM logbook_checkpoints ORDER BY size DESC LIMIT 1").
		Scan(&cp.Size, &cp.Hash, &ns, &cp.Note)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("latest checkpoint: %w", err)
	}
	cp.Time = time.Unix(0, ns).UTC()
	return cp, nil
}
