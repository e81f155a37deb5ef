package pgwire

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	pg "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/harbormaster-dev/harbormaster/internal/shadow"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// limits are the caps the statement path puts on a text before its parser
// sees it (sqlcheck's defaults, which the gateway uses).
var limits = sqlcheck.Limits{}.WithDefaults()

// errPastLimits is a text the front does not parse: past the limits.
var errPastLimits = errors.New("the statement is past the limits the statement path parses")

// parseText parses a text at the front only once it is within the limits
// the statement path checks before its own parse: the C parser crashes the
// process on a long chain of operators (SIGSEGV in cgo, which recover
// cannot catch), and an agent's 1 MiB message holds one. A text past them
// is errPastLimits; the caller hands it to the statement path unparsed,
// which records and refuses it, as over HTTP.
func parseText(sql string) (*pg.ParseResult, error) {
	if _, ok := sqlcheck.Precheck(sql, limits); !ok {
		return nil, errPastLimits
	}
	return pg.Parse(sql)
}

// paramInfo is what a statement's text says of its parameters: how many
// ($n up to n) and the type a cast in the text gives each ($1::int4).
type paramInfo struct {
	count int
	casts map[int]uint32
	uses  map[int]int // how many times the text names $n
	// messages counts the tree's messages, for what holding it weighs.
	messages int
}

func params(tree *pg.ParseResult) paramInfo {
	info := paramInfo{casts: map[int]uint32{}, uses: map[int]int{}}
	sqlcheck.Visit(tree.ProtoReflect(), func(m protoreflect.Message) bool {
		info.messages++
		switch x := m.Interface().(type) {
		case *pg.ParamRef:
			info.count = max(info.count, int(x.Number))
			info.uses[int(x.Number)]++
		case *pg.TypeCast:
			if p := x.Arg.GetParamRef(); p != nil && x.TypeName != nil {
				if oid := typeNameOID(x.TypeName); oid != 0 {
					info.casts[int(p.Number)] = oid
				}
			}
		}
		return true
	})
	return info
}

// typeNameOID is the OID of a cast's type when it is one of paramTypes.
func typeNameOID(tn *pg.TypeName) uint32 {
	names := tn.Names
	if len(names) == 0 || len(names) > 2 || len(names) == 2 && names[0].GetString_().GetSval() != "pg_catalog" {
		return 0
	}
	oid := oidByName[names[len(names)-1].GetString_().GetSval()]
	if oid != 0 && len(tn.ArrayBounds) > 0 {
		return arrayOID(oid)
	}
	return oid
}

// boundParam is one parameter's value as the client bound it, as text.
type boundParam struct {
	null bool
	text string
	oid  uint32 // declared or cast type; 0: untyped
}

// inline replaces every $n of the tree with its value as a constant: a
// string literal cast to the parameter's type (pg_catalog.TYPE), or an
// untyped string literal when the parameter has no type, which
// PostgreSQL resolves from its context exactly as it would have resolved
// the parameter. The tree is then a statement with constants only, which
// the gateway checks and whose deparsed text the Pilot runs.
func inline(tree *pg.ParseResult, vals []boundParam) error {
	var bad error
	sqlcheck.Visit(tree.ProtoReflect(), func(m protoreflect.Message) bool {
		n, ok := m.Interface().(*pg.Node)
		if !ok {
			return true
		}
		p := n.GetParamRef()
		if p == nil {
			return true
		}
		i := int(p.Number) - 1
		if i < 0 || i >= len(vals) {
			bad = fmt.Errorf("there is no parameter $%d", p.Number)
			return false
		}
		n.Node = constNode(vals[i]).Node
		return false
	})
	return bad
}

func constNode(v boundParam) *pg.Node {
	k := &pg.A_Const{Location: -1}
	if v.null {
		k.Isnull = true
	} else {
		k.Val = &pg.A_Const_Sval{Sval: &pg.String{Sval: v.text}}
	}
	return typed(&pg.Node{Node: &pg.Node_AConst{AConst: k}}, v.oid)
}

// typed is n cast to pg_catalog.TYPE when oid is one of paramTypes, else
// n itself.
func typed(n *pg.Node, oid uint32) *pg.Node {
	t, ok := paramTypes[oid]
	if !ok {
		return n
	}
	tn := &pg.TypeName{Names: []*pg.Node{pg.MakeStrNode("pg_catalog"), pg.MakeStrNode(t.name)}, Typemod: -1, Location: -1}
	if t.array {
		tn.ArrayBounds = []*pg.Node{pg.MakeIntNode(-1)}
	}
	return &pg.Node{Node: &pg.Node_TypeCast{TypeCast: &pg.TypeCast{Arg: n, TypeName: tn, Location: -1}}}
}

// describeText is a prepared statement's text as the gateway describes
// it: its placeholders kept, each cast as inline will cast its value
// ($1::pg_catalog.int4 for a parameter declared int4). Its NULL twin
// (sqlcheck.NullTwin) is then the very statement Bind makes of it with
// every value NULL, so the columns described are those Execute returns.
func describeText(st *prepared) (string, error) {
	if len(st.oids) == 0 {
		return st.sql, nil
	}
	tree := proto.Clone(st.tree).(*pg.ParseResult)
	sqlcheck.Visit(tree.ProtoReflect(), func(m protoreflect.Message) bool {
		n, ok := m.Interface().(*pg.Node)
		if !ok {
			return true
		}
		p := n.GetParamRef()
		if p == nil {
			return true
		}
		if i := int(p.Number) - 1; i >= 0 && i < len(st.oids) {
			ref := &pg.Node{Node: &pg.Node_ParamRef{ParamRef: &pg.ParamRef{Number: p.Number, Location: -1}}}
			n.Node = typed(ref, st.oids[i]).Node
		}
		return false
	})
	return pg.Deparse(tree)
}

// nullBound is the statement Bind makes of st with every value NULL: what
// the front classifies it as once bound.
func nullBound(st *prepared) (*pg.ParseResult, error) {
	if len(st.oids) == 0 {
		return st.tree, nil
	}
	vals := make([]boundParam, len(st.oids))
	for i, oid := range st.oids {
		vals[i] = boundParam{null: true, oid: oid}
	}
	tree := proto.Clone(st.tree).(*pg.ParseResult)
	if err := inline(tree, vals); err != nil {
		return nil, err
	}
	return tree, nil
}

// checkText refuses a parameter value PostgreSQL could not hold as text.
func checkText(i int, s string) *wireError {
	if !utf8.ValidString(s) {
		return errorf(stateCharNotInRepertory, fmt.Sprintf("parameter $%d is not valid UTF-8", i+1))
	}
	if strings.IndexByte(s, 0) >= 0 {
		return errorf(stateCharNotInRepertory, fmt.Sprintf("parameter $%d contains a NUL byte, which PostgreSQL text cannot hold", i+1))
	}
	return nil
}

// kind is what the front does with one statement.
type kind int

const (
	kindGoverned   kind = iota // the statement path, as POST /v1/statements
	kindEmpty                  // no statement at all
	kindSet                    // SET/RESET of a session setting: answered here
	kindShow                   // SHOW of a session setting: answered here
	kindTxn                    // BEGIN, COMMIT, ROLLBACK, SAVEPOINT... (transactions.go)
	kindWait                   // SELECT harbormaster_wait('req_...'): answered here
	kindCatalog                // reads pg_catalog or information_schema: refused
	kindCopy                   // COPY: refused
	kindDeallocate             // DEALLOCATE: answered here
	kindDiscard                // DISCARD: answered here
	kindFront                  // a SELECT of constants and session functions (answers.go): answered here
	kindClose                  // CLOSE a cursor, or ALL: answered here
	kindUnlisten               // UNLISTEN: answered here (the front never listens)
	kindResetDo                // the DO block of asyncpg's reset: answered here
	kindBatch                  // several statements, each answered here
)

// batchable are the kinds a text of several statements may hold and still
// be answered here, statement by statement (session resets: RESET ALL;
// CLOSE ALL; UNLISTEN *; SELECT pg_advisory_unlock_all()).
var batchable = map[kind]bool{kindTxn: true, kindSet: true, kindShow: true, kindDeallocate: true, kindDiscard: true, kindFront: true,
	kindClose: true, kindUnlisten: true, kindResetDo: true}

// classify says what the front does with a parsed text (sql is its text,
// or "" when the tree is no longer the text's). Several statements go to
// the statement path together (which refers them as a whole, as it does
// over HTTP) unless every one is answered here.
func classify(tree *pg.ParseResult, sql string) kind {
	if len(tree.Stmts) == 0 {
		return kindEmpty
	}
	if len(tree.Stmts) > 1 {
		for _, s := range tree.Stmts {
			if !batchable[stmtKind(s.Stmt, sql)] {
				return kindGoverned
			}
		}
		return kindBatch
	}
	return stmtKind(tree.Stmts[0].Stmt, sql)
}

func stmtKind(n *pg.Node, sql string) kind {
	switch x := n.GetNode().(type) {
	case *pg.Node_VariableSetStmt:
		return kindSet
	case *pg.Node_VariableShowStmt:
		return kindShow
	case *pg.Node_TransactionStmt:
		return kindTxn
	case *pg.Node_CopyStmt:
		return kindCopy
	case *pg.Node_DeallocateStmt:
		return kindDeallocate
	case *pg.Node_DiscardStmt:
		return kindDiscard
	case *pg.Node_ClosePortalStmt:
		return kindClose
	case *pg.Node_UnlistenStmt:
		return kindUnlisten
	case *pg.Node_DoStmt:
		if isResetDo(x.DoStmt) {
			return kindResetDo
		}
	case *pg.Node_SelectStmt:
		if _, ok := waitCall(x.SelectStmt); ok {
			return kindWait
		}
		if _, werr := frontSelect(x.SelectStmt, &frontEnv{sql: sql}); werr != errNotAnswered {
			return kindFront
		}
	}
	if readsCatalog(n) {
		return kindCatalog
	}
	return kindGoverned
}

// resetDoBody is the DO block asyncpg (before 0.30) sends in its reset
// batch, words separated by single spaces: it unlistens when the session
// listens, which a session of the front never does.
const resetDoBody = "BEGIN PERFORM * FROM pg_listening_channels() LIMIT 1; IF FOUND THEN UNLISTEN *; END IF; END;"

func isResetDo(d *pg.DoStmt) bool {
	body, lang := "", "plpgsql"
	for _, a := range d.Args {
		de := a.GetDefElem()
		if de == nil {
			return false
		}
		switch de.Defname {
		case "as":
			body = de.Arg.GetString_().GetSval()
		case "language":
			lang = de.Arg.GetString_().GetSval()
		default:
			return false
		}
	}
	return lang == "plpgsql" && strings.Join(strings.Fields(body), " ") == resetDoBody
}

// readsCatalog reports a statement naming a relation in pg_catalog or
// information_schema, or an unqualified pg_* relation (which PostgreSQL
// looks up in pg_catalog first), or one that names no other relation and
// calls a function that reads the catalog (has_table_privilege,
// format_type, pg_get_indexdef, ...) or casts to a reg* type. It reads
// the text only, never the target, so its answer is the same for every
// target.
func readsCatalog(n *pg.Node) bool {
	rel, other, fn := false, false, false
	sqlcheck.Visit(n.ProtoReflect(), func(m protoreflect.Message) bool {
		switch x := m.Interface().(type) {
		case *pg.RangeVar:
			if shadow.IsCatalogRelation(x.Schemaname, x.Relname) {
				rel = true
			} else {
				other = true
			}
			return false
		case *pg.FuncCall:
			if len(x.Funcname) > 0 && catalogFunc(x.Funcname[len(x.Funcname)-1].GetString_().GetSval()) {
				fn = true
			}
		case *pg.TypeCast:
			if names := x.GetTypeName().GetNames(); len(names) > 0 && strings.HasPrefix(strings.ToLower(names[len(names)-1].GetString_().GetSval()), "reg") {
				fn = true
			}
		}
		return true
	})
	return rel || fn && !other
}

// catalogWords are words in the name of every function catalogFunc
// takes, for quickVerb.
var catalogWords = []string{"pg_", "privilege", "format_type", "description", "to_reg", "::reg", "visible"}

// catalogFunc reports a built-in function that reads the catalog. Other
// functions (pg_sleep, random) leave a statement to the statement path.
func catalogFunc(name string) bool {
	name = strings.ToLower(name)
	switch {
	case strings.HasPrefix(name, "pg_get_"), strings.HasSuffix(name, "_is_visible"),
		strings.HasPrefix(name, "has_") && strings.HasSuffix(name, "_privilege"),
		strings.HasPrefix(name, "to_reg"), strings.HasSuffix(name, "_description"):
		return true
	}
	switch name {
	case "format_type", "pg_has_role", "pg_relation_size", "pg_total_relation_size", "pg_table_size", "pg_indexes_size",
		"pg_database_size", "pg_describe_object", "pg_identify_object", "pg_encoding_to_char", "pg_relation_filenode":
		return true
	}
	return false
}

// waitCall recognizes SELECT harbormaster_wait('req_...' [, seconds]) and
// returns its arguments.
type waitArgs struct {
	id      string
	seconds float64 // 0: the default
}

func waitCall(s *pg.SelectStmt) (waitArgs, bool) {
	if len(s.TargetList) != 1 || len(s.FromClause) > 0 || s.WhereClause != nil || len(s.ValuesLists) > 0 || s.Op != pg.SetOperation_SETOP_NONE {
		return waitArgs{}, false
	}
	f := s.TargetList[0].GetResTarget().GetVal().GetFuncCall()
	if f == nil {
		return waitArgs{}, false
	}
	var names []string
	for _, n := range f.Funcname {
		names = append(names, n.GetString_().GetSval())
	}
	if name := strings.Join(names, "."); name != "harbormaster_wait" && name != "harbormaster.wait" {
		return waitArgs{}, false
	}
	var a waitArgs
	if len(f.Args) < 1 || len(f.Args) > 2 {
		return waitArgs{}, true // recognized, and refused for its arguments
	}
	a.id = constString(f.Args[0])
	if len(f.Args) == 2 {
		fmt.Sscan(constString(f.Args[1]), &a.seconds)
	}
	return a, true
}

// constString is a constant's text, looking through a cast.
func constString(n *pg.Node) string {
	if tc := n.GetTypeCast(); tc != nil {
		n = tc.Arg
	}
	k := n.GetAConst()
	if k == nil || k.Isnull {
		return ""
	}
	switch v := k.Val.(type) {
	case *pg.A_Const_Sval:
		return v.Sval.Sval
	case *pg.A_Const_Ival:
		return fmt.Sprint(v.Ival.Ival)
	case *pg.A_Const_Fval:
		return v.Fval.Fval
	}
	return ""
}

// verbOf is the command of a parsed text's first statement, for its
// CommandComplete tag: INSERT, UPDATE, DELETE, MERGE or SELECT.
func verbOf(tree *pg.ParseResult) string {
	if tree == nil || len(tree.Stmts) == 0 {
		return "SELECT"
	}
	switch tree.Stmts[0].Stmt.GetNode().(type) {
	case *pg.Node_InsertStmt:
		return "INSERT"
	case *pg.Node_UpdateStmt:
		return "UPDATE"
	case *pg.Node_DeleteStmt:
		return "DELETE"
	case *pg.Node_MergeStmt:
		return "MERGE"
	}
	return "SELECT"
}

// quickVerb recognizes, without parsing, a text that can only be a
// governed statement: it starts with SELECT, INSERT, UPDATE or DELETE and
// names nothing the front answers itself (no pg_ or information_schema
// relation, no harbormaster_wait, no parameter, no session function, and
// a SELECT has a FROM). Anything else is parsed
// (classify). Either way the statement path parses it for its decision;
// this spares the front a second parse of the common case.
func quickVerb(sql string) (string, bool) {
	i := 0
	for i < len(sql) && (sql[i] == ' ' || sql[i] == '\t' || sql[i] == '\n' || sql[i] == '\r') {
		i++
	}
	j := i
	for j < len(sql) && (sql[j] >= 'a' && sql[j] <= 'z' || sql[j] >= 'A' && sql[j] <= 'Z') {
		j++
	}
	if j == len(sql) || j == i || sql[j] != ' ' && sql[j] != '\t' && sql[j] != '\n' && sql[j] != '\r' {
		return "", false
	}
	verb := strings.ToUpper(sql[i:j])
	switch verb {
	case "SELECT", "INSERT", "UPDATE", "DELETE":
	default:
		return "", false
	}
	lower := strings.ToLower(sql)
	for _, w := range catalogWords {
		if strings.Contains(lower, w) {
			return "", false
		}
	}
	if strings.Contains(lower, "information_schema") || strings.Contains(lower, "harbormaster_wait") ||
		strings.Contains(lower, "harbormaster.wait") || strings.ContainsRune(sql, '$') {
		return "", false
	}
	if verb == "SELECT" {
		// A SELECT without FROM, or naming a function answered here, may
		// be a session query (answers.go).
		if !strings.Contains(lower, "from") {
			return "", false
		}
		for name := range frontFuncs {
			if strings.Contains(lower, name) {
				return "", false
			}
		}
	}
	return verb, true
}

// commandTag is the CommandComplete tag of a statement that ran.
func commandTag(verb string, rows int64) string {
	if verb == "INSERT" {
		return fmt.Sprintf("INSERT 0 %d", rows)
	}
	return fmt.Sprintf("%s %d", verb, rows)
}
