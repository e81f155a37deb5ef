package quota_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/quota"
)

// clock is a manual clock.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano())
	return c
}

func (c *clock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

func TestParseRate(t *testing.T) {
	t.Parallel()
	good := []struct {
		in   string
		want quota.Rate
	}{
		{"120/hour", quota.Rate{Count: 120, Per: time.Hour}},
		{"3/minute", quota.Rate{Count: 3, Per: time.Minute}},
		{"1/second", quota.Rate{Count: 1, Per: time.Second}},
		{"10/day", quota.Rate{Count: 10, Per: 24 * time.Hour}},
		{" 5 / Minute ", quota.Rate{Count: 5, Per: time.Minute}},
		{"999999999/hour", quota.Rate{Count: 999999999, Per: time.Hour}},
	}
	for _, c := range good {
		got, err := quota.ParseRate(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"", "0/hour", "-1/hour", "120", "120/", "/hour", "120/week", "120/hours", "1.5/hour",
		"1e3/hour", "1000000000/hour", "120 per hour", "120/hour/day", "0x10/hour"} {
		if got, err := quota.ParseRate(in); err == nil {
			t.Errorf("ParseRate(%q) = %v, want an error", in, got)
		}
	}
}

func TestLimiter(t *testing.T) {
	t.Parallel()
	threePerMinute := quota.Rate{Count: 3, Per: time.Minute}

	t.Run("N succeed, N+1 fails", func(t *testing.T) {
		t.Parallel()
		c := newClock()
		l := quota.New(c.Now)
		w := quota.Want{Key: "delegation:d1", Rate: threePerMinute}
		for i := range 3 {
			if empty := l.Take(w); empty != "" {
				t.Fatalf("take %d: empty %q, want a token", i+1, empty)
			}
		}
		if empty := l.Take(w); empty != w.Key {
			t.Fatalf("take 4: %q, want the bucket %q empty", empty, w.Key)
		}
		// Other keys have their own buckets.
		if empty := l.Take(quota.Want{Key: "delegation:d2", Rate: threePerMinute}); empty != "" {
			t.Fatalf("another key: %q", empty)
		}
	})

	t.Run("refills in proportion to time", func(t *testing.T) {
		t.Parallel()
		c := newClock()
		l := quota.New(c.Now)
		w := quota.Want{Key: "k", Rate: threePerMinute} // one token per 20s
		for range 3 {
			l.Take(w)
		}
		c.Advance(19 * time.Second)
		if empty := l.Take(w); empty == "" {
			t.Fatal("a token after 19s of a 3/minute bucket, want none before 20s")
		}
		c.Advance(2 * time.Second) // 1.05 tokens
		if empty := l.Take(w); empty != "" {
			t.Fatal("no token after 21s of a 3/minute bucket")
		}
		if empty := l.Take(w); empty == "" {
			t.Fatal("two tokens from 21s")
		}
		c.Advance(40 * time.Second) // 2.05 tokens
		for i := range 2 {
			if empty := l.Take(w); empty != "" {
				t.Fatalf("take %d after 40s: empty", i+1)
			}
		}
		if empty := l.Take(w); empty == "" {
			t.Fatal("three tokens from 40s")
		}
	})

	t.Run("never holds more than its count", func(t *testing.T) {
		t.Parallel()
		c := newClock()
		l := quota.New(c.Now)
		w := quota.Want{Key: "k", Rate: threePerMinute}
		l.Take(w)
		c.Advance(24 * time.Hour)
		for i := range 3 {
			if empty := l.Take(w); empty != "" {
				t.Fatalf("take %d after a day: empty", i+1)
			}
		}
		if empty := l.Take(w); empty == "" {
			t.Fatal("a bucket idle for a day held more than its count")
		}
	})

	t.Run("a clock going back adds nothing", func(t *testing.T) {
		t.Parallel()
		c := newClock()
		l := quota.New(c.Now)
		w := quota.Want{Key: "k", Rate: threePerMinute}
		for range 3 {
			l.Take(w)
		}
		c.Advance(-time.Hour)
		if empty := l.Take(w); empty == "" {
			t.Fatal("a token appeared when the clock went back")
		}
	})

	t.Run("all or nothing across buckets", func(t *testing.T) {
		t.Parallel()
		c := newClock()
		l := quota.New(c.Now)
		del := quota.Want{Key: "delegation:d1", Rate: quota.Rate{Count: 2, Per: time.Minute}}
		prin := quota.Want{Key: "principal:agent:demo", Rate: quota.Rate{Count: 1, Per: time.Minute}}
		if empty := l.Take(del, prin); empty != "" {
			t.Fatalf("first take: %q", empty)
		}
		// The principal's bucket is empty: the delegation's token is not taken.
		if empty := l.Take(del, prin); empty != prin.Key {
			t.Fatalf("second take: %q, want %q", empty, prin.Key)
		}
		if empty := l.Take(del); empty != "" {
			t.Fatal("a refused Take consumed the delegation's token")
		}
		if empty := l.Take(del); empty != del.Key {
			t.Fatalf("third delegation take: %q, want empty", empty)
		}
		// The first empty bucket is the one named.
		if empty := l.Take(del, prin); empty != del.Key {
			t.Fatalf("both empty: %q, want the first, %q", empty, del.Key)
		}
		if empty := l.Take(); empty != "" {
			t.Fatalf("no buckets: %q", empty)
		}
	})

	t.Run("a new rate starts a new bucket", func(t *testing.T) {
		t.Parallel()
		c := newClock()
		l := quota.New(c.Now)
		w := quota.Want{Key: "k", Rate: quota.Rate{Count: 1, Per: time.Minute}}
		l.Take(w)
		if empty := l.Take(w); empty == "" {
			t.Fatal("1/minute gave two")
		}
		w.Rate = quota.Rate{Count: 2, Per: time.Minute}
		if empty := l.Take(w); empty != "" {
			t.Fatal("the re-signed rate did not take effect")
		}
	})

	t.Run("exact under concurrency", func(t *testing.T) {
		t.Parallel()
		c := newClock()
		l := quota.New(c.Now)
		w := quota.Want{Key: "k", Rate: quota.Rate{Count: 50, Per: time.Hour}}
		var got atomic.Int64
		var wg sync.WaitGroup
		for range 200 {
			wg.Go(func() {
				if l.Take(w) == "" {
					got.Add(1)
				}
			})
		}
		wg.Wait()
		if got.Load() != 50 {
			t.Fatalf("%d tokens taken from a bucket of 50", got.Load())
		}
	})

	t.Run("many keys", func(t *testing.T) {
		t.Parallel()
		// Past the sweep (every 4096 calls) buckets that are not full are kept.
		c := newClock()
		l := quota.New(c.Now)
		w := quota.Want{Key: "kept", Rate: quota.Rate{Count: 1, Per: time.Hour}}
		l.Take(w)
		for i := range 5000 {
			l.Take(quota.Want{Key: "other" + string(rune('a'+i%26)) + time.Duration(i).String(), Rate: quota.Rate{Count: 1, Per: time.Hour}})
		}
		c.Advance(time.Minute)
		if empty := l.Take(w); empty == "" {
			t.Fatal("the sweep forgot a bucket that had not refilled")
		}
	})
}

func BenchmarkTake(b *testing.B) {
	l := quota.New(nil)
	ws := []quota.Want{{Key: "delegation:d1", Rate: quota.Rate{Count: 1 << 40, Per: time.Hour}},
		{Key: "principal:agent:demo", Rate: quota.Rate{Count: 1 << 40, Per: time.Hour}}}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			l.Take(ws...)
		}
	})
}
