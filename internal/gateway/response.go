package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// Keys are the names a Response's JSON gives its columns, in order: each
// column's own name, except that a name an earlier column holds takes the
// first suffix _2, _3, ... that no column of the result has, so that each
// row can be an object and no value is lost (SELECT o.id, c.id ...
// answers "id" and "id_2"). PostgreSQL's dictionary-row clients (psycopg's
// dict_row, RealDictCursor) keep the last of the values instead.
func (r *Response) Keys() []string {
	return objectKeys(r.Columns)
}

func objectKeys(cols []Column) []string {
	if cols == nil {
		return nil
	}
	taken := make(map[string]bool, len(cols))
	for _, c := range cols {
		taken[c.Name] = true
	}
	out := make([]string, len(cols))
	seen := make(map[string]bool, len(cols))
	for i, c := range cols {
		name := c.Name
		for n := 2; seen[name]; n++ {
			if cand := c.Name + "_" + strconv.Itoa(n); !seen[cand] && !taken[cand] {
				name = cand
			}
		}
		seen[name], out[i] = true, name
	}
	return out
}

// RowObject is a row as the JSON object it marshals to: its keys and
// values in column order.
type RowObject struct {
	keys   []string
	values []any
}

// MarshalJSON is the object, in JSON's compact form.
func (o RowObject) MarshalJSON() ([]byte, error) {
	if len(o.values) != len(o.keys) {
		return nil, fmt.Errorf("gateway: a row of %d values for %d columns", len(o.values), len(o.keys))
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kj, _ := json.Marshal(k)
		vj, err := json.Marshal(o.values[i])
		if err != nil {
			return nil, fmt.Errorf("gateway: column %s: %w", k, err)
		}
		b.Write(kj)
		b.WriteByte(':')
		b.Write(vj)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// ResponseJSON is a Response as the HTTP API and the MCP tool give it
// (docs/api.md, openapi.json's StatementResponse): "columns" are the
// Response's Keys, each row an object in column order, "rows" always an
// array.
type ResponseJSON struct {
	Outcome      string      `json:"outcome"`
	RequestID    string      `json:"request_id"`
	RowsAffected int64       `json:"rows_affected"`
	Columns      []string    `json:"columns,omitempty"`
	Rows         []RowObject `json:"rows"`
	Truncated    bool        `json:"truncated"`
	Reasons      []string    `json:"reasons"`
	Path         string      `json:"path,omitempty"`
	DelegationID string      `json:"delegation_id,omitempty"`
}

// JSON is r as the HTTP API and the MCP tool give it.
func (r *Response) JSON() *ResponseJSON {
	out := &ResponseJSON{Outcome: r.Outcome, RequestID: r.RequestID, RowsAffected: r.RowsAffected, Columns: r.Keys(),
		Rows: make([]RowObject, len(r.Rows)), Truncated: r.Truncated, Reasons: r.Reasons, Path: r.Path, DelegationID: r.DelegationID}
	for i, row := range r.Rows {
		out.Rows[i] = RowObject{keys: out.Columns, values: row}
	}
	return out
}

// MarshalJSON is r.JSON()'s. (A struct that embeds a Response takes its
// MarshalJSON and UnmarshalJSON for its whole self: name the field.)
func (r Response) MarshalJSON() ([]byte, error) {
	return json.Marshal(r.JSON())
}

// UnmarshalJSON reads an answer MarshalJSON wrote (the MCP stdio server
// reads the HTTP API's): its columns are named by their keys, without
// types, and each row's values are in their order. A row whose keys are
// not the columns' is an error.
func (r *Response) UnmarshalJSON(b []byte) error {
	var in struct {
		ResponseJSON
		Rows []map[string]any `json:"rows"`
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	*r = Response{Outcome: in.Outcome, RequestID: in.RequestID, RowsAffected: in.RowsAffected, Truncated: in.Truncated,
		Reasons: in.Reasons, Path: in.Path, DelegationID: in.DelegationID}
	if in.Columns != nil {
		r.Columns = make([]Column, len(in.Columns))
		for i, name := range in.Columns {
			r.Columns[i].Name = name
		}
	}
	if in.Rows != nil {
		r.Rows = make([][]any, len(in.Rows))
	}
	for i, obj := range in.Rows {
		if len(obj) != len(in.Columns) {
			return fmt.Errorf("gateway: response: row %d has %d values for %d columns", i, len(obj), len(in.Columns))
		}
		row := make([]any, len(in.Columns))
		for j, k := range in.Columns {
			v, ok := obj[k]
			if !ok {
				return fmt.Errorf("gateway: response: row %d has no column %q", i, k)
			}
			row[j] = v
		}
		r.Rows[i] = row
	}
	return nil
}
