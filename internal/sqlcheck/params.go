package sqlcheck

import (
	"errors"
	"fmt"

	pg "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// A statement with $n placeholders is never checked as it is (a
// placeholder refers: CodeParamNotAllowed). To describe one without its
// values (the wire front's Describe of a prepared statement), the gateway
// and the Pilot each check its NULL twin: the same tree with every
// placeholder replaced by a NULL constant, any cast around it kept
// ($1::int4 becomes NULL::int4). The check reads no constant's value, so
// the twin's decision is the decision of the statement with any values;
// and a NULL is typed from its context exactly as the untyped string
// constant a bound value becomes, so the twin's result columns are those
// the statement returns once its values are inlined.

// ErrNoParamTwin is a text whose NULL twin cannot be made: it does not
// parse, or is not exactly one statement.
var ErrNoParamTwin = errors.New("the statement has no NULL twin")

// NullTwin parses sql (within lim) and returns its NULL twin's text, the
// parsed tree of sql itself, and how many parameters it names (its
// highest $n).
func NullTwin(sql string, lim Limits) (twin string, tree *pg.ParseResult, params int, err error) {
	if r, ok := precheck(sql, lim.WithDefaults()); !ok {
		return "", nil, 0, fmt.Errorf("%w: %s", ErrNoParamTwin, r.Message)
	}
	tree, err = pg.Parse(sql)
	if err != nil {
		return "", nil, 0, fmt.Errorf("%w: %v", ErrNoParamTwin, err)
	}
	if len(tree.Stmts) != 1 {
		return "", nil, 0, fmt.Errorf("%w: %d statements", ErrNoParamTwin, len(tree.Stmts))
	}
	nulls := proto.Clone(tree).(*pg.ParseResult)
	params = NullParams(nulls)
	twin, err = pg.Deparse(&pg.ParseResult{Version: nulls.Version, Stmts: []*pg.RawStmt{{Stmt: nulls.Stmts[0].Stmt}}})
	if err != nil {
		return "", nil, 0, fmt.Errorf("%w: %v", ErrNoParamTwin, err)
	}
	return twin, tree, params, nil
}

// NullParams replaces, in place, every $n of tree with a NULL constant
// (a cast around it stays) and returns the highest n.
func NullParams(tree *pg.ParseResult) int {
	n := 0
	Visit(tree.ProtoReflect(), func(m protoreflect.Message) bool {
		node, ok := m.Interface().(*pg.Node)
		if !ok {
			return true
		}
		p := node.GetParamRef()
		if p == nil {
			return true
		}
		n = max(n, int(p.Number))
		node.Node = &pg.Node_AConst{AConst: &pg.A_Const{Isnull: true, Location: -1}}
		return false
	})
	return n
}

// RestoreParams puts the placeholders of orig back into twin, the parse
// tree of orig's NULL twin (or the same tree after analysis, before any
// guard changed it): the k-th constant or placeholder of orig, in the
// order Visit walks, is the k-th constant of twin. It fails, leaving twin
// unusable, when the trees do not correspond that way.
func RestoreParams(orig, twin *pg.ParseResult) error {
	var want []*pg.ParamRef // per constant of twin: its placeholder, or nil
	Visit(orig.ProtoReflect(), func(m protoreflect.Message) bool {
		switch x := m.Interface().(type) {
		case *pg.ParamRef:
			want = append(want, x)
		case *pg.A_Const:
			want = append(want, nil)
		}
		return true
	})
	i := 0
	var bad error
	Visit(twin.ProtoReflect(), func(m protoreflect.Message) bool {
		if bad != nil {
			return false
		}
		var node *pg.Node
		switch x := m.Interface().(type) {
		case *pg.Node:
			if x.GetParamRef() != nil {
				bad = errors.New("the twin already holds a placeholder")
				return false
			}
			if x.GetAConst() == nil {
				return true
			}
			node = x
		case *pg.A_Const:
			// A constant held directly, not as a node: never a placeholder's.
		default:
			return true
		}
		if i >= len(want) {
			bad = errors.New("the twin has more constants than the statement")
			return false
		}
		p := want[i]
		i++
		if p == nil {
			return false
		}
		if node == nil || !node.GetAConst().Isnull {
			bad = fmt.Errorf("constant %d of the twin is not the NULL of $%d", i, p.Number)
			return false
		}
		node.Node = &pg.Node_ParamRef{ParamRef: &pg.ParamRef{Number: p.Number, Location: -1}}
		return false
	})
	if bad == nil && i != len(want) {
		bad = fmt.Errorf("the twin has %d constants, the statement %d", i, len(want))
	}
	if bad != nil {
		return fmt.Errorf("%w: %v", ErrNoParamTwin, bad)
	}
	return nil
}
