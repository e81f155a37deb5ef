package httpapi

import (
	"encoding/json"
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/audit"
	"github.com/harbormaster-dev/harbormaster/internal/bound"
	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/leadsman"
	"github.com/harbormaster-dev/harbormaster/internal/scope"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
	"github.com/harbormaster-dev/harbormaster/internal/switches"
)

var printSkeleton = flag.Bool("openapi.skeleton", false, "print a schema skeleton for every component (a start for a new one)")

// components maps every schema of openapi.json to the Go type it
// describes.
var components = map[string]reflect.Type{
	"StatementRequest":  reflect.TypeFor[statementBody](),
	"StatementResponse": reflect.TypeFor[gateway.ResponseJSON](),
	"RequestView":       reflect.TypeFor[gateway.RequestView](),
	"DelegationsPage":   reflect.TypeFor[DelegationsPage](),
	"DelegationView":    reflect.TypeFor[scope.DelegationView](),
	"RuleReport":        reflect.TypeFor[bound.RuleReport](),
	"TablesView":        reflect.TypeFor[scope.TablesView](),
	"TableView":         reflect.TypeFor[scope.TableView](),
	"ColumnView":        reflect.TypeFor[scope.ColumnView](),
	"RuleRef":           reflect.TypeFor[scope.RuleRef](),
	"ScopeRule":         reflect.TypeFor[scope.ScopeRule](),
	"DelegationUpload":  reflect.TypeFor[delegationBody](),
	"DelegationAnswer":  reflect.TypeFor[DelegationAnswer](),
	"DelegationRefusal": reflect.TypeFor[DelegationRefusal](),
	"Report":            reflect.TypeFor[bound.Report](),
	"Problem":           reflect.TypeFor[bound.Problem](),
	"SignedAct":         reflect.TypeFor[actBody](),
	"QueuePage":         reflect.TypeFor[QueuePage](),
	"ApprovalProposal":  reflect.TypeFor[ApprovalProposal](),
	"AuditsPage":        reflect.TypeFor[AuditsPage](),
	"Audit":             reflect.TypeFor[audit.Audit](),
	"ReviewAnswer":      reflect.TypeFor[ReviewAnswer](),
	"StatusAnswer":      reflect.TypeFor[StatusAnswer](),
	"SwitchesView":      reflect.TypeFor[SwitchesView](),
	"SwitchState":       reflect.TypeFor[switches.State](),
	"SwitchRequest":     reflect.TypeFor[switchBody](),
	"SwitchAnswer":      reflect.TypeFor[SwitchAnswer](),
	"Error":             reflect.TypeFor[errorBody](),
	"Note":              reflect.TypeFor[leadsman.Note](),
	"Gate":              reflect.TypeFor[bound.Gate](),
	"ExprGates":         reflect.TypeFor[bound.ExprGates](),
	"RuleGates":         reflect.TypeFor[bound.RuleGates](),
	"SideEffect":        reflect.TypeFor[bound.SideEffect](),
}

// operation is what the handlers of one route read and answer: the request
// body's schema ("" for none) and the schema of each success status.
type operation struct {
	request string
	success map[string]string
}

var operations = map[string]operation{
	"POST /v1/statements":                 {"StatementRequest", map[string]string{"200": "StatementResponse"}},
	"GET /v1/requests/{id}":               {"", map[string]string{"200": "RequestView"}},
	"GET /v1/delegations":                 {"", map[string]string{"200": "DelegationsPage"}},
	"POST /v1/delegations":                {"DelegationUpload", map[string]string{"201": "DelegationAnswer"}},
	"GET /v1/tables":                      {"", map[string]string{"200": "TablesView"}},
	"GET /v1/openapi.json":                {"", map[string]string{"200": ""}},
	"GET /v1/queue":                       {"", map[string]string{"200": "QueuePage"}},
	"GET /v1/requests/{id}/approval":      {"", map[string]string{"200": "ApprovalProposal"}},
	"POST /v1/requests/{id}/preview":      {"", map[string]string{"200": "RequestView"}},
	"GET /v1/requests/{id}/note":          {"", map[string]string{"200": "Note"}},
	"POST /v1/requests/{id}/approve":      {"SignedAct", map[string]string{"200": "RequestView"}},
	"POST /v1/requests/{id}/deny":         {"SignedAct", map[string]string{"200": "RequestView"}},
	"POST /v1/delegations/{id}/revoke":    {"SignedAct", map[string]string{"200": "DelegationAnswer"}},
	"GET /v1/switches":                    {"", map[string]string{"200": "SwitchesView"}},
	"POST /v1/switches":                   {"SwitchRequest", map[string]string{"200": "SwitchAnswer"}},
	"GET /v1/audit":                       {"", map[string]string{"200": "AuditsPage"}},
	"GET /v1/audit/{id}":                  {"", map[string]string{"200": "Audit"}},
	"POST /v1/audit/{id}/review":          {"SignedAct", map[string]string{"200": "ReviewAnswer"}},
	"POST /v1/delegations/{id}/auditable": {"SignedAct", map[string]string{"200": "StatusAnswer"}},
	"POST /v1/delegations/{id}/surveyor":  {"SignedAct", map[string]string{"200": "StatusAnswer"}},
	"POST /v1/delegations/{id}/reinstate": {"SignedAct", map[string]string{"200": "StatusAnswer"}},
}

type doc struct {
	OpenAPI    string                               `json:"openapi"`
	Paths      map[string]map[string]docOperation   `json:"paths"`
	Components struct{ Schemas map[string]jsonAny } `json:"components"`
}

type jsonAny = map[string]any

type docOperation struct {
	OperationID string `json:"operationId"`
	RequestBody *struct {
		Content map[string]struct{ Schema jsonAny } `json:"content"`
	} `json:"requestBody"`
	Responses map[string]struct {
		Content map[string]struct{ Schema jsonAny } `json:"content"`
	} `json:"responses"`
}

func readDoc(t *testing.T) doc {
	t.Helper()
	var d doc
	dec := json.NewDecoder(strings.NewReader(string(OpenAPI)))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if d.OpenAPI != "3.1.0" {
		t.Fatalf("openapi.json is OpenAPI %q, want 3.1.0", d.OpenAPI)
	}
	return d
}

// TestOpenAPIMatchesHandlers keeps openapi.json true to the handlers, both
// ways: its paths are the routes the Server registers under /v1; each
// operation's request and success schemas are the ones the handlers use;
// every schema's properties, required properties and JSON types are the Go
// type's (by reflection); and its error codes are exactly the codes the
// handlers can write (read from the source).
func TestOpenAPIMatchesHandlers(t *testing.T) {
	d := readDoc(t)
	if *printSkeleton {
		out := map[string]any{}
		for name, gt := range components {
			out[name] = skeleton(gt)
		}
		j, _ := json.MarshalIndent(out, "", "  ")
		t.Logf("%s", j)
	}

	// Routes, both ways.
	s, err := New(nil, Config{})
	if err != nil {
		t.Fatal(err)
	}
	RegisterNotes(s, nil) // node.Start adds the notes' route
	var routes, described []string
	for _, p := range s.Routes() {
		if method, path, ok := strings.Cut(p, " "); ok && strings.HasPrefix(path, "/v1/") {
			routes = append(routes, method+" "+path)
		}
	}
	for path, ops := range d.Paths {
		for method := range ops {
			if method == "parameters" {
				continue
			}
			described = append(described, strings.ToUpper(method)+" "+path)
		}
	}
	sort.Strings(routes)
	sort.Strings(described)
	for _, r := range routes {
		if !slices.Contains(described, r) {
			t.Errorf("route %s is not in openapi.json", r)
		}
		if _, ok := operations[r]; !ok {
			t.Errorf("route %s is not in this test's operations", r)
		}
	}
	for _, r := range described {
		if !slices.Contains(routes, r) {
			t.Errorf("openapi.json describes %s, which no handler serves", r)
		}
	}

	// Each operation's request and success schemas.
	ids := map[string]bool{}
	for key, want := range operations {
		method, path, _ := strings.Cut(key, " ")
		op, ok := d.Paths[path][strings.ToLower(method)]
		if !ok {
			continue // reported above
		}
		if op.OperationID == "" || ids[op.OperationID] {
			t.Errorf("%s: operationId %q missing or not unique", key, op.OperationID)
		}
		ids[op.OperationID] = true
		got := ""
		if op.RequestBody != nil {
			got = refName(op.RequestBody.Content["application/json"].Schema)
			if got == "" {
				t.Errorf("%s: the request body is not application/json with a $ref", key)
			}
		}
		if got != want.request {
			t.Errorf("%s: request body %q, want %q", key, got, want.request)
		}
		for status, schema := range want.success {
			resp, ok := op.Responses[status]
			if !ok {
				t.Errorf("%s: no %s response", key, status)
				continue
			}
			if schema == "" {
				continue
			}
			if got := refName(resp.Content["application/json"].Schema); got != schema {
				t.Errorf("%s %s: schema %q, want %q", key, status, got, schema)
			}
		}
		for status, resp := range op.Responses {
			n, _ := strconv.Atoi(status)
			if n >= 400 {
				sc := resp.Content["application/json"].Schema
				refs := []string{refName(sc)}
				if alts, ok := sc["oneOf"].([]any); ok {
					refs = refs[:0]
					for _, a := range alts {
						refs = append(refs, refName(a.(jsonAny)))
					}
				}
				for _, got := range refs {
					if got != "Error" && got != "DelegationRefusal" {
						t.Errorf("%s %s: an error answer whose schema is %q, not Error", key, status, got)
					}
				}
			} else if _, ok := want.success[status]; !ok {
				t.Errorf("%s: openapi.json has a %s answer the handler does not give", key, status)
			}
		}
		if strings.HasPrefix(key, "POST ") && want.request != "" {
			for _, status := range []string{"400", "413", "415"} {
				if _, ok := op.Responses[status]; !ok {
					t.Errorf("%s: no %s response", key, status)
				}
			}
		}
	}

	// Schemas, both ways, field by field.
	for name := range d.Components.Schemas {
		if _, ok := components[name]; !ok {
			t.Errorf("openapi.json has a schema %s that this test does not map to a Go type", name)
		}
	}
	for name, gt := range components {
		sc, ok := d.Components.Schemas[name]
		if !ok {
			t.Errorf("openapi.json lacks the schema %s (of %s); -openapi.skeleton prints a start", name, gt)
			continue
		}
		compareStruct(t, name, sc, gt)
	}

	// Error codes, both ways.
	codes := handlerErrorCodes(t)
	var described2 []string
	errProps, _ := d.Components.Schemas["Error"]["properties"].(jsonAny)
	inner, _ := errProps["error"].(jsonAny)
	innerProps, _ := inner["properties"].(jsonAny)
	code, _ := innerProps["code"].(jsonAny)
	enum, _ := code["enum"].([]any)
	for _, c := range enum {
		described2 = append(described2, c.(string))
	}
	for _, c := range codes {
		if !slices.Contains(described2, c) {
			t.Errorf("the handlers answer the error code %s, which openapi.json's Error does not list", c)
		}
	}
	for _, c := range described2 {
		if !slices.Contains(codes, c) {
			t.Errorf("openapi.json lists the error code %s, which no handler answers", c)
		}
	}
}

func refName(s jsonAny) string {
	ref, _ := s["$ref"].(string)
	return strings.TrimPrefix(ref, "#/components/schemas/")
}

// jsonFields are a struct's JSON properties, embedded structs flattened.
type jsonField struct {
	name     string
	t        reflect.Type
	optional bool
}

func jsonFields(gt reflect.Type) []jsonField {
	var out []jsonField
	for f := range gt.Fields() {
		tag := f.Tag.Get("json")
		if tag == "-" || !f.IsExported() && !f.Anonymous {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			out = append(out, jsonFields(f.Type)...)
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, jsonField{name, f.Type, strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero")})
	}
	return out
}

// compareStruct checks a schema against a struct type.
func compareStruct(t *testing.T, where string, sc jsonAny, gt reflect.Type) {
	t.Helper()
	if ty, _ := sc["type"].(string); ty != "object" {
		t.Errorf("%s: type %v, want object", where, sc["type"])
		return
	}
	props, _ := sc["properties"].(jsonAny)
	var req []string
	if rs, ok := sc["required"].([]any); ok {
		for _, r := range rs {
			req = append(req, r.(string))
		}
	}
	if ap, ok := sc["additionalProperties"]; ok && ap != false {
		t.Errorf("%s: additionalProperties %v: the Go type has a fixed set of fields", where, ap)
	}
	seen := map[string]bool{}
	for _, f := range jsonFields(gt) {
		seen[f.name] = true
		p, ok := props[f.name].(jsonAny)
		if !ok {
			t.Errorf("%s: lacks the property %s (%s)", where, f.name, f.t)
			continue
		}
		if d, _ := p["description"].(string); d == "" && p["$ref"] == nil {
			t.Errorf("%s.%s: no description", where, f.name)
		}
		if slices.Contains(req, f.name) == f.optional {
			t.Errorf("%s.%s: required is %v, but the field is omitempty=%v", where, f.name, !f.optional, f.optional)
		}
		compareType(t, where+"."+f.name, p, f.t)
	}
	for name := range props {
		if !seen[name] {
			t.Errorf("%s: the property %s is no field of %s", where, name, gt)
		}
	}
}

var (
	timeType = reflect.TypeFor[time.Time]()
	rawType  = reflect.TypeFor[json.RawMessage]()
)

func componentOf(gt reflect.Type) string {
	for name, c := range components {
		if c == gt {
			return name
		}
	}
	return ""
}

func docTypes(p jsonAny) []string {
	switch v := p["type"].(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, x := range v {
			out = append(out, x.(string))
		}
		return out
	}
	return nil
}

// compareType checks one property's schema against a Go type.
func compareType(t *testing.T, where string, p jsonAny, gt reflect.Type) {
	t.Helper()
	nullable := false
	for gt.Kind() == reflect.Pointer {
		gt, nullable = gt.Elem(), true
	}
	if gt.Kind() == reflect.Slice || gt.Kind() == reflect.Map {
		nullable = true
	}
	if gt == rawType || gt.Kind() == reflect.Interface {
		if docTypes(p) != nil || p["$ref"] != nil {
			t.Errorf("%s: any JSON value, so no type: %v", where, p)
		}
		return
	}
	if name := componentOf(gt); name != "" {
		ref := refName(p)
		if ref == "" {
			// A nullable reference: {"oneOf": [{"$ref"}, {"type": "null"}]}.
			if alts, ok := p["oneOf"].([]any); ok && nullable && len(alts) == 2 {
				ref = refName(alts[0].(jsonAny))
			}
		}
		if ref != name {
			t.Errorf("%s: %v, want a $ref to %s", where, p, name)
		}
		return
	}
	want := ""
	switch {
	case gt == timeType:
		want = "string"
	case gt.Kind() == reflect.String:
		want = "string"
	case gt.Kind() == reflect.Bool:
		want = "boolean"
	case gt.Kind() >= reflect.Int && gt.Kind() <= reflect.Uint64:
		want = "integer"
	case gt.Kind() == reflect.Float32 || gt.Kind() == reflect.Float64:
		want = "number"
	case gt.Kind() == reflect.Slice:
		want = "array"
	case gt.Kind() == reflect.Map:
		want = "object"
	case gt.Kind() == reflect.Struct:
		want = "object"
	}
	types := docTypes(p)
	if !slices.Contains(types, want) {
		t.Errorf("%s: type %v, want %s (%s)", where, types, want, gt)
		return
	}
	for _, ty := range types {
		if ty != want && !(ty == "null" && nullable) {
			t.Errorf("%s: type %v, but %s is never %s", where, types, gt, ty)
		}
	}
	switch gt.Kind() {
	case reflect.Slice:
		items, _ := p["items"].(jsonAny)
		compareType(t, where+"[]", items, gt.Elem())
	case reflect.Map:
		if ap, ok := p["additionalProperties"].(jsonAny); ok {
			compareType(t, where+"{}", ap, gt.Elem())
		} else if gt.Elem().Kind() != reflect.Interface {
			t.Errorf("%s: a map of %s, so additionalProperties", where, gt.Elem())
		}
	case reflect.Struct:
		if gt != timeType {
			compareStruct(t, where, p, gt)
		}
	}
}

// skeleton is a schema for gt: a start for a new component.
func skeleton(gt reflect.Type) jsonAny {
	props := jsonAny{}
	var req []string
	for _, f := range jsonFields(gt) {
		props[f.name] = skeletonType(f.t)
		if !f.optional {
			req = append(req, f.name)
		}
	}
	return jsonAny{"type": "object", "additionalProperties": false, "required": req, "properties": props}
}

func skeletonType(gt reflect.Type) jsonAny {
	null := false
	for gt.Kind() == reflect.Pointer {
		gt, null = gt.Elem(), true
	}
	if gt == rawType || gt.Kind() == reflect.Interface {
		return jsonAny{"description": ""}
	}
	if name := componentOf(gt); name != "" {
		return jsonAny{"$ref": "#/components/schemas/" + name}
	}
	var p jsonAny
	switch {
	case gt == timeType:
		p = jsonAny{"type": "string", "format": "date-time"}
	case gt.Kind() == reflect.String:
		p = jsonAny{"type": "string"}
	case gt.Kind() == reflect.Bool:
		p = jsonAny{"type": "boolean"}
	case gt.Kind() >= reflect.Int && gt.Kind() <= reflect.Uint64:
		p = jsonAny{"type": "integer"}
	case gt.Kind() == reflect.Slice:
		p = jsonAny{"type": "array", "items": skeletonType(gt.Elem())}
	case gt.Kind() == reflect.Map:
		p = jsonAny{"type": "object", "additionalProperties": skeletonType(gt.Elem())}
	case gt.Kind() == reflect.Struct:
		p = skeleton(gt)
	default:
		p = jsonAny{}
	}
	if null {
		p["type"] = []any{p["type"], "null"}
	}
	p["description"] = ""
	return p
}

// handlerErrorCodes reads the error codes the handlers can answer from
// this package's source: the code argument of every writeError and
// writeErrorReq call and of DelegationRefusal, and the codes that reach
// them through a variable: the statement path's SQL errors ("sql_" and a
// sqlcheck code) and its flood refusals.
func handlerErrorCodes(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	set := map[string]bool{"delegation_refused": true}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			fn, ok := call.Fun.(*ast.Ident)
			if !ok || (fn.Name != "writeError" && fn.Name != "writeErrorReq") || len(call.Args) < 3 {
				return true
			}
			switch a := call.Args[2].(type) {
			case *ast.BasicLit:
				c, _ := strconv.Unquote(a.Value)
				set[c] = true
			case *ast.BinaryExpr: // "sql_"+sqlErr.Code
				if l, ok := a.X.(*ast.BasicLit); ok && l.Value == `"sql_"` {
					for _, c := range sqlErrorCodes {
						set["sql_"+c] = true
					}
					return true
				}
				t.Errorf("%s: an error code written as %T: add it to handlerErrorCodes", fset.Position(a.Pos()), a)
			case *ast.SelectorExpr: // flood.Code
				if a.Sel.Name == "Code" {
					set[gateway.FloodReferralRate], set[gateway.FloodTooManyWait] = true, true
					return true
				}
				t.Errorf("%s: an error code written as %s: add it to handlerErrorCodes", fset.Position(a.Pos()), a.Sel.Name)
			default:
				if id, ok := a.(*ast.Ident); !ok || id.Name != "code" { // writeError's own parameter
					t.Errorf("%s: an error code written as %T: add it to handlerErrorCodes", fset.Position(a.Pos()), a)
				}
			}
			return true
		})
	}
	var out []string
	for c := range set {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// sqlErrorCodes are the codes of gateway.SQLError: a statement that could
// not be parsed, or that no human could approve.
var sqlErrorCodes = []string{sqlcheck.CodeParseError, sqlcheck.CodeInputTooLarge, sqlcheck.CodeInputTooDeep,
	sqlcheck.CodeEmptyStatement, sqlcheck.CodeMultipleStatements, sqlcheck.CodeStatementNotAllow,
	sqlcheck.CodeSelectInto, sqlcheck.CodeLockingClause, sqlcheck.CodeParamNotAllowed}

// TestSQLErrorCodes: the codes above are exactly the ones the statement
// path answers as errors (gateway.SQLError.Unapprovable and
// sqlcheck.Analysis.Unparseable), so the description lists every one.
func TestSQLErrorCodes(t *testing.T) {
	for _, c := range sqlErrorCodes {
		e := &gateway.SQLError{Code: c}
		a := &sqlcheck.Analysis{Reasons: []sqlcheck.Reason{{Code: c}}}
		if !e.Unapprovable() && !a.Unparseable() {
			t.Errorf("%s is neither unparseable nor unapprovable", c)
		}
	}
	for _, c := range []string{sqlcheck.CodeUnknownRelation, sqlcheck.CodeFunctionNotAllowed, sqlcheck.CodeRelationNotCovered} {
		if (&gateway.SQLError{Code: c}).Unapprovable() {
			t.Errorf("%s is listed as unapprovable", c)
		}
	}
}
