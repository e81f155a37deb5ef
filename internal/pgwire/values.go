package pgwire

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/harbormaster-dev/harbormaster/internal/pgtext"
)

// The Pilot answers rows as JSON-ready values (pilot.jsonValue: numbers,
// strings, RFC 3339 times, raw JSON for numerics, bytes), in this process
// or decoded from JSON from a remote Pilot. textValue renders one in
// PostgreSQL's text output format for its column's type; binary formats
// are made from that text by pgtype's codecs.

const (
	tsLayout   = "2006-01-02 15:04:05.999999"
	tstzLayout = "2006-01-02 15:04:05.999999-07"
)

// textValue renders v as PostgreSQL's text output of type oid; ok false
// for NULL.
func textValue(oid uint32, v any) (string, bool) {
	if v == nil {
		return "", false
	}
	if r, ok := v.(rawText); ok {
		return string(r), true
	}
	if t, ok := paramTypes[oid]; ok && t.array {
		if l, ok := v.([]any); ok {
			return arrayText(t.elem, l), true
		}
	}
	if oid == oidInterval || oid == oidTime {
		// pilot.jsonValue carries these as pgtype's structs in JSON.
		if s, ok := pgtypeText(oid, v); ok {
			return s, true
		}
	}
	switch x := v.(type) {
	case bool:
		if x {
			return "t", true
		}
		return "f", true
	case int16:
		return strconv.FormatInt(int64(x), 10), true
	case int32:
		return strconv.FormatInt(int64(x), 10), true
	case int64:
		return strconv.FormatInt(x, 10), true
	case int:
		return strconv.Itoa(x), true
	case float32:
		return pgtext.Float(float64(x), 32), true
	case float64:
		switch oid {
		case oidInt2, oidInt4, oidInt8:
			if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
				return strconv.FormatInt(int64(x), 10), true
			}
		case oidFloat4:
			return pgtext.Float(x, 32), true
		case oidNumeric:
			return strconv.FormatFloat(x, 'f', -1, 64), true
		}
		return pgtext.Float(x, 64), true
	case json.Number:
		return x.String(), true
	case json.RawMessage:
		if oid == oidJSON || oid == oidJSONB {
			// A json or jsonb value's own text (pilot.rawJSON): a string
			// scalar keeps its quotes, as PostgreSQL prints it.
			return string(x), true
		}
		var s string
		if len(x) > 0 && x[0] == '"' && json.Unmarshal(x, &s) == nil {
			return s, true
		}
		return string(x), true
	case time.Time:
		return timeText(oid, x), true
	case []byte:
		if oid == oidBytea {
			return `\x` + hex.EncodeToString(x), true
		}
		return string(x), true
	case string:
		switch oid {
		case oidBytea:
			// From a remote Pilot: JSON carried the bytes as base64.
			if b, err := base64.StdEncoding.DecodeString(x); err == nil {
				return `\x` + hex.EncodeToString(b), true
			}
		case oidTimestamptz, oidTimestamp, oidDate:
			if t, err := time.Parse(time.RFC3339Nano, x); err == nil {
				return timeText(oid, t), true
			}
		case oidJSON, oidJSONB:
			// pgx decodes a JSON string scalar to a Go string.
			b, _ := json.Marshal(x)
			return string(b), true
		}
		return x, true
	case map[string]any, []any:
		b, err := json.Marshal(x)
		if err != nil {
			return fmt.Sprint(x), true
		}
		return string(b), true
	}
	return fmt.Sprint(v), true
}

// pgtypeText renders an interval or a time that arrives as the JSON of
// pgtype's struct (raw, or decoded from a remote Pilot's answer).
func pgtypeText(oid uint32, v any) (string, bool) {
	var raw []byte
	switch x := v.(type) {
	case json.RawMessage:
		raw = x
	case map[string]any:
		raw, _ = json.Marshal(x)
	default:
		return "", false
	}
	if oid == oidInterval {
		var iv pgtype.Interval
		if json.Unmarshal(raw, &iv) != nil || !iv.Valid {
			return "", false
		}
		return pgtext.Interval(iv), true
	}
	var tm pgtype.Time
	if json.Unmarshal(raw, &tm) != nil || !tm.Valid {
		return "", false
	}
	return pgtext.Clock(tm.Microseconds), true
}

func timeText(oid uint32, t time.Time) string {
	switch oid {
	case oidDate:
		return t.Format("2006-01-02")
	case oidTimestamp:
		return t.Format(tsLayout)
	}
	// The session's TimeZone is UTC.
	return t.UTC().Format(tstzLayout)
}

// arrayText renders a one-dimensional array literal.
func arrayText(elem uint32, l []any) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, e := range l {
		if i > 0 {
			b.WriteByte(',')
		}
		if nested, ok := e.([]any); ok {
			b.WriteString(arrayText(elem, nested))
			continue
		}
		s, ok := textValue(elem, e)
		if !ok {
			b.WriteString("NULL")
			continue
		}
		if s == "" || strings.EqualFold(s, "null") || strings.ContainsAny(s, "{},\"\\ \t\n\r") {
			s = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
		}
		b.WriteString(s)
	}
	b.WriteByte('}')
	return b.String()
}

// binaryValue turns a value's text form into its binary form with
// pgtype's codec for oid; ok false when pgtype has no binary codec for it.
func binaryValue(m *pgtype.Map, oid uint32, text string) ([]byte, bool) {
	t, ok := m.TypeForOID(oid)
	if !ok {
		return nil, false
	}
	v, err := t.Codec.DecodeValue(m, oid, pgtype.TextFormatCode, []byte(text))
	if err != nil {
		return nil, false
	}
	if at, ok := paramTypes[oid]; ok && at.array {
		if l, ok := v.([]any); ok {
			for i := range l {
				l[i] = infinite(at.elem, l[i])
			}
		}
	}
	b, err := m.Encode(oid, pgtype.BinaryFormatCode, infinite(oid, v), nil)
	if err != nil || b == nil {
		return nil, false
	}
	return b, true
}

// infinite makes a date's or timestamp's infinity, which the codecs
// decode as a bare InfinityModifier they cannot encode, the value they
// encode.
func infinite(oid uint32, v any) any {
	inf, ok := v.(pgtype.InfinityModifier)
	if !ok {
		return v
	}
	switch oid {
	case oidDate:
		return pgtype.Date{InfinityModifier: inf, Valid: true}
	case oidTimestamp:
		return pgtype.Timestamp{InfinityModifier: inf, Valid: true}
	case oidTimestamptz:
		return pgtype.Timestamptz{InfinityModifier: inf, Valid: true}
	}
	return v
}

// canBinary reports whether a column of type oid can be sent in binary.
func canBinary(m *pgtype.Map, oid uint32) bool {
	t, ok := m.TypeForOID(oid)
	return ok && t.Codec.FormatSupported(pgtype.BinaryFormatCode)
}

// paramText reads a bound parameter as text: as sent in text format, or
// decoded from binary with pgtype's codec for its declared type.
func paramText(m *pgtype.Map, i int, oid uint32, format int16, raw []byte) (string, *wireError) {
	if format == pgtype.TextFormatCode {
		s := string(raw)
		return s, checkText(i, s)
	}
	if oid == 0 {
		return "", errorf(stateDatatypeMismatch, fmt.Sprintf("parameter $%d is in binary format but has no declared type: declare its type in Parse, or send it as text", i+1))
	}
	if s, werr, ok := jsonParamText(m, i, oid, raw); ok {
		return s, werr
	}
	t, ok := m.TypeForOID(oid)
	if !ok {
		return "", errorf(stateDatatypeMismatch, fmt.Sprintf("parameter $%d: type OID %d cannot be read in binary format", i+1, oid))
	}
	v, err := t.Codec.DecodeValue(m, oid, pgtype.BinaryFormatCode, raw)
	if err != nil {
		return "", errorf(stateInvalidText, fmt.Sprintf("parameter $%d is not a valid binary %s: %v", i+1, paramTypes[oid].name, err))
	}
	b, err := m.Encode(oid, pgtype.TextFormatCode, v, nil)
	if err != nil {
		return "", errorf(stateInvalidText, fmt.Sprintf("parameter $%d cannot be rendered as text: %v", i+1, err))
	}
	s := string(b)
	return s, checkText(i, s)
}

// jsonParamText reads a binary json or jsonb parameter, or an array of
// them, as the exact text the client sent (ok false for other types).
// Their codecs would decode the JSON into Go values, numbers into
// float64, and encode it again: a number past float64's precision would
// change in what the statement writes.
func jsonParamText(m *pgtype.Map, i int, oid uint32, raw []byte) (string, *wireError, bool) {
	bad := func(err error) (string, *wireError, bool) {
		return "", errorf(stateInvalidText, fmt.Sprintf("parameter $%d is not a valid binary %s: %v", i+1, paramTypes[oid].name, err)), true
	}
	switch oid {
	case oidJSON:
		s := string(raw)
		return s, checkText(i, s), true
	case oidJSONB:
		if len(raw) == 0 || raw[0] != 1 {
			return bad(fmt.Errorf("jsonb's binary form starts with version byte 1"))
		}
		s := string(raw[1:])
		return s, checkText(i, s), true
	case 199, 3807: // json[], jsonb[]
		var elems []*string
		if err := m.Scan(oid, pgtype.BinaryFormatCode, raw, &elems); err != nil {
			return bad(err)
		}
		var b strings.Builder
		b.WriteByte('{')
		for j, e := range elems {
			if j > 0 {
				b.WriteByte(',')
			}
			if e == nil {
				b.WriteString("NULL")
				continue
			}
			b.WriteString(`"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(*e) + `"`)
		}
		b.WriteByte('}')
		s := b.String()
		return s, checkText(i, s), true
	}
	return "", nil, false
}
