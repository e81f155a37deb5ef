package pgwire

import (
	"strconv"
	"strings"
	"unicode/utf8"

	pg "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/proto"
)

// splice is a prepared statement's text ready for its values: the text
// Bind would render (its tree, each $n cast as inline casts its value,
// deparsed once) cut at every parameter, so that a Bind puts each value
// in as a literal instead of copying, rewriting and deparsing the tree
// (about 50 µs a Bind). It is built for a statement bound a second time,
// and only for one whose kind no value can change: an INSERT, UPDATE or
// DELETE, or a SELECT with a FROM clause or a set operation, that the
// front would send to the statement path with every value NULL (so none
// is a statement the front answers itself, a catalog read or a wait).
// What it renders is the text the statement path parses and checks, as
// the deparsed text was; TestSpliceIsTheInlinedText holds the two equal.
type splice struct {
	verb   string
	pieces []string // the text around the parameters: len(params)+1 of them
	params []int    // which value (0-based) goes after each piece but the last
}

// newSplice is st's splice, or nil when st has none.
func newSplice(st *prepared) *splice {
	if st.tree == nil || len(st.tree.Stmts) != 1 || len(st.oids) == 0 {
		return nil
	}
	n := st.tree.Stmts[0].Stmt
	switch x := n.GetNode().(type) {
	case *pg.Node_InsertStmt, *pg.Node_UpdateStmt, *pg.Node_DeleteStmt:
	case *pg.Node_SelectStmt:
		if len(x.SelectStmt.FromClause) == 0 && x.SelectStmt.Op == pg.SetOperation_SETOP_NONE {
			return nil
		}
	default:
		return nil
	}
	for _, oid := range st.oids {
		if t, ok := paramTypes[oid]; ok && !spliceable[t.name] {
			return nil
		}
	}
	nulled, err := nullBound(st)
	if err != nil || classify(nulled, st.sql) != kindGoverned {
		return nil
	}
	text, err := describeText(st)
	if err != nil {
		return nil
	}
	scan, err := pg.Scan(text)
	if err != nil {
		return nil
	}
	s := &splice{verb: verbOf(st.tree)}
	at, uses := 0, 0
	for _, tok := range scan.Tokens {
		if tok.Token != pg.Token_PARAM {
			continue
		}
		k, err := strconv.Atoi(text[tok.Start+1 : tok.End])
		if err != nil || k < 1 || k > len(st.oids) {
			return nil
		}
		s.pieces = append(s.pieces, text[at:tok.Start])
		s.params = append(s.params, k-1)
		at = int(tok.End)
		uses++
	}
	s.pieces = append(s.pieces, text[at:])
	want := 0
	for _, u := range st.uses {
		want += u
	}
	if uses != want {
		return nil
	}
	// The deparser writes some constants its own way (LIMIT NULL as LIMIT
	// ALL, a constant cast to boolean as true): a statement where probes
	// of every value NULL, a number, a quoted string, t and f do not come out as
	// the tree renders them keeps the tree.
	for _, probe := range []func(oid uint32) boundParam{
		func(oid uint32) boundParam { return boundParam{oid: oid, null: true} },
		func(oid uint32) boundParam { return boundParam{oid: oid, text: "0"} },
		func(oid uint32) boundParam { return boundParam{oid: oid, text: `t'\`} },
		func(oid uint32) boundParam { return boundParam{oid: oid, text: "t"} },
		func(oid uint32) boundParam { return boundParam{oid: oid, text: "f"} },
	} {
		vals := make([]boundParam, len(st.oids))
		for i, oid := range st.oids {
			vals[i] = probe(oid)
		}
		got, ok := s.render(vals)
		if want, err := treeText(st, vals); !ok || err != nil || got != want {
			return nil
		}
	}
	return s
}

// inlinedTree is a copy of st's tree with each parameter replaced by its
// value in vals: what Bind deparses when st has no splice.
func inlinedTree(st *prepared, vals []boundParam) (*pg.ParseResult, error) {
	tree := proto.Clone(st.tree).(*pg.ParseResult)
	if err := inline(tree, vals); err != nil {
		return nil, err
	}
	return tree, nil
}

// treeText is st with vals in, rendered through its tree (inlinedTree,
// deparsed).
func treeText(st *prepared, vals []boundParam) (string, error) {
	tree, err := inlinedTree(st, vals)
	if err != nil {
		return "", err
	}
	return pg.Deparse(tree)
}

// spliceable are the parameter types whose cast the deparser writes as
// it writes a cast of a parameter: a bool or bpchar constant it writes
// its own way (true, char 'x'), so a statement with one is rendered by
// the tree.
var spliceable = map[string]bool{
	"bytea": true, "int8": true, "int2": true, "int4": true, "text": true, "json": true, "float4": true,
	"float8": true, "varchar": true, "date": true, "time": true, "timestamp": true, "timestamptz": true,
	"interval": true, "timetz": true, "numeric": true, "uuid": true, "jsonb": true, "inet": true, "cidr": true,
	"macaddr": true,
}

// render is the statement with vals in, or false when a value is one the
// tree renders its own way (a NUL byte, or not UTF-8: the tree refuses
// it), for the tree to render.
func (s *splice) render(vals []boundParam) (string, bool) {
	var b strings.Builder
	size := 0
	for _, p := range s.pieces {
		size += len(p)
	}
	for _, i := range s.params {
		size += len(vals[i].text) + 4
	}
	b.Grow(size)
	for k, i := range s.params {
		b.WriteString(s.pieces[k])
		v := vals[i]
		if v.null {
			b.WriteString("NULL")
			continue
		}
		if strings.IndexByte(v.text, 0) >= 0 || !utf8.ValidString(v.text) {
			return "", false
		}
		writeLiteral(&b, v.text)
	}
	b.WriteString(s.pieces[len(s.pieces)-1])
	return b.String(), true
}

// writeLiteral writes s as the deparser writes a string constant: in
// quotes, each quote doubled, and as an escape string (E'...') with each
// backslash doubled when it holds one.
func writeLiteral(b *strings.Builder, s string) {
	escape := strings.IndexByte(s, '\\') >= 0
	if escape {
		b.WriteByte('E')
	}
	b.WriteByte('\'')
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\'' || escape && c == '\\' {
			b.WriteByte(c)
		}
		b.WriteByte(c)
	}
	b.WriteByte('\'')
}

// spliced is st bound to vals by its splice, or false when it has none
// or a value needs the tree.
func (st *prepared) spliced(vals []boundParam) (string, bool) {
	if st.splice == nil {
		return "", false
	}
	return st.splice.render(vals)
}
