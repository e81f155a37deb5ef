package logbook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// maxJSONDepth bounds nesting in CanonicalJSON, so hostile input cannot
// exhaust the stack.
const maxJSONDepth = 256

// ErrCanonicalJSON is returned (wrapped) by CanonicalJSON for input it cannot
// put in canonical form: invalid JSON, a duplicate object key, a number
// outside float64's range, nesting deeper than 256.
var ErrCanonicalJSON = errors.New("logbook: not canonicalizable JSON")

// CanonicalJSON encodes v as canonical JSON, close to RFC 8785 (JCS):
//
//   - v is first marshalled with encoding/json (struct tags and Marshalers
//     apply; a json.RawMessage is taken as the JSON it holds);
//   - no insignificant whitespace;
//   - object members sorted by key, compared as UTF-16 code units (RFC 8785);
//     a duplicate key is an error, not "last one wins";
//   - strings escape only '"', '\\' and control characters (\b \t \n \f \r,
//     else \u00xx); everything else, including '<', '>', '&' and non-ASCII,
//     is written as UTF-8; invalid UTF-8 becomes U+FFFD;
//   - numbers: an integer literal (no fraction, no exponent) is kept digit
//     for digit whatever its size, so int64 and uint64 identifiers round-trip
//     exactly ("-0" becomes "0"); any other number is parsed as a float64 and
//     written in the shortest form that parses back to the same float64, as
//     ECMAScript formats it (1.0 becomes 1, 1e-7 stays 1e-7). This departs
//     from RFC 8785 only for integers beyond 2^53, which JCS would round.
//
// The same value always yields the same bytes, and CanonicalJSON is
// idempotent: CanonicalJSON(CanonicalJSON(v)) == CanonicalJSON(v).
func CanonicalJSON(v any) ([]byte, error) {
	switch v := v.(type) {
	case json.RawMessage:
		if v == nil {
			return []byte("null"), nil
		}
		return canonicalize(v)
	case map[string]string:
		if out := canonicalStringMap(v); out != nil {
			return out, nil
		}
	}
	return appendCanonical(make([]byte, 0, 256), v, 0)
}

// appendCanonical appends v's canonical JSON to dst. The types a payload is
// usually made of (maps of string to any, slices, strings, integers, bools)
// are written directly; anything else (structs, named types, Marshalers,
// floats) goes through encoding/json and canonicalize, value by value. Both
// give the same bytes: canonical form is built member by member, and
// canonicalize normalizes whatever encoding/json escapes differently.
func appendCanonical(dst []byte, v any, depth int) ([]byte, error) {
	if depth > maxJSONDepth {
		return nil, fmt.Errorf("%w: nested deeper than %d", ErrCanonicalJSON, maxJSONDepth)
	}
	switch v := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case string:
		return appendString(dst, v), nil
	case bool:
		return strconv.AppendBool(dst, v), nil
	case int:
		return strconv.AppendInt(dst, int64(v), 10), nil
	case int64:
		return strconv.AppendInt(dst, v, 10), nil
	case int32:
		return strconv.AppendInt(dst, int64(v), 10), nil
	case uint64:
		return strconv.AppendUint(dst, v, 10), nil
	case *int:
		if v == nil {
			return append(dst, "null"...), nil
		}
		return strconv.AppendInt(dst, int64(*v), 10), nil
	case json.RawMessage:
		if v == nil {
			return append(dst, "null"...), nil
		}
		return canonicalizeAppend(dst, v, depth)
	case map[string]any:
		if v == nil {
			return append(dst, "null"...), nil
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			if !utf8.ValidString(k) {
				return marshalCanonical(dst, v, depth) // two invalid keys may print alike
			}
			keys = append(keys, k)
		}
		slices.SortFunc(keys, compareUTF16)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, k)
			dst = append(dst, ':')
			var err error
			if dst, err = appendCanonical(dst, v[k], depth+1); err != nil {
				return nil, err
			}
		}
		return append(dst, '}'), nil
	case map[string]string:
		if out := canonicalStringMap(v); out != nil {
			return append(dst, out...), nil
		}
	case []any:
		return appendCanonicalSlice(dst, v, depth)
	case []string:
		return appendCanonicalSlice(dst, v, depth)
	case []map[string]any:
		return appendCanonicalSlice(dst, v, depth)
	}
	return marshalCanonical(dst, v, depth)
}

func appendCanonicalSlice[T any](dst []byte, s []T, depth int) ([]byte, error) {
	if s == nil {
		return append(dst, "null"...), nil // as encoding/json writes a nil slice
	}
	dst = append(dst, '[')
	for i := range s {
		if i > 0 {
			dst = append(dst, ',')
		}
		var err error
		if dst, err = appendCanonical(dst, any(s[i]), depth+1); err != nil {
			return nil, err
		}
	}
	return append(dst, ']'), nil
}

// marshalCanonical appends v's canonical JSON by way of encoding/json.
func marshalCanonical(dst []byte, v any, depth int) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("logbook: canonical json: %w", err)
	}
	return canonicalizeAppend(dst, raw, depth)
}

func canonicalize(raw []byte) ([]byte, error) {
	return canonicalizeAppend(make([]byte, 0, len(raw)), raw, 0)
}

// canonicalizeAppend appends raw's canonical form to dst; depth is how deep
// raw sits in the value being written.
func canonicalizeAppend(dst, raw []byte, depth int) ([]byte, error) {
	p := canonParser{data: raw}
	out, err := p.value(dst, depth)
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos != len(p.data) {
		return nil, p.errorf("data after the value")
	}
	return out, nil
}

// canonicalStringMap is CanonicalJSON for the common map[string]string,
// without the round trip through encoding/json.
func canonicalStringMap(m map[string]string) []byte {
	if m == nil {
		return []byte("null")
	}
	keys := make([]string, 0, len(m))
	n := 2
	for k, v := range m {
		if !utf8.ValidString(k) {
			return nil // two invalid keys may print alike: the general path checks
		}
		keys = append(keys, k)
		n += len(k) + len(v) + 6
	}
	slices.SortFunc(keys, compareUTF16)
	dst := make([]byte, 0, n)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, k)
		dst = append(dst, ':')
		dst = appendString(dst, m[k])
	}
	return append(dst, '}')
}

// canonParser parses RFC 8259 JSON and writes it in canonical form.
type canonParser struct {
	data []byte
	pos  int
}

func (p *canonParser) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: offset %d: %s", ErrCanonicalJSON, p.pos, fmt.Sprintf(format, args...))
}

func (p *canonParser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *canonParser) value(dst []byte, depth int) ([]byte, error) {
	if depth > maxJSONDepth {
		return nil, p.errorf("nested deeper than %d", maxJSONDepth)
	}
	p.skipSpace()
	if p.pos >= len(p.data) {
		return nil, p.errorf("unexpected end")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object(dst, depth)
	case c == '[':
		return p.array(dst, depth)
	case c == '"':
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		return appendString(dst, s), nil
	case c == 't':
		return p.literal(dst, "true")
	case c == 'f':
		return p.literal(dst, "false")
	case c == 'n':
		return p.literal(dst, "null")
	case c == '-' || '0' <= c && c <= '9':
		lit, err := p.number()
		if err != nil {
			return nil, err
		}
		return appendNumber(dst, lit)
	}
	return nil, p.errorf("unexpected %q", p.data[p.pos])
}

func (p *canonParser) literal(dst []byte, lit string) ([]byte, error) {
	if !bytes.HasPrefix(p.data[p.pos:], []byte(lit)) {
		return nil, p.errorf("invalid literal")
	}
	p.pos += len(lit)
	return append(dst, lit...), nil
}

type member struct {
	key        []byte
	start, end int // the canonical value in the object's buffer
}

func (p *canonParser) object(dst []byte, depth int) ([]byte, error) {
	p.pos++ // '{'
	var members []member
	var vals []byte
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		return append(dst, '{', '}'), nil
	}
	for {
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return nil, p.errorf("object key is not a string")
		}
		key, err := p.str()
		if err != nil {
			return nil, err
		}
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return nil, p.errorf("missing ':'")
		}
		p.pos++
		start := len(vals)
		if vals, err = p.value(vals, depth+1); err != nil {
			return nil, err
		}
		members = append(members, member{key, start, len(vals)})
		p.skipSpace()
		if p.pos >= len(p.data) {
			return nil, p.errorf("unexpected end in object")
		}
		c := p.data[p.pos]
		p.pos++
		if c == '}' {
			break
		}
		if c != ',' {
			return nil, p.errorf("expected ',' or '}'")
		}
	}
	slices.SortFunc(members, func(a, b member) int { return compareUTF16(a.key, b.key) })
	dst = append(dst, '{')
	for i, m := range members {
		if i > 0 {
			if bytes.Equal(m.key, members[i-1].key) {
				return nil, fmt.Errorf("%w: duplicate key %q", ErrCanonicalJSON, m.key)
			}
			dst = append(dst, ',')
		}
		dst = appendString(dst, m.key)
		dst = append(dst, ':')
		dst = append(dst, vals[m.start:m.end]...)
	}
	return append(dst, '}'), nil
}

func (p *canonParser) array(dst []byte, depth int) ([]byte, error) {
	p.pos++ // '['
	dst = append(dst, '[')
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		return append(dst, ']'), nil
	}
	for i := 0; ; i++ {
		if i > 0 {
			dst = append(dst, ',')
		}
		var err error
		if dst, err = p.value(dst, depth+1); err != nil {
			return nil, err
		}
		p.skipSpace()
		if p.pos >= len(p.data) {
			return nil, p.errorf("unexpected end in array")
		}
		c := p.data[p.pos]
		p.pos++
		if c == ']' {
			return append(dst, ']'), nil
		}
		if c != ',' {
			return nil, p.errorf("expected ',' or ']'")
		}
	}
}

// str parses a string at p.pos and returns its bytes, unescaped. Without
// escapes the result aliases the input.
func (p *canonParser) str() ([]byte, error) {
	p.pos++ // '"'
	start := p.pos
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		switch {
		case c == '"':
			s := p.data[start:p.pos]
			p.pos++
			return validUTF8(s), nil
		case c == '\\':
			return p.strEscaped(start)
		case c < 0x20:
			return nil, p.errorf("control character in string")
		}
		p.pos++
	}
	return nil, p.errorf("unterminated string")
}

func (p *canonParser) strEscaped(start int) ([]byte, error) {
	out := append([]byte(nil), p.data[start:p.pos]...)
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		switch {
		case c == '"':
			p.pos++
			return validUTF8(out), nil
		case c < 0x20:
			return nil, p.errorf("control character in string")
		case c != '\\':
			out = append(out, c)
			p.pos++
			continue
		}
		p.pos++ // '\\'
		if p.pos >= len(p.data) {
			break
		}
		e := p.data[p.pos]
		p.pos++
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return nil, p.errorf("invalid \\u escape")
			}
			if utf16.IsSurrogate(r) {
				// A valid pair makes one rune; anything else is U+FFFD, as
				// encoding/json decodes it.
				save := p.pos
				if p.pos+1 < len(p.data) && p.data[p.pos] == '\\' && p.data[p.pos+1] == 'u' {
					p.pos += 2
					if r2, ok := p.hex4(); ok {
						if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
							out = utf8.AppendRune(out, dec)
							continue
						}
					}
				}
				p.pos = save
				r = utf8.RuneError
			}
			out = utf8.AppendRune(out, r)
		default:
			return nil, p.errorf("invalid escape \\%c", e)
		}
	}
	return nil, p.errorf("unterminated string")
}

// validUTF8 replaces each invalid byte with U+FFFD (as encoding/json
// does), so that keys are compared as the text they will be written as.
func validUTF8(s []byte) []byte {
	if utf8.Valid(s) {
		return s
	}
	out := make([]byte, 0, len(s)+8)
	for len(s) > 0 {
		r, n := utf8.DecodeRune(s)
		if r == utf8.RuneError && n == 1 {
			out = utf8.AppendRune(out, utf8.RuneError)
		} else {
			out = append(out, s[:n]...)
		}
		s = s[n:]
	}
	return out
}

func (p *canonParser) hex4() (rune, bool) {
	if p.pos+4 > len(p.data) {
		return 0, false
	}
	var r rune
	for _, c := range p.data[p.pos : p.pos+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	p.pos += 4
	return r, true
}

// number checks the RFC 8259 number grammar at p.pos and returns the
// literal.
func (p *canonParser) number() ([]byte, error) {
	start := p.pos
	digits := func() int {
		n := 0
		for p.pos < len(p.data) && '0' <= p.data[p.pos] && p.data[p.pos] <= '9' {
			p.pos++
			n++
		}
		return n
	}
	if p.data[p.pos] == '-' {
		p.pos++
	}
	switch {
	case p.pos < len(p.data) && p.data[p.pos] == '0':
		p.pos++
	case digits() == 0:
		return nil, p.errorf("invalid number")
	}
	if p.pos < len(p.data) && p.data[p.pos] == '.' {
		p.pos++
		if digits() == 0 {
			return nil, p.errorf("invalid number")
		}
	}
	if p.pos < len(p.data) && (p.data[p.pos] == 'e' || p.data[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.data) && (p.data[p.pos] == '+' || p.data[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return nil, p.errorf("invalid number")
		}
	}
	return p.data[start:p.pos], nil
}

// compareUTF16 orders strings by their UTF-16 code units, as RFC 8785 does.
// It differs from byte order only between supplementary characters and
// U+E000..U+FFFF.
func compareUTF16[S ~string | ~[]byte](a, b S) int {
	for len(a) > 0 && len(b) > 0 {
		ra, na := decodeRune(a)
		rb, nb := decodeRune(b)
		if ra != rb {
			return cmpUnits(ra, rb)
		}
		a, b = a[na:], b[nb:]
	}
	return len(a) - len(b)
}

func decodeRune[S ~string | ~[]byte](s S) (rune, int) {
	if len(s) > 0 && s[0] < utf8.RuneSelf {
		return rune(s[0]), 1
	}
	return utf8.DecodeRuneInString(string(s[:min(len(s), utf8.UTFMax)]))
}

func cmpUnits(ra, rb rune) int {
	ua, ub := [2]rune{ra}, [2]rune{rb}
	if ra >= 0x10000 {
		ua[0], ua[1] = utf16.EncodeRune(ra)
	}
	if rb >= 0x10000 {
		ub[0], ub[1] = utf16.EncodeRune(rb)
	}
	for i := range 2 {
		if ua[i] != ub[i] {
			return int(ua[i]) - int(ub[i])
		}
	}
	return 0
}

const hexDigits = "0123456789abcdef"

func appendString[S ~string | ~[]byte](dst []byte, s S) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c >= 0x20:
				dst = append(dst, c)
			case c == '\b':
				dst = append(dst, '\\', 'b')
			case c == '\t':
				dst = append(dst, '\\', 't')
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\f':
				dst = append(dst, '\\', 'f')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			continue
		}
		r, n := decodeRune(s[i:])
		if r == utf8.RuneError && n == 1 {
			dst = utf8.AppendRune(dst, utf8.RuneError)
		} else {
			dst = append(dst, s[i:i+n]...)
		}
		i += n
	}
	return append(dst, '"')
}

func appendNumber(dst []byte, lit []byte) ([]byte, error) {
	if !bytes.ContainsAny(lit, ".eE") {
		if string(lit) == "-0" {
			return append(dst, '0'), nil
		}
		return append(dst, lit...), nil
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil || math.IsInf(f, 0) {
		return nil, fmt.Errorf("%w: number %s out of float64 range", ErrCanonicalJSON, lit)
	}
	return appendES6Float(dst, f), nil
}

// appendES6Float writes f as ECMAScript's Number.prototype.toString does (the
// format RFC 8785 prescribes): shortest round-trip digits, exponent form
// only below 1e-6 or from 1e21.
func appendES6Float(dst []byte, f float64) []byte {
	if f == 0 {
		return append(dst, '0') // also -0
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs < 1e-6 || abs >= 1e21 {
		format = 'e'
	}
	start := len(dst)
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// strconv writes e-07; ECMAScript writes e-7.
		n := len(dst) - start
		if n >= 4 && dst[len(dst)-4] == 'e' && dst[len(dst)-3] == '-' && dst[len(dst)-2] == '0' {
			dst[len(dst)-2] = dst[len(dst)-1]
			dst = dst[:len(dst)-1]
		}
	}
	return dst
}
