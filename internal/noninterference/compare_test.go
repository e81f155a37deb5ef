package noninterference_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Normalizing: only what differs on every run, whatever the data, is
// replaced, and only by a placeholder that keeps its presence visible: an
// id the agent was given is still there, as <id>.

// noise are the fields that hold per-run noise, wherever they appear
// outside rows of data, with the form their value must have to be
// replaced: a delegation id in an "id" field, say, stays.
var noise = map[string]struct {
	form        *regexp.Regexp
	placeholder string
}{
	"request_id":  {regexp.MustCompile(`^req_[a-z2-7]+$`), "<request>"},
	"id":          {regexp.MustCompile(`^req_[a-z2-7]+$`), "<request>"},
	"judgment_id": {regexp.MustCompile(`^jdg_[a-z2-7]+$`), "<judgment>"},
	"marque_id":   {regexp.MustCompile(`^[a-z2-7]{26}$`), "<marque>"},
	"txid":        {regexp.MustCompile(`^[0-9]+$`), "<txid>"},
	"created":     {regexp.MustCompile(`^\d{4}-\d\d-\d\dT[0-9:.]+(Z|[+-]\d\d:\d\d)$`), "<time>"},
	"updated":     {regexp.MustCompile(`^\d{4}-\d\d-\d\dT[0-9:.]+(Z|[+-]\d\d:\d\d)$`), "<time>"},
}

var (
	// Ids inside text (a reason naming a judgment, a tool error naming the request).
	idInTextRE = regexp.MustCompile(`\b(req|jdg)_[a-z2-7]{8,}\b`)
	// Marque ids are 26 characters of lower-case base32.
	marqueInTextRE = regexp.MustCompile(`\b[a-z2-7]{26}\b`)
)

func normalizeText(s string) string {
	s = idInTextRE.ReplaceAllString(s, "${1}_<id>")
	return marqueInTextRE.ReplaceAllStringFunc(s, func(m string) string {
		if strings.ContainsAny(m, "234567") {
			return "<marque>"
		}
		return m
	})
}

// normalize returns a copy of an observation with the noise replaced.
// With unordered (a write's RETURNING rows), rows are sorted: the order a
// write returns them in is the executor's, which SQL leaves open.
func normalize(v any, unordered bool) any {
	switch x := v.(type) {
	case exchange:
		return map[string]any{"status": x.Status, "body": normalize(x.Body, unordered)}
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			switch {
			case k == "rows":
				out[k] = normalizeRows(e, unordered)
			case k == "columns":
				out[k] = e
			case noise[k].form != nil:
				if s, ok := e.(string); ok && noise[k].form.MatchString(s) {
					out[k] = noise[k].placeholder
				} else {
					out[k] = normalize(e, unordered)
				}
			case k == "text" && unordered:
				s, _ := e.(string)
				out[k] = sortRowLines(normalizeText(s))
			default:
				out[k] = normalize(e, unordered)
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalize(e, unordered)
		}
		return out
	case string:
		return normalizeText(x)
	}
	return v
}

// normalizeRows leaves row data untouched, sorting it when unordered.
func normalizeRows(v any, unordered bool) any {
	rows, ok := v.([]any)
	if !ok || !unordered {
		return v
	}
	keyed := make([]string, len(rows))
	for i, r := range rows {
		b, _ := json.Marshal(r)
		keyed[i] = string(b)
	}
	idx := make([]int, len(rows))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return keyed[idx[a]] < keyed[idx[b]] })
	out := make([]any, len(rows))
	for i, j := range idx {
		out[i] = rows[j]
	}
	return out
}

// sortRowLines sorts run_sql's row lines (JSON objects, one a line) in
// place, for a write's RETURNING rows.
func sortRowLines(s string) string {
	lines := strings.Split(s, "\n")
	for i := 0; i < len(lines); {
		if !strings.HasPrefix(lines[i], "{") {
			i++
			continue
		}
		j := i
		for j < len(lines) && strings.HasPrefix(lines[j], "{") {
			j++
		}
		slices.Sort(lines[i:j])
		i = j
	}
	return strings.Join(lines, "\n")
}

// diff lists where a and b differ, as paths, at most limit of them.
func diff(a, b any, path string, out *[]string, limit int) {
	if len(*out) >= limit {
		return
	}
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			break
		}
		keys := map[string]bool{}
		for k := range x {
			keys[k] = true
		}
		for k := range y {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			p := path + "." + k
			ea, oka := x[k]
			eb, okb := y[k]
			switch {
			case !oka:
				*out = append(*out, fmt.Sprintf("%s: only in B: %s", p, short(eb)))
			case !okb:
				*out = append(*out, fmt.Sprintf("%s: only in A: %s", p, short(ea)))
			default:
				diff(ea, eb, p, out, limit)
			}
			if len(*out) >= limit {
				return
			}
		}
		return
	case []any:
		y, ok := b.([]any)
		if !ok {
			break
		}
		for i := range min(len(x), len(y)) {
			diff(x[i], y[i], fmt.Sprintf("%s[%d]", path, i), out, limit)
		}
		if len(x) != len(y) {
			*out = append(*out, fmt.Sprintf("%s: %d elements in A, %d in B", path, len(x), len(y)))
		}
		return
	}
	if !reflect.DeepEqual(a, b) {
		*out = append(*out, fmt.Sprintf("%s: A %s, B %s", path, short(a), short(b)))
	}
}

func short(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}

func pretty(v any) string {
	b, err := json.MarshalIndent(v, "    ", "  ")
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(b) > 4000 {
		return string(b[:4000]) + "\n    ... (cut)"
	}
	return string(b)
}

// verdict is an answer's gist: outcome, path and the class of its first
// reason (the text before its first colon).
func verdict(a answer) string {
	r := a.firstReason
	if i := strings.IndexByte(r, ':'); i >= 0 {
		r = r[:i]
	}
	r = digitsRE.ReplaceAllString(r, "N")
	if len(r) > 70 {
		r = r[:70] + "..."
	}
	v := a.outcome
	if a.path != "" {
		v += "/" + a.path
	}
	if r != "" {
		v += " (" + r + ")"
	}
	return v
}

var (
	indexRE  = regexp.MustCompile(`\[\d+\]`)
	digitsRE = regexp.MustCompile(`\d+`)
)

// class names a difference for the summary: the two verdicts when they
// differ, else the fields that differ.
func class(a, b answer, diffs []string) string {
	if va, vb := verdict(a), verdict(b); va != vb {
		return "verdicts differ: A " + va + " | B " + vb
	}
	seen := map[string]bool{}
	var fields []string
	for _, d := range diffs {
		p, _, _ := strings.Cut(d, ": ")
		p = indexRE.ReplaceAllString(p, "[]")
		if !seen[p] {
			seen[p] = true
			fields = append(fields, p)
		}
	}
	return "same verdict " + verdict(a) + ", fields differ: " + strings.Join(fields, " ")
}
