package sqlcheck

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	pg "github.com/pganalyze/pg_query_go/v6"
)

// A statement's shape is pg_query's normalized form of it (every constant
// replaced by $n), with the kind of each constant. The static check reads
// no constant's value, so its decision, the canonical text around the
// constants and the Pilot's guarded statement are functions of the shape:
// they are computed once per shape (NewTemplate) and a later statement of
// the same shape pays a normalize and a scan (ShapeOf), never a parse.
//
// A shape is only ever derived when it is exact: every constant is one the
// scanner and the decoder below agree on (plain integers and decimals, a
// leading minus, simple quoted strings, true, false, NULL), and the
// statement is exactly its normalized text with those constants put back.
// Anything else (escape strings, dollar quoting, bit strings, a constant
// normalize numbers twice, a parameter placeholder) has no shape, and the
// statement takes the full parse.

// ConstKind is the type a constant's literal has in PostgreSQL.
type ConstKind uint8

// The constant kinds a shape carries.
const (
	// ConstInt4 is an integer literal within int4.
	ConstInt4 ConstKind = iota + 1
	// ConstInt8 is an integer literal past int4 within int8.
	ConstInt8
	// ConstNumeric is any other numeric literal (a decimal point, an
	// exponent, or past int8).
	ConstNumeric
	// ConstString is a quoted string: of type unknown until its context
	// resolves it, as a parameter without a declared type is.
	ConstString
	// ConstBool is true or false.
	ConstBool
	// ConstNull is NULL: never a parameter, always part of the shape.
	ConstNull
)

// letter is the kind's one-character code in a shape key.
func (k ConstKind) letter() byte { return " 48nsbN"[k] }

// castType is the type a parameter of this kind is declared with in the
// Pilot's template, so it has its literal's own type; "" for a string,
// whose type its context decides, as for the literal.
func (k ConstKind) castType() string {
	switch k {
	case ConstInt4:
		return "int4"
	case ConstInt8:
		return "int8"
	case ConstNumeric:
		return "numeric"
	case ConstBool:
		return "bool"
	}
	return ""
}

// Const is one constant of a statement.
type Const struct {
	Kind ConstKind
	// Neg is a leading minus, part of the constant (as the parser folds it).
	Neg bool
	// Start and End are its bytes in the statement.
	Start, End int
	// Value is the text the type's input function reads: what the Pilot
	// binds. Empty for NULL.
	Value string
	// Literal is the constant as the deparser writes it in canonical text.
	Literal string
}

// Shape is a statement's normalized text and its constants.
type Shape struct {
	Normalized string
	Consts     []Const
}

// Key is the shape's identity: the normalized text and each constant's
// kind and sign.
func (s *Shape) Key() string {
	var b strings.Builder
	b.Grow(len(s.Normalized) + 1 + 2*len(s.Consts))
	b.WriteString(s.Normalized)
	b.WriteByte(0)
	for _, c := range s.Consts {
		b.WriteByte(c.Kind.letter())
		if c.Neg {
			b.WriteByte('-')
		}
	}
	return b.String()
}

// ShapeOf returns the statement's shape, or false when it has none (the
// statement then takes the full parse, which also says why it is refused
// if it is). It reads the statement with the scanner and the normalizer
// only.
func ShapeOf(sql string, lim Limits) (*Shape, bool) {
	lim = lim.WithDefaults()
	if len(sql) > lim.MaxBytes || strings.IndexByte(sql, 0) >= 0 {
		return nil, false
	}
	scan, err := pg.Scan(sql)
	if err != nil {
		return nil, false
	}
	if _, ok := tokenLimits(scan, lim); !ok {
		return nil, false
	}
	norm, err := pg.Normalize(sql)
	if err != nil {
		return nil, false
	}
	s := &Shape{Normalized: norm}
	toks := scan.Tokens
	j, prev := 0, 0 // in norm; the end of the last token consumed in sql
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		start, end := int(t.Start), int(t.End)
		if start < prev || end > len(sql) || start > end {
			return nil, false
		}
		gap := sql[prev:start]
		if !strings.HasPrefix(norm[j:], gap) {
			return nil, false
		}
		j += len(gap)
		if t.Token == pg.Token_PARAM {
			return nil, false
		}
		if k, n, ok := marker(norm[j:]); ok {
			if k != len(s.Consts)+1 {
				// Out of order, or one $n for two constants (normalize
				// shares a GROUP BY item's parameter with the select list).
				return nil, false
			}
			c := Const{Start: start}
			if t.Token == pg.Token_ASCII_45 {
				if i+1 >= len(toks) {
					return nil, false
				}
				i++
				t = toks[i]
				c.Neg = true
			}
			c.End = int(t.End)
			if c.End > len(sql) || !decodeConst(&c, t.Token, sql[t.Start:t.End]) {
				return nil, false
			}
			s.Consts = append(s.Consts, c)
			j += n
			prev = c.End
			continue
		}
		text := sql[start:end]
		if !strings.HasPrefix(norm[j:], text) {
			return nil, false
		}
		j += len(text)
		prev = end
	}
	if sql[prev:] != norm[j:] {
		return nil, false
	}
	return s, true
}

// marker reads a $n at the start of s: n and the marker's length.
func marker(s string) (int, int, bool) {
	if len(s) < 2 || s[0] != '$' {
		return 0, 0, false
	}
	i := 1
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 1 || i > 10 {
		return 0, 0, false
	}
	k, err := strconv.Atoi(s[1:i])
	if err != nil {
		return 0, 0, false
	}
	return k, i, true
}

// decodeConst fills c from its token, or reports that the token is not a
// constant a shape can carry exactly.
func decodeConst(c *Const, tok pg.Token, text string) bool {
	sign := ""
	if c.Neg {
		sign = "-"
	}
	switch tok {
	case pg.Token_ICONST:
		// The scanner returns ICONST only within int4 (PostgreSQL 17 also
		// reads 0x, 0o, 0b and underscores); the parser keeps its value.
		v, ok := parseIconst(text)
		if !ok {
			return false
		}
		if c.Neg {
			v = -v
		}
		c.Kind, c.Value = ConstInt4, strconv.FormatInt(v, 10)
		c.Literal = c.Value
	case pg.Token_FCONST:
		// The parser keeps an FCONST's text as written (a Float node), and
		// PostgreSQL types it int8 when it is an integer within int8.
		if !plainDecimal(text) {
			return false
		}
		c.Value = sign + text
		c.Literal = c.Value
		c.Kind = ConstNumeric
		if strings.Trim(text, "0123456789") == "" {
			if _, err := strconv.ParseInt(c.Value, 10, 64); err == nil {
				c.Kind = ConstInt8
			}
		}
	case pg.Token_SCONST:
		v, ok := simpleString(text)
		if !ok || c.Neg {
			return false
		}
		c.Kind, c.Value, c.Literal = ConstString, v, StringLiteral(v)
	case pg.Token_TRUE_P, pg.Token_FALSE_P:
		if c.Neg {
			return false
		}
		c.Kind, c.Value = ConstBool, strings.ToLower(text)
		c.Literal = c.Value
	case pg.Token_NULL_P:
		if c.Neg {
			return false
		}
		c.Kind, c.Literal = ConstNull, "NULL"
	default:
		return false
	}
	return true
}

// parseIconst reads an ICONST token's value: decimal, or 0x, 0o, 0b, with
// underscores between digits.
func parseIconst(text string) (int64, bool) {
	base := 10
	digits := text
	if len(text) > 2 && text[0] == '0' {
		switch text[1] {
		case 'x', 'X':
			base, digits = 16, text[2:]
		case 'o', 'O':
			base, digits = 8, text[2:]
		case 'b', 'B':
			base, digits = 2, text[2:]
		}
	}
	digits = strings.ReplaceAll(digits, "_", "")
	if digits == "" {
		return 0, false
	}
	v, err := strconv.ParseInt(digits, base, 64)
	if err != nil || v > 1<<31-1 {
		return 0, false
	}
	return v, true
}

// plainDecimal reports digits with an optional point and exponent: the
// forms both PostgreSQL 15's and 17's scanners read the same way.
func plainDecimal(s string) bool {
	i, n := 0, 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i, n = i+1, n+1
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i, n = i+1, n+1
		}
	}
	if n == 0 {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		m := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i, m = i+1, m+1
		}
		if m == 0 {
			return false
		}
	}
	return i == len(s)
}

// simpleString decodes '...' with '' for a quote (standard conforming
// strings, as the parser reads them), and E'...' whose only escapes are
// '' and \\ (the form the deparser writes a string with a backslash in).
// A string continued on another line ('a'<newline>'b'), any other escape,
// or any other form (U&'', $$) is not simple.
func simpleString(text string) (string, bool) {
	escape := false
	if len(text) > 0 && (text[0] == 'E' || text[0] == 'e') {
		escape, text = true, text[1:]
	}
	if len(text) < 2 || text[0] != '\'' || text[len(text)-1] != '\'' {
		return "", false
	}
	body := text[1 : len(text)-1]
	var b strings.Builder
	b.Grow(len(body))
	for i := 0; i < len(body); i++ {
		switch {
		case body[i] == '\'':
			if i+1 >= len(body) || body[i+1] != '\'' {
				return "", false
			}
			i++
		case body[i] == '\\' && escape:
			if i+1 >= len(body) || body[i+1] != '\\' {
				return "", false
			}
			i++
		}
		b.WriteByte(body[i])
	}
	return b.String(), true
}

// StringLiteral writes a string constant as pg_query's deparser does
// (deparseStringLiteral): E'' when it holds a backslash, with quotes and
// backslashes doubled.
func StringLiteral(v string) string {
	var b strings.Builder
	b.Grow(len(v) + 3)
	if strings.IndexByte(v, '\\') >= 0 {
		b.WriteByte('E')
	}
	b.WriteByte('\'')
	for i := 0; i < len(v); i++ {
		if v[i] == '\'' || v[i] == '\\' {
			b.WriteByte(v[i])
		}
		b.WriteByte(v[i])
	}
	b.WriteByte('\'')
	return b.String()
}

// ErrNoTemplate is wrapped by NewTemplate's errors: the statement is
// checked by a full parse every time.
var ErrNoTemplate = errors.New("no template for this shape")

func noTemplate(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrNoTemplate, fmt.Sprintf(format, args...))
}
