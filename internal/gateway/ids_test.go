package gateway

import (
	"regexp"
	"sort"
	"testing"
	"time"
)

// TestIDsSortByTime: request and judgment ids keep the form every check of
// them accepts (prefix, 24 characters of [a-z2-7]), sort as the times they
// were made at, carry that time to the millisecond, and stay unique within
// one millisecond.
func TestIDsSortByTime(t *testing.T) {
	t.Parallel()
	form := regexp.MustCompile(`^(req|jdg)_[a-z2-7]{24}$`)
	base := time.Date(2026, 12, 7, 4, 30, 0, 0, time.UTC)
	var made []string
	seen := map[string]bool{}
	// Steps of one millisecond up to about 36 years, so every character
	// of the timestamp's 48 bits changes somewhere.
	for i, step := 0, time.Millisecond; i < 41; i, step = i+1, step*2 {
		at := base.Add(step)
		for range 50 {
			id := newID("req_", at)
			if !form.MatchString(id) {
				t.Fatalf("id %q does not have the form %s", id, form)
			}
			if seen[id] {
				t.Fatalf("id %q made twice", id)
			}
			seen[id] = true
			raw, err := idEncoding.DecodeString(id[len("req_"):])
			if err != nil {
				t.Fatalf("id %q: %v", id, err)
			}
			var ms int64
			for _, c := range raw[:6] {
				ms = ms<<8 | int64(c)
			}
			if got := time.UnixMilli(ms).UTC(); !got.Equal(at.Truncate(time.Millisecond)) {
				t.Fatalf("id %q carries %v, made at %v", id, got, at)
			}
		}
		// One id per millisecond step in the order made: each later time
		// must sort after the one before, whatever the random bits.
		made = append(made, newID("req_", at))
	}
	if !sort.StringsAreSorted(made) {
		t.Fatalf("ids made one after another do not sort in that order: %q", made)
	}
	if id := newID("jdg_", base); !form.MatchString(id) {
		t.Fatalf("judgment id %q does not have the form %s", id, form)
	}
}
