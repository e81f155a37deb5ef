package sqlcheck

import (
	"errors"
	"fmt"
	"math"
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
// A shape is only ever derived when it is exact: PostgreSQL's own parser
// finds the constants (pg_query's normalize), every constant is one read
// here with the scanner's rules for the forms a shape carries (plain
// integers and decimals, a leading minus, simple quoted strings, E''
// strings in the deparser's own form, true, false, NULL), and the
// statement is exactly its normalized text with those constants put back.
// Anything else (other escapes, dollar quoting, bit strings, a constant
// normalize numbers twice, a parameter placeholder) has no shape, and the
// statement takes the full parse. TestConstantsAgreeWithTheScanner holds
// this reading to pg_query's scanner.

// ConstKind is the type a constant's literal has in PostgreSQL.
type ConstKind uint8

// The constant kinds a shape carries.
const (
	// ConstInt4 is an integer literal within int4.
	ConstInt4 ConstKind = iota + 1
	// ConstInt8 is an integer literal past int4 within int8 (-2147483648,
	// which PostgreSQL reads as 2147483648 negated, is int4).
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
// if it is). It reads the statement with the normalizer (PostgreSQL's own
// parser finds the constants) and reads each constant where the
// normalized text has its $n: the statement must be exactly the
// normalized text with the constants put back.
//
// A shape is remembered only after the full parse and check of a
// statement of the same shape passed the limits (and the same shape has
// the same brackets and operators), so only the length is checked here.
func ShapeOf(sql string, lim Limits) (*Shape, bool) {
	lim = lim.WithDefaults()
	if len(sql) > lim.MaxBytes || strings.IndexByte(sql, 0) >= 0 {
		return nil, false
	}
	norm, err := pg.Normalize(sql)
	if err != nil {
		return nil, false
	}
	s := &Shape{Normalized: norm}
	i, j := 0, 0 // in sql, in norm
	for j < len(norm) {
		k, n, ok := marker(norm[j:])
		if !ok {
			if i >= len(sql) || sql[i] != norm[j] {
				return nil, false
			}
			i, j = i+1, j+1
			continue
		}
		if k != len(s.Consts)+1 {
			// Out of order, or one $n for two constants (normalize shares a
			// GROUP BY item's parameter with the select list).
			return nil, false
		}
		c, ok := lexConst(sql, i)
		if !ok {
			// A $n the statement has itself (a parameter, a comment, an
			// identifier with a dollar), or a constant of another form.
			return nil, false
		}
		s.Consts = append(s.Consts, c)
		i, j = c.End, j+n
	}
	if i != len(sql) {
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
		// PostgreSQL types it as an integer when it is one within int8:
		// int4 when it fits (only -2147483648, 2147483648 negated, can),
		// int8 otherwise.
		if !plainDecimal(text) {
			return false
		}
		c.Value = sign + text
		c.Literal = c.Value
		c.Kind = ConstNumeric
		if strings.Trim(text, "0123456789") == "" {
			c.Kind = integerKind(c.Value, c.Kind)
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

// integerKind is the type PostgreSQL gives an integer written as a Float
// node (make_const): int4 when it fits, int8 when it fits that, otherwise
// orElse.
func integerKind(v string, orElse ConstKind) ConstKind {
	n, err := strconv.ParseInt(v, 10, 64)
	switch {
	case err != nil:
		return orElse
	case n >= math.MinInt32 && n <= math.MaxInt32:
		return ConstInt4
	}
	return ConstInt8
}

// lexConst reads the constant that starts at sql[i], with the token
// rules of PostgreSQL's scanner for the forms a shape carries (anything
// else is not a constant here). The values it reads only ever become
// parameters, never text: a statement's structure is the normalized
// text's, from PostgreSQL's parser.
func lexConst(sql string, i int) (Const, bool) {
	c := Const{Start: i}
	if i < len(sql) && sql[i] == '-' {
		c.Neg = true
		i++
		for i < len(sql) && isSpace(sql[i]) {
			i++
		}
		if i >= len(sql) || !isDigit(sql[i]) && !(sql[i] == '.' && i+1 < len(sql) && isDigit(sql[i+1])) {
			return c, false
		}
	}
	if i >= len(sql) {
		return c, false
	}
	start := i
	switch ch := sql[i]; {
	case isDigit(ch) || ch == '.':
		end, tok, ok := lexNumber(sql, i)
		if !ok {
			return c, false
		}
		c.End = end
		return c, decodeConst(&c, tok, sql[start:end])
	case ch == '\'' || (ch == 'E' || ch == 'e') && i+1 < len(sql) && sql[i+1] == '\'':
		end, ok := lexString(sql, i)
		if !ok || c.Neg {
			return c, false
		}
		c.End = end
		return c, decodeConst(&c, pg.Token_SCONST, sql[start:end])
	}
	if c.Neg {
		return c, false
	}
	for _, kw := range []struct {
		word string
		tok  pg.Token
	}{{"true", pg.Token_TRUE_P}, {"false", pg.Token_FALSE_P}, {"null", pg.Token_NULL_P}} {
		end := i + len(kw.word)
		if end <= len(sql) && strings.EqualFold(sql[i:end], kw.word) && (end == len(sql) || !isIdentChar(sql[end])) {
			c.End = end
			return c, decodeConst(&c, kw.tok, sql[i:end])
		}
	}
	return c, false
}

// lexNumber reads a numeric literal at sql[i]: ICONST for an integer
// within int4, FCONST otherwise, as PostgreSQL 17's scanner does. A
// number followed by an identifier character, or by "..", is not one.
func lexNumber(sql string, i int) (int, pg.Token, bool) {
	start := i
	if sql[i] == '0' && i+1 < len(sql) && strings.IndexByte("xXoObB", sql[i+1]) >= 0 {
		i += 2
		for i < len(sql) && (isHexDigit(sql[i]) || sql[i] == '_') {
			i++
		}
		if i < len(sql) && isIdentChar(sql[i]) {
			return 0, 0, false
		}
		if _, ok := parseIconst(sql[start:i]); !ok {
			return 0, 0, false
		}
		return i, pg.Token_ICONST, true
	}
	real := false
	for i < len(sql) && (isDigit(sql[i]) || sql[i] == '_') {
		i++
	}
	if i < len(sql) && sql[i] == '.' {
		if i+1 < len(sql) && sql[i+1] == '.' {
			return 0, 0, false
		}
		real = true
		i++
		for i < len(sql) && (isDigit(sql[i]) || sql[i] == '_') {
			i++
		}
	}
	if i < len(sql) && (sql[i] == 'e' || sql[i] == 'E') {
		real = true
		i++
		if i < len(sql) && (sql[i] == '+' || sql[i] == '-') {
			i++
		}
		d := i
		for i < len(sql) && isDigit(sql[i]) {
			i++
		}
		if i == d {
			return 0, 0, false
		}
	}
	if i == start || i < len(sql) && isIdentChar(sql[i]) {
		return 0, 0, false
	}
	if !real {
		if _, ok := parseIconst(sql[start:i]); ok {
			return i, pg.Token_ICONST, true
		}
	}
	return i, pg.Token_FCONST, true
}

// lexString reads a quoted string at sql[i] ('...' or E'...'), to its
// closing quote. A string that another quoted string follows (after
// whitespace or comments: PostgreSQL joins strings continued on a new
// line) is not simple, nor is one that does not close.
func lexString(sql string, i int) (int, bool) {
	escape := sql[i] != '\''
	if escape {
		i++
	}
	i++ // the opening quote
	for ; i < len(sql); i++ {
		switch {
		case sql[i] == '\\' && escape:
			i++ // the escaped character (decodeConst admits only \\)
		case sql[i] == '\'':
			if i+1 < len(sql) && sql[i+1] == '\'' {
				i++
				continue
			}
			end := i + 1
			if next := skipSpaceAndComments(sql, end); next < len(sql) && sql[next] == '\'' {
				return 0, false
			}
			return end, true
		}
	}
	return 0, false
}

// skipSpaceAndComments returns the first position at or after i that is
// not whitespace or inside a comment.
func skipSpaceAndComments(sql string, i int) int {
	for i < len(sql) {
		switch {
		case isSpace(sql[i]):
			i++
		case strings.HasPrefix(sql[i:], "--"):
			for i < len(sql) && sql[i] != '\n' && sql[i] != '\r' {
				i++
			}
		case strings.HasPrefix(sql[i:], "/*"):
			depth := 0
			for i < len(sql) {
				if strings.HasPrefix(sql[i:], "/*") {
					depth, i = depth+1, i+2
				} else if strings.HasPrefix(sql[i:], "*/") {
					depth, i = depth-1, i+2
					if depth == 0 {
						break
					}
				} else {
					i++
				}
			}
		default:
			return i
		}
	}
	return i
}

func isDigit(c byte) bool    { return c >= '0' && c <= '9' }
func isHexDigit(c byte) bool { return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// isIdentChar is a byte an identifier may continue with.
func isIdentChar(c byte) bool {
	return isDigit(c) || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '$' || c >= 0x80
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

// simpleString decodes '...' with ” for a quote (standard conforming
// strings, as the parser reads them), and E'...' whose only escapes are
// ” and \\ (the form the deparser writes a string with a backslash in).
// A string continued on another line ('a'<newline>'b'), any other escape,
// or any other form (U&”, $$) is not simple.
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
// (deparseStringLiteral): E” when it holds a backslash, with quotes and
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
