package audit_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/audit"
	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/logbook/logbooktest"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
	"github.com/harbormaster-dev/harbormaster/internal/store/storetest"
)

var (
	keyA = []byte("audit test sampling key A, 32 bytes")
	keyB = []byte("audit test sampling key B, 32 bytes")
)

func ids(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("jdg_%08d", i)
	}
	return out
}

func share(key []byte, ids []string, rate float64) (int, map[string]bool) {
	in := map[string]bool{}
	for _, id := range ids {
		if audit.Sampled(key, id, rate) {
			in[id] = true
		}
	}
	return len(in), in
}

func TestSampledRates(t *testing.T) {
	t.Parallel()
	all := ids(100_000)
	for _, rate := range []float64{0.10, 0.5} {
		n, _ := share(keyA, all, rate)
		if got := float64(n) / float64(len(all)); math.Abs(got-rate) > 0.01 {
			t.Errorf("rate %.2f sampled %.4f of %d ids, outside ±1%%", rate, got, len(all))
		}
	}
	if n, _ := share(keyA, all[:1000], 0); n != 0 {
		t.Errorf("rate 0 sampled %d", n)
	}
	if n, _ := share(keyA, all[:1000], 1); n != 1000 {
		t.Errorf("rate 1 sampled %d of 1000", n)
	}
	// A threshold on one hash: what a lower rate samples, a higher rate
	// samples too (raising the rate for correlated panels only adds).
	_, low := share(keyA, all, 0.10)
	_, high := share(keyA, all, 0.5)
	for id := range low {
		if !high[id] {
			t.Fatalf("%s sampled at 10%% but not at 50%%", id)
		}
	}
}

// Sampling is deterministic under one key and unpredictable without it:
// another key samples an unrelated set, overlapping at about rate².
func TestSampledKeyed(t *testing.T) {
	t.Parallel()
	all := ids(100_000)
	const rate = 0.10
	nA, a := share(keyA, all, rate)
	nA2, a2 := share(keyA, all, rate)
	if nA != nA2 {
		t.Fatalf("one key sampled %d then %d", nA, nA2)
	}
	for id := range a {
		if !a2[id] {
			t.Fatalf("%s sampled once and not again under the same key", id)
		}
	}
	_, b := share(keyB, all, rate)
	both := 0
	for id := range a {
		if b[id] {
			both++
		}
	}
	got := float64(both) / float64(len(all))
	if math.Abs(got-rate*rate) > 0.003 {
		t.Errorf("keys A and B overlap on %.4f of ids, want about %.4f (independent samples)", got, rate*rate)
	}
}

// clock is a clock a test moves by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

type fixture struct {
	a     *audit.Auditor
	lb    *logbook.Logbook
	clock *clock
	key   []byte
}

// pg serves the stores of the PostgreSQL pass (storetest.EnvDriver).
var pg pgtmptest.Shared

func TestMain(m *testing.M) { os.Exit(pg.Run(m)) }

// newLocation is a fresh store of the driver this pass tests.
func newLocation(t *testing.T) storetest.Location {
	t.Helper()
	return storetest.New(t, storetest.FromEnv(t), &pg)
}

// newFixture opens a store and a running logbook in a temp dir and an
// auditor over them with cfg (Key and Clock filled in when unset).
func newFixture(t *testing.T, cfg audit.Config) *fixture {
	t.Helper()
	loc := newLocation(t)
	st, lb := logbooktest.Running(t, "audit-test", loc.Path, loc.Options()...)
	c := &clock{now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	if cfg.Key == nil {
		cfg.Key = keyA
	}
	if cfg.Clock == nil {
		cfg.Clock = c.Now
	}
	a, err := audit.New(cfg, st, lb)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{a: a, lb: lb, clock: c, key: cfg.Key}
}

// pick returns judgment ids (not used before) with in(id) true.
func (f *fixture) pick(t *testing.T, n int, in func(id string) bool) []string {
	t.Helper()
	var out []string
	for i := 0; len(out) < n; i++ {
		if i > 1_000_000 {
			t.Fatal("no such id")
		}
		id := fmt.Sprintf("jdg_pick_%s_%d", strings.ReplaceAll(t.Name(), "/", "_"), i)
		if in(id) {
			out = append(out, id)
		}
	}
	return out
}

func candidate(id, delegation string) audit.Candidate {
	return audit.Candidate{JudgmentID: id, RequestID: "req_" + id, DelegationID: delegation,
		Evidence: map[string]any{"statement_submitted": "UPDATE customers SET name = 'John Smith' WHERE id = 3"}}
}

func TestNewRefuses(t *testing.T) {
	t.Parallel()
	cases := []audit.Config{
		{},                             // no key
		{Key: []byte("short")},         // under 16 bytes
		{Key: keyA, Rate: 1.5},         // rate over 1
		{Key: keyA, Rate: -0.1},        // negative
		{Key: keyA, CorrelatedRate: 2}, // correlated rate over 1
	}
	for _, cfg := range cases {
		if _, err := audit.New(cfg, nil, nil); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
	d := audit.Config{}.WithDefaults()
	if d.Rate != 0.10 || d.CorrelatedRate != 0.5 || d.Window != 20 || d.MaxWrong != 1 {
		t.Errorf("defaults %+v", d)
	}
	// The correlated rate is never below the default rate.
	if c := (audit.Config{Rate: 0.7, CorrelatedRate: 0.2}).WithDefaults(); c.CorrelatedRate != 0.7 {
		t.Errorf("CorrelatedRate %v under Rate 0.7", c.CorrelatedRate)
	}
}

// The first surveyed conforms of a UTC day for a delegation is sampled
// whatever the rate; the second is not, unless the hash samples it.
func TestDailyMinimum(t *testing.T) {
	t.Parallel()
	const rate = 0.0001
	f := newFixture(t, audit.Config{Rate: rate})
	ctx := t.Context()
	unsampled := f.pick(t, 5, func(id string) bool { return !audit.Sampled(f.key, id, rate) })
	f.clock.Set(time.Date(2026, 12, 1, 23, 59, 0, 0, time.UTC))

	ok, why, err := f.a.Consider(ctx, candidate(unsampled[0], "del_1"))
	if err != nil || !ok || !strings.Contains(why, "daily minimum") {
		t.Fatalf("first of the day: %v %q %v, want sampled as the daily minimum", ok, why, err)
	}
	if ok, _, err := f.a.Consider(ctx, candidate(unsampled[1], "del_1")); err != nil || ok {
		t.Fatalf("second of the day: %v %v, want not sampled", ok, err)
	}
	// Another delegation has its own minimum.
	if ok, _, err := f.a.Consider(ctx, candidate(unsampled[2], "del_2")); err != nil || !ok {
		t.Fatalf("first of the day for del_2: %v %v, want sampled", ok, err)
	}
	// A new UTC day.
	f.clock.Advance(2 * time.Minute)
	if ok, _, err := f.a.Consider(ctx, candidate(unsampled[3], "del_1")); err != nil || !ok {
		t.Fatalf("first of the next day: %v %v, want sampled", ok, err)
	}
	if ok, _, err := f.a.Consider(ctx, candidate(unsampled[4], "del_1")); err != nil || ok {
		t.Fatalf("second of the next day: %v %v, want not sampled", ok, err)
	}
	// The hash samples past the minimum.
	sampled := f.pick(t, 1, func(id string) bool { return audit.Sampled(f.key, id, rate) })
	if ok, why, err := f.a.Consider(ctx, candidate(sampled[0], "del_1")); err != nil || !ok || strings.Contains(why, "daily minimum") {
		t.Fatalf("a sampled id: %v %q %v, want sampled by the hash", ok, why, err)
	}
	pending, err := f.a.List(ctx, "pending")
	if err != nil || len(pending) != 4 {
		t.Fatalf("pending %d %v, want 4", len(pending), err)
	}
	es, err := f.lb.Find(ctx, logbook.Query{Kind: "audit.sampled"})
	if err != nil || len(es) != 4 {
		t.Errorf("%d audit.sampled entries %v, want 4", len(es), err)
	}
}

// Judgments of correlated panels are sampled at the raised rate.
func TestCorrelatedRaisedRate(t *testing.T) {
	t.Parallel()
	f := newFixture(t, audit.Config{Rate: 0.1, CorrelatedRate: 0.5})
	ctx := t.Context()
	// Use up the daily minimum.
	if ok, _, err := f.a.Consider(ctx, candidate("jdg_first", "del")); err != nil || !ok {
		t.Fatalf("daily minimum: %v %v", ok, err)
	}
	between := f.pick(t, 2, func(id string) bool { return audit.Sampled(f.key, id, 0.5) && !audit.Sampled(f.key, id, 0.1) })
	c := candidate(between[0], "del")
	c.Correlated = true
	ok, why, err := f.a.Consider(ctx, c)
	if err != nil || !ok || !strings.Contains(why, "raised rate") {
		t.Errorf("correlated: %v %q %v, want sampled at the raised rate", ok, why, err)
	}
	if ok, _, err := f.a.Consider(ctx, candidate(between[1], "del")); err != nil || ok {
		t.Errorf("not correlated: %v %v, want not sampled at 10%%", ok, err)
	}
}

// consider samples n candidates for delegation (each the first of its own
// day, so the daily minimum queues them) and returns their audit ids.
func (f *fixture) queue(t *testing.T, delegation string, n int) []string {
	t.Helper()
	ctx := t.Context()
	var out []string
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("jdg_%s_%d", delegation, i)
		if ok, _, err := f.a.Consider(ctx, candidate(id, delegation)); err != nil || !ok {
			t.Fatalf("consider %s: %v %v", id, ok, err)
		}
		f.clock.Advance(24 * time.Hour)
	}
	all, err := f.a.List(ctx, "pending")
	if err != nil {
		t.Fatal(err)
	}
	for _, au := range all {
		if au.DelegationID == delegation {
			out = append(out, au.ID)
		}
	}
	if len(out) != n {
		t.Fatalf("%d pending for %s, want %d", len(out), delegation, n)
	}
	return out
}

// webhook is a grantor's endpoint that records what it receives.
type webhook struct {
	srv   *httptest.Server
	posts chan map[string]any
}

func newWebhook(t *testing.T) *webhook {
	w := &webhook{posts: make(chan map[string]any, 8)}
	w.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m map[string]any
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" || json.Unmarshal(body, &m) != nil {
			m = map[string]any{"bad request": r.Method + " " + r.Header.Get("Content-Type") + " " + string(body)}
		}
		w.posts <- m
	}))
	t.Cleanup(w.srv.Close)
	return w
}

func (w *webhook) next(t *testing.T) map[string]any {
	t.Helper()
	select {
	case m := <-w.posts:
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("the webhook received nothing")
		return nil
	}
}

func TestReviewRightAndWrong(t *testing.T) {
	t.Parallel()
	hook := newWebhook(t)
	f := newFixture(t, audit.Config{Webhook: hook.srv.URL})
	ctx := t.Context()
	ids := f.queue(t, "del_review", 2)

	suspended, err := f.a.Review(ctx, ids[0], "right", "a real typo", "bob@shop", []byte("act"), []byte("sig"))
	if err != nil || suspended {
		t.Fatalf("review right: %v %v", suspended, err)
	}
	if es, _ := f.lb.Find(ctx, logbook.Query{Kind: "finding"}); len(es) != 0 {
		t.Errorf("a right review wrote %d findings", len(es))
	}
	if s, _, err := f.a.Suspended(ctx, "del_review"); err != nil || s {
		t.Errorf("suspended after a right review: %v %v", s, err)
	}

	suspended, err = f.a.Review(ctx, ids[1], "wrong", "renamed a customer", "bob@shop", []byte("act"), []byte("sig"))
	if err != nil || !suspended {
		t.Fatalf("review wrong (MaxWrong 1): %v %v, want suspended", suspended, err)
	}
	es, err := f.lb.Find(ctx, logbook.Query{Kind: "finding"})
	if err != nil || len(es) != 1 {
		t.Fatalf("findings %d %v, want 1", len(es), err)
	}
	var finding map[string]any
	if err := json.Unmarshal(es[0].Payload, &finding); err != nil {
		t.Fatal(err)
	}
	if finding["audit_id"] != ids[1] || finding["delegation_id"] != "del_review" || finding["reviewer"] != "bob@shop" ||
		finding["judgment_id"] != "jdg_del_review_1" || es[0].Subjects["delegation"] != "del_review" {
		t.Errorf("finding %v subjects %v", finding, es[0].Subjects)
	}
	post := hook.next(t)
	if post["audit_id"] != ids[1] || post["delegation_id"] != "del_review" || post["note"] != "renamed a customer" ||
		!strings.Contains(fmt.Sprint(post["text"]), "wrong") {
		t.Errorf("webhook got %v", post)
	}
	s, reason, err := f.a.Suspended(ctx, "del_review")
	if err != nil || !s || !strings.Contains(reason, "1 wrong verdict") {
		t.Fatalf("Suspended: %v %q %v", s, reason, err)
	}
	if es, _ := f.lb.Find(ctx, logbook.Query{Kind: "suspension"}); len(es) != 1 {
		t.Errorf("%d suspension entries, want 1", len(es))
	}
	// Another delegation is not suspended.
	if s, _, _ := f.a.Suspended(ctx, "del_other"); s {
		t.Error("an unrelated delegation is suspended")
	}

	if err := f.a.Reinstate(ctx, "del_review", "alice@shop", []byte("act"), []byte("sig")); err != nil {
		t.Fatal(err)
	}
	if s, _, err := f.a.Suspended(ctx, "del_review"); err != nil || s {
		t.Errorf("suspended after Reinstate: %v %v", s, err)
	}
	if es, _ := f.lb.Find(ctx, logbook.Query{Kind: "reinstatement"}); len(es) != 1 || es[0].Subjects["signer"] != "alice@shop" {
		t.Errorf("reinstatement entries %v", es)
	}

	// Reviewing twice, a bad verdict, an unknown audit.
	if _, err := f.a.Review(ctx, ids[0], "wrong", "", "bob@shop", nil, nil); !errors.Is(err, audit.ErrReviewed) {
		t.Errorf("second review: %v, want ErrReviewed", err)
	}
	more := f.queue(t, "del_more", 1)
	if _, err := f.a.Review(ctx, more[0], "maybe", "", "bob@shop", nil, nil); !errors.Is(err, audit.ErrBadReview) {
		t.Errorf("verdict maybe: %v, want ErrBadReview", err)
	}
	if _, err := f.a.Review(ctx, "aud_nope", "right", "", "bob@shop", nil, nil); !errors.Is(err, audit.ErrNotFound) {
		t.Errorf("unknown audit: %v, want ErrNotFound", err)
	}
	if got, err := f.a.Get(ctx, ids[1]); err != nil || got.Status != "reviewed" || got.Verdict != "wrong" || got.Reviewer != "bob@shop" {
		t.Errorf("Get: %+v %v", got, err)
	}
}

// With Window 20 and MaxWrong 2 the first wrong verdict does not suspend
// and the second does.
func TestSuspensionThreshold(t *testing.T) {
	t.Parallel()
	f := newFixture(t, audit.Config{Window: 20, MaxWrong: 2})
	ctx := t.Context()
	ids := f.queue(t, "del_t", 3)
	if s, err := f.a.Review(ctx, ids[0], "wrong", "", "bob@shop", nil, nil); err != nil || s {
		t.Fatalf("first wrong: suspended=%v %v, want not suspended", s, err)
	}
	if s, _, _ := f.a.Suspended(ctx, "del_t"); s {
		t.Fatal("suspended after one wrong of threshold 2")
	}
	if s, err := f.a.Review(ctx, ids[1], "right", "", "bob@shop", nil, nil); err != nil || s {
		t.Fatalf("right: %v %v", s, err)
	}
	if s, err := f.a.Review(ctx, ids[2], "wrong", "", "bob@shop", nil, nil); err != nil || !s {
		t.Fatalf("second wrong: suspended=%v %v, want suspended", s, err)
	}
	if s, reason, _ := f.a.Suspended(ctx, "del_t"); !s || !strings.Contains(reason, "2 wrong verdict(s) in the last 20 reviews (threshold 2)") {
		t.Errorf("Suspended: %v %q", s, reason)
	}
	if es, _ := f.lb.Find(ctx, logbook.Query{Kind: "finding"}); len(es) != 2 {
		t.Errorf("%d findings, want 2", len(es))
	}
}

// Wrong verdicts older than the window do not count.
func TestSuspensionWindow(t *testing.T) {
	t.Parallel()
	f := newFixture(t, audit.Config{Window: 2, MaxWrong: 2})
	ctx := t.Context()
	ids := f.queue(t, "del_w", 4)
	for i, v := range []string{"wrong", "right", "right", "wrong"} {
		f.clock.Advance(time.Minute)
		s, err := f.a.Review(ctx, ids[i], v, "", "bob@shop", nil, nil)
		if err != nil || s {
			t.Fatalf("review %d (%s): suspended=%v %v; the window holds one wrong at most", i, v, s, err)
		}
	}
}

func TestStats(t *testing.T) {
	t.Parallel()
	f := newFixture(t, audit.Config{})
	ctx := t.Context()
	pending, oldest, ratio, err := f.a.Stats(ctx)
	if err != nil || pending != 0 || oldest != 0 || ratio != 0 {
		t.Fatalf("empty: %d %v %v %v", pending, oldest, ratio, err)
	}
	start := f.clock.Now()
	ids := f.queue(t, "del_s", 5) // one a day: the clock is now start + 5 days
	for i, v := range []string{"right", "wrong", "right", "right"} {
		if _, err := f.a.Review(ctx, ids[i], v, "", "bob@shop", nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	pending, oldest, ratio, err = f.a.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The one pending audit was queued on the fifth day.
	if want := f.clock.Now().Sub(start.Add(4 * 24 * time.Hour)); pending != 1 || oldest != want || ratio != 0.25 {
		t.Errorf("Stats = %d pending, oldest %v, failure ratio %v; want 1, %v, 0.25", pending, oldest, ratio, want)
	}
}

// A judgment considered twice is queued once.
func TestConsiderTwice(t *testing.T) {
	t.Parallel()
	f := newFixture(t, audit.Config{Rate: 1})
	ctx := t.Context()
	for i := 0; i < 2; i++ {
		if ok, _, err := f.a.Consider(ctx, candidate("jdg_same", "del")); err != nil || !ok {
			t.Fatalf("consider %d: %v %v", i, ok, err)
		}
	}
	all, err := f.a.List(ctx, "")
	if err != nil || len(all) != 1 {
		t.Fatalf("%d audits %v, want 1", len(all), err)
	}
	var ev map[string]any
	if err := json.Unmarshal(all[0].Evidence, &ev); err != nil || ev["statement_submitted"] == nil {
		t.Errorf("evidence %s %v", all[0].Evidence, err)
	}
}
