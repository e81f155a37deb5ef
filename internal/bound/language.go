package bound

import (
	"fmt"
	"strings"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// Summary says in plain language what one rule permits, from the rule alone.
func Summary(r Rule) string {
	cols := quotedList(r.Columns)
	where := ""
	if r.Fence != "" {
		where = " where " + r.Fence
	}
	var s string
	switch r.Op {
	case sqlcheck.OpSelect:
		s = fmt.Sprintf("read %s of %s%s, at most %s per statement", cols, r.Table, where, rows(r.MaxRows))
	case sqlcheck.OpUpdate:
		s = fmt.Sprintf("change %s of at most %s per statement of %s%s", cols, rows(r.MaxRows), r.Table, where)
	case sqlcheck.OpInsert:
		s = fmt.Sprintf("insert at most %s per statement into %s, setting %s", rows(r.MaxRows), r.Table, cols)
	case sqlcheck.OpDelete:
		s = fmt.Sprintf("delete at most %s per statement of %s%s", rows(r.MaxRows), r.Table, where)
	default:
		s = fmt.Sprintf("%s on %s", r.Op, r.Table)
	}
	if r.Check != "" {
		s += fmt.Sprintf(", every new or changed row satisfying %s", r.Check)
	}
	if r.Residual != "" {
		s += fmt.Sprintf(", and only %s (judged by the Surveyor)", strings.TrimPrefix(r.Residual, "only "))
	}
	return s
}

// quotedList is columns as SQL names them: "end", "order" and "Name"
// quoted, so that a name that is a keyword reads as a column.
func quotedList(cols []string) string {
	q := make([]string, len(cols))
	for i, c := range cols {
		q[i] = sqlcheck.QuoteIdent(c)
	}
	return strings.Join(q, ", ")
}

func rows(n int64) string {
	if n == 1 {
		return "1 row"
	}
	return fmt.Sprintf("%d rows", n)
}

// FallbackAuthority is the sentence a grantor reads before signing a Tier B
// delegation: what the signed outer bound permits if every conformance
// judgment were wrong. It is generated from the bound alone, never from the
// sentence or the residual clause.
func FallbackAuthority(b *Bound) string {
	var parts []string
	for _, r := range b.Rules {
		if r.Residual == "" {
			continue
		}
		where := ""
		if r.Fence != "" {
			where = " where " + r.Fence
		}
		cols := quotedList(r.Columns)
		switch r.Op {
		case sqlcheck.OpUpdate:
			parts = append(parts, fmt.Sprintf("changing the %s of at most %s of %s%s per statement", cols, rows(r.MaxRows), r.Table, where))
		case sqlcheck.OpInsert:
			parts = append(parts, fmt.Sprintf("inserting at most %s into %s per statement, setting %s", rows(r.MaxRows), r.Table, cols))
		case sqlcheck.OpDelete:
			parts = append(parts, fmt.Sprintf("deleting at most %s of %s%s per statement", rows(r.MaxRows), r.Table, where))
		case sqlcheck.OpSelect:
			parts = append(parts, fmt.Sprintf("reading %s of at most %s of %s%s per statement", cols, rows(r.MaxRows), r.Table, where))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	rate := "with no limit on the number of statements"
	if b.Quota != nil {
		rate = fmt.Sprintf("at most %d statements per %s", b.Quota.Count, b.Quota.Per)
	}
	until := b.Expires
	if t, err := time.Parse(time.RFC3339, b.Expires); err == nil {
		until = t.UTC().Format("2 Jan 2006")
		if t.UTC().Hour() != 0 || t.UTC().Minute() != 0 {
			until = t.UTC().Format("2 Jan 2006 15:04 UTC")
		}
	}
	return fmt.Sprintf("If a conformance judgment is wrong, this permits: %s, %s, until %s.", strings.Join(parts, "; "), rate, until)
}
