package sqlcheck

import (
	"fmt"
	"strconv"
	"strings"

	pg "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Template is what the statements of one shape share, computed once from
// the full parse of the first of them: which of its constants become
// parameters, which stay in the text (and so are part of the cache key),
// and the canonical text around them.
//
// A constant stays in the text where binding it as a parameter could mean
// something else than the literal: NULL; DISTINCT ON (1) (a position, not
// a value); the argument of a cast with type modifiers (interval '1' day
// reads its input under the modifier) or to boolean (the deparser writes
// 't'::boolean as true); and a typed constant that is a whole unnamed
// output column (SELECT 5 names its column ?column?, SELECT $1::int4 would
// name it int4).
type Template struct {
	// params[j] is the index in Shape.Consts of parameter $j+1.
	params []int
	// baked are the constants that stay in the text.
	baked []int
	// pieces are the canonical text: text, or a constant by index.
	pieces []piece
	// nodes are the constant nodes of the parse the template came from,
	// by index in Shape.Consts (only while NewTemplate and Parameterize
	// run on that parse).
	nodes []*pg.Node
}

type piece struct {
	text  string
	konst int // index in Shape.Consts, or -1 for text
}

// NumParams is the number of parameters ($1..$n) the template binds.
func (t *Template) NumParams() int { return len(t.params) }

// Baked are the indices of the constants that stay in the text.
func (t *Template) Baked() []int { return t.baked }

// BakedKey is the cache key of a statement of shape s whose template
// keeps the constants baked in the text: the shape's key and their values.
func BakedKey(s *Shape, baked []int) string {
	if len(baked) == 0 {
		return s.Key()
	}
	var b strings.Builder
	b.WriteString(s.Key())
	for _, i := range baked {
		b.WriteByte(0)
		b.WriteString(s.Consts[i].Literal)
	}
	return b.String()
}

// Canonical is the canonical text of a statement of this template's
// shape: the deparsed text with its own constants, as pg_query's deparser
// would write it (NewTemplate checked that on the first statement).
func (t *Template) Canonical(s *Shape) string {
	n := 0
	for _, p := range t.pieces {
		if p.konst < 0 {
			n += len(p.text)
		} else {
			n += len(s.Consts[p.konst].Literal)
		}
	}
	var b strings.Builder
	b.Grow(n)
	for _, p := range t.pieces {
		if p.konst < 0 {
			b.WriteString(p.text)
		} else {
			b.WriteString(s.Consts[p.konst].Literal)
		}
	}
	return b.String()
}

// Args are the values of $1..$n for a statement of shape s: the text each
// constant's type reads, bound in text format so PostgreSQL's own input
// function reads it exactly as it reads the literal.
func (t *Template) Args(s *Shape) []any {
	out := make([]any, len(t.params))
	for j, i := range t.params {
		out[j] = s.Consts[i].Value
	}
	return out
}

// NewTemplate computes the template of shape s from a, the full analysis
// of a statement of that shape (whose tree it reads and leaves as it
// was). It fails, and the shape is then never remembered, unless its
// canonical text, rebuilt from the template with the statement's own
// constants, is exactly a.Canonical.
func NewTemplate(a *Analysis, s *Shape) (*Template, error) {
	stmt := a.Stmt()
	if stmt == nil || a.Canonical == "" {
		return nil, noTemplate("no statement")
	}
	t := &Template{nodes: make([]*pg.Node, len(s.Consts))}
	byStart := make(map[int32]int, len(s.Consts))
	for i, c := range s.Consts {
		byStart[int32(c.Start)] = i
	}
	bake := make([]bool, len(s.Consts))
	var werr error
	walkNodes(stmt.ProtoReflect(), nil, func(n *pg.Node, stack []frame) {
		k := n.GetAConst()
		if k == nil || werr != nil {
			return
		}
		i, ok := byStart[k.Location]
		if !ok {
			return
		}
		if t.nodes[i] != nil {
			werr = noTemplate("two constants at byte %d", k.Location)
			return
		}
		t.nodes[i] = n
		bake[i] = mustBake(s.Consts[i], k, stack)
	})
	if werr != nil {
		return nil, werr
	}
	for i, n := range t.nodes {
		if n == nil {
			return nil, noTemplate("constant %d is not in the tree", i+1)
		}
		if !bake[i] && !sameKind(s.Consts[i], n.GetAConst()) {
			return nil, noTemplate("constant %d is not the kind it was scanned as", i+1)
		}
		if bake[i] {
			t.baked = append(t.baked, i)
		} else {
			t.params = append(t.params, i)
		}
	}
	if err := t.canonicalPieces(stmt, a.Tree.Version, s); err != nil {
		return nil, err
	}
	if got := t.Canonical(s); got != a.Canonical {
		return nil, noTemplate("the template's canonical text %q is not the statement's %q", got, a.Canonical)
	}
	return t, nil
}

// Parameterize turns the template's constants in a's tree into $1..$n,
// each declared with its literal's type ($1::int4; a string stays
// untyped, like the literal). a must be the analysis NewTemplate read.
// The tree is then the Pilot's template, no longer the statement.
func (t *Template) Parameterize() {
	for j, i := range t.params {
		n := t.nodes[i]
		k := n.GetAConst()
		ref := &pg.Node{Node: &pg.Node_ParamRef{ParamRef: &pg.ParamRef{Number: int32(j + 1), Location: -1}}}
		typ := kindOf(k).castType()
		if typ == "" {
			n.Node = ref.Node
			continue
		}
		n.Node = &pg.Node_TypeCast{TypeCast: &pg.TypeCast{Arg: ref, Location: -1, TypeName: &pg.TypeName{
			Names:    []*pg.Node{pg.MakeStrNode("pg_catalog"), pg.MakeStrNode(typ)},
			Typemod:  -1,
			Location: -1,
		}}}
	}
	t.nodes = nil
}

// mustBake reports a constant that must stay in the text (see Template).
func mustBake(c Const, k *pg.A_Const, stack []frame) bool {
	if c.Kind == ConstNull || k.Isnull {
		return true
	}
	if len(stack) == 0 {
		return false
	}
	parent := stack[len(stack)-1]
	switch pm := parent.msg.Interface().(type) {
	case *pg.TypeCast:
		if parent.field == "arg" && pm.TypeName != nil {
			if len(pm.TypeName.Typmods) > 0 {
				return true
			}
			if names := pm.TypeName.Names; len(names) > 0 {
				switch names[len(names)-1].GetString_().GetSval() {
				case "bool", "boolean":
					return true
				}
			}
		}
	case *pg.SelectStmt:
		if parent.field == "distinct_clause" {
			return true
		}
	case *pg.GroupingSet, *pg.RowExpr:
		return inGroupClause(stack)
	case *pg.ResTarget:
		if parent.field == "val" && pm.Name == "" && c.Kind != ConstString && len(stack) >= 3 {
			switch stack[len(stack)-3].field {
			case "target_list":
				_, sel := stack[len(stack)-3].msg.Interface().(*pg.SelectStmt)
				return sel
			case "returning_list":
				return true
			}
		}
	}
	return false
}

// inGroupClause reports a constant that is an item of GROUP BY through
// grouping sets (ROLLUP, CUBE, GROUPING SETS) or an implicit row: there
// PostgreSQL reads an integer as a position in the select list, as in a
// plain GROUP BY 1, while a parameter is a value to group by.
func inGroupClause(stack []frame) bool {
	for i := len(stack) - 1; i >= 0; i-- {
		switch stack[i].msg.Interface().(type) {
		case *pg.GroupingSet, *pg.RowExpr, *pg.Node:
			continue
		case *pg.SelectStmt:
			return stack[i].field == "group_clause"
		}
		return false
	}
	return false
}

// kindOf is the kind of a parsed constant.
func kindOf(k *pg.A_Const) ConstKind {
	switch v := k.Val.(type) {
	case *pg.A_Const_Ival:
		return ConstInt4
	case *pg.A_Const_Fval:
		s := v.Fval.Fval
		if strings.Trim(strings.TrimPrefix(s, "-"), "0123456789") == "" {
			return integerKind(s, ConstNumeric)
		}
		return ConstNumeric
	case *pg.A_Const_Sval:
		return ConstString
	case *pg.A_Const_Boolval:
		return ConstBool
	}
	if k.Isnull {
		return ConstNull
	}
	return 0
}

// sameKind checks the parser read a constant as the scanner's kind.
func sameKind(c Const, k *pg.A_Const) bool { return kindOf(k) == c.Kind }

// sentinel is the stand-in value parameter j takes while the canonical
// text's pieces are found: of the same node type and sign as the
// constant, so the deparser writes it in the same context the same way,
// and unlike anything else in the text.
func sentinel(c Const, j int) (*pg.A_Const, string, string) {
	sign := ""
	if c.Neg {
		sign = "-"
	}
	switch c.Kind {
	case ConstInt4, ConstBool:
		v := int32(1_000_000_000 + j)
		if c.Neg {
			v = -v
		}
		return &pg.A_Const{Val: &pg.A_Const_Ival{Ival: &pg.Integer{Ival: v}}}, sign, strconv.Itoa(1_000_000_000 + j)
	case ConstInt8:
		s := fmt.Sprintf("9%017d", j)
		return &pg.A_Const{Val: &pg.A_Const_Fval{Fval: &pg.Float{Fval: sign + s}}}, sign, s
	case ConstNumeric:
		s := fmt.Sprintf("0.9%012d", j)
		return &pg.A_Const{Val: &pg.A_Const_Fval{Fval: &pg.Float{Fval: sign + s}}}, sign, s
	default:
		s := fmt.Sprintf("harbormaster_sentinel_%d_", j)
		return &pg.A_Const{Val: &pg.A_Const_Sval{Sval: &pg.String{Sval: s}}}, "", "'" + s + "'"
	}
}

// canonicalPieces deparses stmt with each parameter's constant replaced by
// its sentinel, and cuts the text at the sentinels.
func (t *Template) canonicalPieces(stmt *pg.Node, version int32, s *Shape) error {
	saved := make([]*pg.A_Const, len(t.params))
	want := make(map[string]int, len(t.params)) // sentinel token -> parameter
	signs := make([]string, len(t.params))
	for j, i := range t.params {
		k := t.nodes[i].GetAConst()
		saved[j] = k
		sk, sign, tok := sentinel(s.Consts[i], j)
		sk.Location = k.Location
		t.nodes[i].Node = &pg.Node_AConst{AConst: sk}
		want[tok], signs[j] = j, sign
	}
	text, err := pg.Deparse(&pg.ParseResult{Version: version, Stmts: []*pg.RawStmt{{Stmt: stmt}}})
	for j, i := range t.params {
		t.nodes[i].Node = &pg.Node_AConst{AConst: saved[j]}
	}
	if err != nil {
		return noTemplate("deparse: %v", err)
	}
	scan, err := pg.Scan(text)
	if err != nil {
		return noTemplate("scan: %v", err)
	}
	seen := make([]bool, len(t.params))
	prev := 0
	toks := scan.Tokens
	for x, tok := range toks {
		j, ok := want[text[tok.Start:tok.End]]
		if !ok {
			continue
		}
		if seen[j] {
			return noTemplate("parameter %d appears twice in the canonical text", j+1)
		}
		seen[j] = true
		start := int(tok.Start)
		if signs[j] != "" {
			if x == 0 || toks[x-1].Token != pg.Token_ASCII_45 || toks[x-1].End != tok.Start {
				return noTemplate("parameter %d lost its sign", j+1)
			}
			start = int(toks[x-1].Start)
		}
		if start < prev {
			return noTemplate("parameter %d overlaps", j+1)
		}
		t.pieces = append(t.pieces, piece{text: text[prev:start], konst: -1}, piece{konst: t.params[j]})
		prev = int(tok.End)
	}
	for j := range seen {
		if !seen[j] {
			return noTemplate("parameter %d is not in the canonical text", j+1)
		}
	}
	t.pieces = append(t.pieces, piece{text: text[prev:], konst: -1})
	return nil
}

// frame is one step down a parse tree: the message, and the field of it
// the walk went into.
type frame struct {
	msg   protoreflect.Message
	field protoreflect.Name
}

// walkNodes calls fn on every Node under m, with the frames above it.
func walkNodes(m protoreflect.Message, stack []frame, fn func(*pg.Node, []frame)) {
	if n, ok := m.Interface().(*pg.Node); ok {
		fn(n, stack)
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Kind() != protoreflect.MessageKind {
			return true
		}
		next := append(stack, frame{msg: m, field: fd.Name()})
		if fd.IsList() {
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				walkNodes(l.Get(i).Message(), next, fn)
			}
		} else if !fd.IsMap() {
			walkNodes(v.Message(), next, fn)
		}
		return true
	})
}
