package logbook

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"database/sql"
	"errors"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
	"github.com/harbormaster-dev/harbormaster/internal/store"
	"github.com/harbormaster-dev/harbormaster/internal/store/storetest"
)

const testKeyName = "harbormaster-test"

// testKey is a fixed control-plane key, so that separate logbooks in a test
// share a signer (as a re-signing attacker would).
func testKey(t testing.TB) (ed25519.PublicKey, ed25519.PrivateKey) {
	if t != nil {
		t.Helper()
	}
	seed := make([]byte, ed25519.SeedSize)
	copy(seed, "harbormaster logbook test key!!")
	priv := ed25519.NewKeyFromSeed(seed)
	return priv.Public().(ed25519.PublicKey), priv
}

// stepClock advances 1ms on every reading, from 2026-01-01.
type stepClock struct{ ns atomic.Int64 }

func newStepClock() *stepClock {
	c := &stepClock{}
	c.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *stepClock) Now() time.Time { return time.Unix(0, c.ns.Add(int64(time.Millisecond))).UTC() }

type fixture struct {
	t      testing.TB
	path   string
	st     *store.Store
	lb     *Logbook
	v      note.Verifier
	cancel context.CancelFunc
	done   chan error
}

// pg is the package's throwaway PostgreSQL server, for the stores of the
// PostgreSQL pass (storetest.FromEnv) and the tests that run on both.
var pg pgtmptest.Shared

func TestMain(m *testing.M) {
	if dir := os.Getenv(journalChildEnv); dir != "" {
		os.Exit(journalChild(dir)) // TestJournalSurvivesAKill's child
	}
	os.Exit(pg.Run(m))
}

// newLocation is a fresh store location of the driver this pass tests
// (HM_TEST_STORE, see storetest.FromEnv): a SQLite file by default.
func newLocation(t testing.TB) string {
	t.Helper()
	return storetest.New(t, storetest.FromEnv(t), &pg).Path
}

// newFixture opens a fresh store and starts the writer.
func newFixture(t testing.TB, cfg Config) *fixture {
	t.Helper()
	return openFixture(t, newLocation(t), cfg, true)
}

func openFixture(t testing.TB, path string, cfg Config, run bool, opts ...store.Option) *fixture {
	t.Helper()
	if store.IsPostgresURL(path) {
		opts = append([]store.Option{store.WithUnsafeNoFsync()}, opts...)
	}
	st, err := store.Open(context.Background(), path, opts...)
	if err != nil {
		t.Fatalf("store.Open: %v", err)
	}
	pub, priv := testKey(t)
	signer, err := NewCheckpointSigner(testKeyName, priv)
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewCheckpointVerifier(testKeyName, pub)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := New(st, signer, newStepClock().Now, nil, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	f := &fixture{t: t, path: path, st: st, lb: lb, v: v}
	t.Cleanup(func() {
		f.stop()
		st.Close()
	})
	if run {
		f.start()
	}
	return f
}

func (f *fixture) start() {
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel, f.done = cancel, make(chan error, 1)
	go func() { f.done <- f.lb.Run(ctx) }()
}

// stop stops the writer and waits for Run; a hang fails the test.
func (f *fixture) stop() {
	if f.cancel == nil {
		return
	}
	f.cancel()
	f.cancel = nil
	select {
	case err := <-f.done:
		if err != nil {
			f.t.Errorf("Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		f.t.Fatal("Run did not return after its context was cancelled")
	}
}

func (f *fixture) append(rec Record) Entry {
	f.t.Helper()
	e, err := f.lb.Append(context.Background(), rec)
	if err != nil {
		f.t.Fatalf("Append: %v", err)
	}
	return e
}

func (f *fixture) verify(external ...Checkpoint) Report {
	f.t.Helper()
	rep, err := f.lb.Verify(context.Background(), f.v, external...)
	if err != nil {
		f.t.Fatalf("Verify: %v", err)
	}
	return rep
}

// tamper runs stmts on the database through a connection of its own, as
// an attacker with the file (or the database's owner) would, after
// dropping the append-only triggers (on PostgreSQL, disabling them).
// Statements are written in SQLite's dialect; pgDialect translates them.
func (f *fixture) tamper(stmts ...string) {
	f.t.Helper()
	pgStore := store.IsPostgresURL(f.path)
	var db *sql.DB
	var err error
	var all []string
	if pgStore {
		db, err = sql.Open("pgx", f.path)
		all = []string{
			"ALTER TABLE logbook_entries DISABLE TRIGGER USER",
			"ALTER TABLE logbook_subjects DISABLE TRIGGER USER",
			"ALTER TABLE logbook_checkpoints DISABLE TRIGGER USER",
		}
	} else {
		db, err = sql.Open(store.DriverName, f.path+"?_busy_timeout=5000")
		all = []string{
			"DROP TRIGGER IF EXISTS logbook_entries_no_update",
			"DROP TRIGGER IF EXISTS logbook_entries_no_delete",
			"DROP TRIGGER IF EXISTS logbook_subjects_no_update",
			"DROP TRIGGER IF EXISTS logbook_subjects_no_delete",
			"DROP TRIGGER IF EXISTS logbook_checkpoints_no_update",
			"DROP TRIGGER IF EXISTS logbook_checkpoints_no_delete",
		}
	}
	if err != nil {
		f.t.Fatal(err)
	}
	defer db.Close()
	for _, s := range append(all, stmts...) {
		if pgStore {
			s = pgDialect(s)
		}
		if _, err := db.Exec(s); err != nil {
			f.t.Fatalf("tamper %q: %v", s, err)
		}
	}
}

var (
	blobLiteral = regexp.MustCompile(`x'([0-9a-fA-F]*)'`)
	zeroblob    = regexp.MustCompile(`zeroblob\((\d+)\)`)
)

// pgDialect translates the SQLite-isms of the tampering statements.
func pgDialect(s string) string {
	s = blobLiteral.ReplaceAllString(s, `'\x$1'::bytea`)
	s = zeroblob.ReplaceAllString(s, `decode(repeat('00', $1), 'hex')`)
	return strings.ReplaceAll(s, "char(10)", "chr(10)")
}

func isClosedOrCtx(err error) bool {
	return errors.Is(err, ErrClosed) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

func sha256Sum(b []byte) [32]byte { return sha256.Sum256(b) }
