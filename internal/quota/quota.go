// Package quota rate-limits the fast path with token buckets (ZFN-18):
// one per delegation (its signed quota) and one per principal (config).
//
// An exhausted bucket refers the statement; it never fails it. A Limiter's
// buckets live in this process, exact for one node. Several nodes on a
// PostgreSQL store take from buckets in the store instead
// (gateway.StoreQuota, store.TakeQuota), exact across nodes.
package quota

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Rate is Count statements per Per.
type Rate struct {
	Count int64
	Per   time.Duration
}

// String renders "120/1h0m0s".
func (r Rate) String() string { return fmt.Sprintf("%d per %s", r.Count, r.Per) }

var rateRE = regexp.MustCompile(`^([0-9]{1,9})\s*/\s*(second|minute|hour|day)$`)

// ParseRate reads "120/hour" (second, minute, hour or day).
func ParseRate(s string) (Rate, error) {
	m := rateRE.FindStringSubmatch(strings.ToLower(strings.TrimSpace(s)))
	if m == nil {
		return Rate{}, fmt.Errorf("quota: %q is not a rate such as 120/hour", s)
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	if n <= 0 {
		return Rate{}, fmt.Errorf("quota: %q allows nothing", s)
	}
	per := map[string]time.Duration{"second": time.Second, "minute": time.Minute, "hour": time.Hour, "day": 24 * time.Hour}[m[2]]
	return Rate{Count: n, Per: per}, nil
}

// Limiter holds token buckets by key. It is safe for concurrent use.
type Limiter struct {
	clock   func() time.Time
	mu      sync.Mutex
	buckets map[string]*bucket
	calls   int
}

type bucket struct {
	tokens float64
	last   time.Time
	rate   Rate
}

// New returns a limiter. clock defaults to time.Now.
func New(clock func() time.Time) *Limiter {
	if clock == nil {
		clock = time.Now
	}
	return &Limiter{clock: clock, buckets: map[string]*bucket{}}
}

// Want is one bucket a statement needs a token from.
type Want struct {
	Key  string
	Rate Rate
}

// Take takes one token from every bucket, or from none: it returns the
// first key whose bucket is empty, or "" when all had a token.
func (l *Limiter) Take(wants ...Want) string {
	now := l.clock()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	if l.calls%4096 == 0 {
		l.sweep(now)
	}
	bs := make([]*bucket, len(wants))
	for i, w := range wants {
		b := l.buckets[w.Key]
		if b == nil || b.rate != w.Rate {
			b = &bucket{tokens: float64(w.Rate.Count), last: now, rate: w.Rate}
			l.buckets[w.Key] = b
		}
		b.refill(now)
		if b.tokens < 1 {
			return w.Key
		}
		bs[i] = b
	}
	for _, b := range bs {
		b.tokens--
	}
	return ""
}

func (b *bucket) refill(now time.Time) {
	if el := now.Sub(b.last); el > 0 && b.rate.Per > 0 {
		b.tokens += float64(b.rate.Count) * el.Seconds() / b.rate.Per.Seconds()
		if b.tokens > float64(b.rate.Count) {
			b.tokens = float64(b.rate.Count)
		}
	}
	b.last = now
}

// sweep drops buckets that have refilled completely (they equal new ones).
func (l *Limiter) sweep(now time.Time) {
	for k, b := range l.buckets {
		if now.Sub(b.last) >= b.rate.Per {
			delete(l.buckets, k)
		}
	}
}
