package remote

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/harbormaster-dev/harbormaster/internal/marque"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// The calls, each POST /v1/targets/{target}/OP with a JSON body, answered
// 200 with an envelope (reply). Any other status is the server refusing
// the request before any Pilot saw it, or something that is not the
// server.
const (
	opCatalog         = "catalog"
	opPing            = "ping"
	opExecute         = "execute"
	opExecuteApproved = "execute-approved"
	opRehearse        = "rehearse"
	opPreview         = "preview"
	opDescribe        = "describe"
	opReceipt         = "receipt"
	opVoidReceipt     = "void-receipt"
	opXactStatus      = "xact-status"
	opPruneReceipts   = "prune-receipts"
)

// catalogHeader carries, on every answer, the digest of the catalog the
// Pilot checks against.
const catalogHeader = "Harbormaster-Catalog"

// Size limits. A request holds a statement and a signed bound (a
// delegation file is at most 1 MiB); an answer holds up to max_rows rows.
const (
	// MaxRequestBody bounds a request body on the server.
	MaxRequestBody = 4 << 20
	// MaxResponseBody bounds an answer on the client.
	MaxResponseBody = 64 << 20
)

// Error kinds in an envelope.
const (
	kindCommitUnknown  = "commit_unknown"
	kindNotPreviewable = "not_previewable"
	kindUnreachable    = "unreachable"
	kindError          = "error"
)

// executeBody is pilot.Request on the wire.
type executeBody struct {
	Marque       string `json:"marque"`
	SQL          string `json:"sql"`
	Bound        []byte `json:"bound"`
	ExpectBefore string `json:"expect_before"`
	ExpectRows   *int64 `json:"expect_rows"`
	ExpectAfter  string `json:"expect_after,omitempty"`
}

// approvedBody is pilot.ApprovedRequest on the wire.
type approvedBody struct {
	Marque   string `json:"marque"`
	SQL      string `json:"sql"`
	Approval []byte `json:"approval"`
}

// rehearseBody is Rehearse's, Describe's and Preview's arguments.
type rehearseBody struct {
	SQL       string       `json:"sql"`
	Bound     []byte       `json:"bound,omitempty"`
	Auth      *marque.Auth `json:"auth,omitempty"`
	Principal string       `json:"principal,omitempty"`
	Path      string       `json:"path,omitempty"`
}

// receiptBody is Receipt's, VoidReceipt's and XactStatus's arguments.
type receiptBody struct {
	MarqueID  string `json:"marque_id,omitempty"`
	RequestID string `json:"request_id,omitempty"`
	Principal string `json:"principal,omitempty"`
	TxID      string `json:"txid,omitempty"`
	// BeforeNS is PruneReceipts' time, Unix nanoseconds.
	BeforeNS int64 `json:"before_ns,omitempty"`
}

// reply is every answer's envelope: exactly one of its parts is set (or
// none, for ping).
type reply struct {
	Result  *wireResult     `json:"result,omitempty"`
	Report  json.RawMessage `json:"report,omitempty"`
	Receipt *wireReceipt    `json:"receipt,omitempty"`
	Status  *string         `json:"status,omitempty"`
	Catalog *wireCatalog    `json:"catalog,omitempty"`
	Session *wireSession    `json:"session,omitempty"`
	Error   *wireError      `json:"error,omitempty"`
}

// received is reply as the client reads it.
type received struct {
	Result  *receivedResult `json:"result,omitempty"`
	Report  json.RawMessage `json:"report,omitempty"`
	Receipt *wireReceipt    `json:"receipt,omitempty"`
	Status  *string         `json:"status,omitempty"`
	Catalog *wireCatalog    `json:"catalog,omitempty"`
	Session *wireSession    `json:"session,omitempty"`
	Error   *wireError      `json:"error,omitempty"`
}

type wireReceipt struct {
	Found bool  `json:"found"`
	Rows  int64 `json:"rows"`
}

type wireError struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
	// Code is a savepoint error's SQLSTATE (kind savepoint).
	Code string `json:"code,omitempty"`
}

// wireCatalog is a catalog: its search path and tables.
type wireCatalog struct {
	Digest     string           `json:"digest"`
	SearchPath []string         `json:"search_path"`
	Tables     []sqlcheck.Table `json:"tables"`
}

// encodeCatalog is the wire form of cat, with the digest of its tables
// and search path.
func encodeCatalog(cat *sqlcheck.Catalog) *wireCatalog {
	w := &wireCatalog{SearchPath: cat.SearchPath(), Tables: []sqlcheck.Table{}}
	for _, t := range cat.Tables() {
		w.Tables = append(w.Tables, sqlcheck.Table{Name: t.Name, Columns: t.Columns, EstimatedRows: t.EstimatedRows, Constraints: t.Constraints})
	}
	js, _ := json.Marshal(struct {
		SearchPath []string         `json:"search_path"`
		Tables     []sqlcheck.Table `json:"tables"`
	}{w.SearchPath, w.Tables})
	sum := sha256.Sum256(js)
	w.Digest = hex.EncodeToString(sum[:])
	return w
}

func (w *wireCatalog) catalog() (*sqlcheck.Catalog, error) {
	if w.Digest == "" || len(w.SearchPath) == 0 {
		return nil, errors.New("the catalog has no digest or search path")
	}
	return sqlcheck.NewCatalog(w.Tables, w.SearchPath)
}

// wireResult is a pilot.Result as the server sends it: every field, none
// omitted, so nil and empty slices stay apart. Columns are objects (name
// and type) and each row an array of values in their order. Before issue
// 23, columns were names with "column_types" beside them and each row an
// object keyed by name. The protocol has no version: across a serve and
// a pilot process on either side of that change, a result with columns
// does not decode and its call fails (Execute's as ErrCommitUnknown,
// settled from the receipt); none is misread. Upgrade them together.
type wireResult struct {
	Outcome      pilot.Outcome    `json:"outcome"`
	Reasons      []string         `json:"reasons"`
	Code         string           `json:"code"`
	RowsAffected int64            `json:"rows_affected"`
	Columns      []pilot.Column   `json:"columns"`
	ParamTypes   []uint32         `json:"param_types"`
	Rows         [][]any          `json:"rows"`
	Truncated    bool             `json:"truncated"`
	TxID         string           `json:"txid"`
	MarqueID     string           `json:"marque_id"`
	ExecutedSQL  string           `json:"executed_sql"`
	ExecutedArgs []any            `json:"executed_args"`
	Rehearsal    *pilot.Rehearsal `json:"rehearsal"`
	Detail       string           `json:"detail"`
}

// receivedResult is the same as the client reads it: values stay JSON.
type receivedResult struct {
	Outcome      pilot.Outcome       `json:"outcome"`
	Reasons      []string            `json:"reasons"`
	Code         string              `json:"code"`
	RowsAffected int64               `json:"rows_affected"`
	Columns      []pilot.Column      `json:"columns"`
	ParamTypes   []uint32            `json:"param_types"`
	Rows         [][]json.RawMessage `json:"rows"`
	Truncated    bool                `json:"truncated"`
	TxID         string              `json:"txid"`
	MarqueID     string              `json:"marque_id"`
	ExecutedSQL  string              `json:"executed_sql"`
	ExecutedArgs []json.RawMessage   `json:"executed_args"`
	Rehearsal    *receivedRehearsal  `json:"rehearsal"`
	Detail       string              `json:"detail"`
}

// receivedRehearsal is a pilot.Rehearsal as the client reads it: its row
// images stay JSON.
type receivedRehearsal struct {
	Kind            string                       `json:"kind"`
	RowsReached     int64                        `json:"rows_reached"`
	Before          []map[string]json.RawMessage `json:"before"`
	After           []map[string]json.RawMessage `json:"after"`
	ImagesTruncated bool                         `json:"images_truncated"`
	ExecutedSQL     string                       `json:"executed_sql"`
	BeforeDigest    string                       `json:"before_digest"`
	AfterDigest     string                       `json:"after_digest"`
}

func (r *receivedRehearsal) rehearsal() *pilot.Rehearsal {
	if r == nil {
		return nil
	}
	return &pilot.Rehearsal{Kind: r.Kind, RowsReached: r.RowsReached, Before: rawRows(r.Before), After: rawRows(r.After),
		ImagesTruncated: r.ImagesTruncated, ExecutedSQL: r.ExecutedSQL, BeforeDigest: r.BeforeDigest, AfterDigest: r.AfterDigest}
}

func encodeResult(r *pilot.Result) *wireResult {
	return &wireResult{Outcome: r.Outcome, Reasons: r.Reasons, Code: r.Code, RowsAffected: r.RowsAffected,
		Columns: r.Columns, ParamTypes: r.ParamTypes, Rows: r.Rows, Truncated: r.Truncated, TxID: r.TxID, MarqueID: r.MarqueID,
		ExecutedSQL: r.ExecutedSQL, ExecutedArgs: r.ExecutedArgs, Rehearsal: r.Rehearsal, Detail: r.Detail}
}

// result turns a received result into a pilot.Result whose JSON is the
// JSON the Pilot's own Result marshals to. A row without exactly one
// value per column is no result the Pilot sends: an error.
func (r *receivedResult) result() (*pilot.Result, error) {
	for i, row := range r.Rows {
		if len(row) != len(r.Columns) {
			return nil, fmt.Errorf("row %d has %d values for %d columns", i, len(row), len(r.Columns))
		}
	}
	return &pilot.Result{Outcome: r.Outcome, Reasons: r.Reasons, Code: r.Code, RowsAffected: r.RowsAffected,
		Columns: r.Columns, ParamTypes: r.ParamTypes, Rows: rawValueRows(r.Rows), Truncated: r.Truncated, TxID: r.TxID, MarqueID: r.MarqueID,
		ExecutedSQL: r.ExecutedSQL, ExecutedArgs: rawValues(r.ExecutedArgs), Rehearsal: r.Rehearsal.rehearsal(), Detail: r.Detail}, nil
}

var jsonNull = []byte("null")

// rawValue is a JSON value kept as its bytes; null is nil, as the Pilot
// had it.
func rawValue(m json.RawMessage) any {
	if bytes.Equal(m, jsonNull) {
		return nil
	}
	return m
}

func rawValues(vs []json.RawMessage) []any {
	if vs == nil {
		return nil
	}
	out := make([]any, len(vs))
	for i, v := range vs {
		out[i] = rawValue(v)
	}
	return out
}

// rawValueRows are a result's rows, each value kept as its JSON.
func rawValueRows(rows [][]json.RawMessage) [][]any {
	if rows == nil {
		return nil
	}
	out := make([][]any, len(rows))
	for i, row := range rows {
		out[i] = make([]any, len(row))
		for j, v := range row {
			out[i][j] = rawValue(v)
		}
	}
	return out
}

func rawRows(rows []map[string]json.RawMessage) []map[string]any {
	if rows == nil {
		return nil
	}
	out := make([]map[string]any, len(rows))
	for i, row := range rows {
		if row == nil {
			continue
		}
		m := make(map[string]any, len(row))
		for k, v := range row {
			m[k] = rawValue(v)
		}
		out[i] = m
	}
	return out
}

// Error is an error the remote Pilot reported: the same failure the
// Pilot's own method returned, with its text. It matches
// pilot.ErrCommitUnknown or pilot.ErrNotPreviewable with errors.Is where
// the Pilot's did.
type Error struct {
	// Target and Op name the call.
	Target, Op string
	// Kind is commit_unknown, not_rehearsable, unreachable or error.
	Kind string
	// Message is the Pilot's error text (for humans and logs, never for
	// agents: it may quote the target).
	Message string
	// Code is a savepoint error's SQLSTATE.
	Code string
}

func (e *Error) Error() string {
	return fmt.Sprintf("pilot remote %s: %s: %s", e.Target, e.Op, e.Message)
}

// Unwrap is the sentinel the kind stands for.
func (e *Error) Unwrap() error {
	switch e.Kind {
	case kindCommitUnknown:
		return pilot.ErrCommitUnknown
	case kindNotPreviewable:
		return pilot.ErrNotPreviewable
	case kindUnreachable:
		return pilot.ErrUnreachable
	}
	return nil
}

// errorKind classifies a Pilot error for the wire.
func errorKind(err error) string {
	switch {
	case errors.Is(err, pilot.ErrCommitUnknown):
		return kindCommitUnknown
	case errors.Is(err, pilot.ErrNotPreviewable):
		return kindNotPreviewable
	case errors.Is(err, pilot.ErrUnreachable):
		return kindUnreachable
	}
	return kindError
}
