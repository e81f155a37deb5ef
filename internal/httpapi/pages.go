package httpapi

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Every list answers one page: ?limit=N (1 to MaxPageLimit, default
// DefaultPageLimit) items in a stable order, and "next_cursor", an opaque
// string to pass as ?cursor= for the next page, absent on the last page.
// A cursor names the last item's place in the order, not an offset, so
// items that leave the list (a decided request) never make a page skip one.
const (
	DefaultPageLimit = 100
	MaxPageLimit     = 500
)

type page struct {
	limit int
	after string // the sort key of the last item of the previous page
}

const cursorPrefix = "c1:"

func encodeCursor(key string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + key))
}

// readPage reads ?limit and ?cursor, or answers 400.
func readPage(w http.ResponseWriter, r *http.Request) (page, bool) {
	p := page{limit: DefaultPageLimit}
	q := r.URL.Query()
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxPageLimit {
			writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("limit must be a whole number from 1 to %d", MaxPageLimit))
			return p, false
		}
		p.limit = n
	}
	if c := q.Get("cursor"); c != "" {
		raw, err := base64.RawURLEncoding.DecodeString(c)
		if err != nil || !strings.HasPrefix(string(raw), cursorPrefix) {
			writeError(w, http.StatusBadRequest, "bad_cursor", "the cursor is not one this server gave; start again without it")
			return p, false
		}
		p.after = strings.TrimPrefix(string(raw), cursorPrefix)
	}
	return p, true
}

// paginate sorts items by key and returns the page after p.after, and the
// cursor of the next page ("" on the last).
func paginate[T any](items []T, key func(T) string, p page) ([]T, string) {
	sort.SliceStable(items, func(i, j int) bool { return key(items[i]) < key(items[j]) })
	start := sort.Search(len(items), func(i int) bool { return key(items[i]) > p.after })
	if p.after == "" {
		start = 0
	}
	end := min(start+p.limit, len(items))
	out := append(items[:0:0], items[start:end]...)
	if end < len(items) && len(out) > 0 {
		return out, encodeCursor(key(out[len(out)-1]))
	}
	return out, ""
}

// timeKey orders by time, then id: zero-padded Unix nanoseconds sort as
// strings.
func timeKey(t time.Time, id string) string {
	return fmt.Sprintf("%020d|%s", t.UnixNano(), id)
}
