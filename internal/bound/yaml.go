package bound

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// MaxFileBytes caps a delegation file.
const MaxFileBytes = 1 << 20

// MaxRules caps the rules of one delegation.
const MaxRules = 256

// Delegation is a delegation as written in YAML (DESIGN.md section 4),
// before compilation. Field names are the contract.
type Delegation struct {
	Sentence  string
	Grantee   string
	Target    string
	Expires   *time.Time
	NotBefore *time.Time
	Quota     string
	Allow     []RuleSpec

	// File names the source in error messages.
	File string
	// Lines maps a field path ("expires", "allow[1].fence") to its line.
	Lines map[string]int
}

// RuleSpec is one entry of allow, as written.
type RuleSpec struct {
	Op       string
	Table    string
	Columns  []string
	Fence    string
	Check    string
	MaxRows  *int64
	Residual string
}

// FieldError is a problem with one field of a delegation file.
type FieldError struct {
	File  string
	Line  int
	Field string
	Msg   string
}

func (e *FieldError) Error() string {
	loc := e.File
	if loc == "" {
		loc = "delegation"
	}
	if e.Line > 0 {
		loc = fmt.Sprintf("%s:%d", loc, e.Line)
	}
	if e.Field != "" {
		return fmt.Sprintf("%s: %s: %s", loc, e.Field, e.Msg)
	}
	return fmt.Sprintf("%s: %s", loc, e.Msg)
}

// ErrInvalid is wrapped by every error Parse returns for bad input.
var ErrInvalid = errors.New("invalid delegation")

// ParseError holds every field error of one file.
type ParseError struct{ Errors []*FieldError }

func (e *ParseError) Error() string {
	msgs := make([]string, len(e.Errors))
	for i, fe := range e.Errors {
		msgs[i] = fe.Error()
	}
	return strings.Join(msgs, "\n")
}

// Unwrap lets errors.Is(err, ErrInvalid) work.
func (e *ParseError) Unwrap() error { return ErrInvalid }

var topFields = map[string]bool{"sentence": true, "grantee": true, "target": true, "expires": true, "not_before": true, "quota": true, "allow": true}
var ruleFields = map[string]bool{"op": true, "table": true, "columns": true, "fence": true, "check": true, "max_rows": true, "residual": true}

// Parse reads a delegation file. Unknown fields, wrong types and malformed
// times are errors naming the field and line. Semantic checks (tables,
// columns, expressions, signability) are Compile's.
func Parse(data []byte, file string) (*Delegation, error) {
	p := &parser{d: &Delegation{File: file, Lines: map[string]int{}}}
	if len(data) > MaxFileBytes {
		p.errf(0, "", "the file is %d bytes, over the %d byte limit", len(data), MaxFileBytes)
		return nil, p.err()
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil && err != io.EOF {
		p.errf(0, "", "not valid YAML: %v", err)
		return nil, p.err()
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err != io.EOF {
		p.errf(extra.Line, "", "a delegation file holds exactly one YAML document")
		return nil, p.err()
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		p.errf(doc.Line, "", "a delegation is a YAML mapping (sentence, grantee, target, expires, allow, ...)")
		return nil, p.err()
	}
	p.top(doc.Content[0])
	if len(p.errs) > 0 {
		return nil, p.err()
	}
	return p.d, nil
}

type parser struct {
	d    *Delegation
	errs []*FieldError
}

func (p *parser) errf(line int, field, format string, args ...any) {
	p.errs = append(p.errs, &FieldError{File: p.d.File, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
}

func (p *parser) err() error {
	if len(p.errs) == 0 {
		return nil
	}
	return &ParseError{Errors: p.errs}
}

func (p *parser) top(m *yaml.Node) {
	seen := map[string]bool{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		key := k.Value
		if !topFields[key] {
			p.errf(k.Line, key, "unknown field (known: sentence, grantee, target, expires, not_before, quota, allow)")
			continue
		}
		if seen[key] {
			p.errf(k.Line, key, "given twice")
			continue
		}
		seen[key] = true
		p.d.Lines[key] = k.Line
		switch key {
		case "sentence":
			p.d.Sentence = p.str(v, key)
		case "grantee":
			p.d.Grantee = p.str(v, key)
		case "target":
			p.d.Target = p.str(v, key)
		case "quota":
			p.d.Quota = p.str(v, key)
		case "expires":
			p.d.Expires = p.time(v, key)
		case "not_before":
			p.d.NotBefore = p.time(v, key)
		case "allow":
			p.allow(v)
		}
	}
	for _, req := range []string{"sentence", "grantee", "target", "allow"} {
		if !seen[req] {
			p.errf(m.Line, req, "required")
		}
	}
}

func (p *parser) str(v *yaml.Node, field string) string {
	if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
		p.errf(v.Line, field, "must be a string")
		return ""
	}
	return strings.TrimSpace(v.Value)
}

func (p *parser) time(v *yaml.Node, field string) *time.Time {
	s := p.str(v, field)
	if s == "" {
		return nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		p.errf(v.Line, field, "must be an RFC 3339 time such as 2026-12-08T00:00:00Z: %q", s)
		return nil
	}
	t = t.UTC()
	return &t
}

func (p *parser) allow(v *yaml.Node) {
	if v.Kind != yaml.SequenceNode {
		p.errf(v.Line, "allow", "must be a list of rules")
		return
	}
	if len(v.Content) == 0 {
		p.errf(v.Line, "allow", "must list at least one rule")
		return
	}
	if len(v.Content) > MaxRules {
		p.errf(v.Line, "allow", "%d rules is over the limit of %d", len(v.Content), MaxRules)
		return
	}
	for i, rn := range v.Content {
		prefix := fmt.Sprintf("allow[%d]", i)
		p.d.Lines[prefix] = rn.Line
		if rn.Kind != yaml.MappingNode {
			p.errf(rn.Line, prefix, "a rule is a mapping (op, table, columns, ...)")
			continue
		}
		var r RuleSpec
		seen := map[string]bool{}
		for j := 0; j+1 < len(rn.Content); j += 2 {
			k, val := rn.Content[j], rn.Content[j+1]
			field := prefix + "." + k.Value
			if !ruleFields[k.Value] {
				p.errf(k.Line, field, "unknown field (known: op, table, columns, fence, check, max_rows, residual)")
				continue
			}
			if seen[k.Value] {
				p.errf(k.Line, field, "given twice")
				continue
			}
			seen[k.Value] = true
			p.d.Lines[field] = k.Line
			switch k.Value {
			case "op":
				r.Op = strings.ToLower(p.str(val, field))
			case "table":
				r.Table = p.str(val, field)
			case "fence":
				r.Fence = p.str(val, field)
			case "check":
				r.Check = p.str(val, field)
			case "residual":
				r.Residual = p.str(val, field)
			case "columns":
				if val.Kind != yaml.SequenceNode {
					p.errf(val.Line, field, "must be a list of column names")
					continue
				}
				for _, c := range val.Content {
					r.Columns = append(r.Columns, p.str(c, field))
				}
			case "max_rows":
				n, err := strconv.ParseInt(p.str(val, field), 10, 64)
				if err != nil || n <= 0 {
					p.errf(val.Line, field, "must be a positive whole number")
					continue
				}
				r.MaxRows = &n
			}
		}
		for _, req := range []string{"op", "table"} {
			if !seen[req] {
				p.errf(rn.Line, prefix+"."+req, "required")
			}
		}
		p.d.Allow = append(p.d.Allow, r)
	}
}

// Line returns the line of a field path, or the closest enclosing one.
func (d *Delegation) Line(field string) int {
	for field != "" {
		if l, ok := d.Lines[field]; ok {
			return l
		}
		i := strings.LastIndexAny(field, ".[")
		if i < 0 {
			break
		}
		field = field[:i]
	}
	return 0
}
