package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// QuotaWant is one token bucket a statement needs a token from: Count
// tokens per PerNS nanoseconds, full when new.
type QuotaWant struct {
	Key   string
	Count int64
	PerNS int64
}

// TakeQuota takes one token from every bucket, or from none, in one
// transaction: the buckets every node on the store shares. It returns the
// key of the first bucket that had no token, or "" when all had one. A
// bucket refills continuously; a bucket whose rate changed starts full at
// the new rate. nowNS is the caller's clock; a bucket never refills
// backwards when nodes' clocks differ.
func (s *Store) TakeQuota(ctx context.Context, nowNS int64, wants []QuotaWant) (empty string, err error) {
	least, greatest := "min", "max"
	if s.driver == Postgres {
		least, greatest = "LEAST", "GREATEST"
	}
	ins := s.SQL(`INSERT INTO quota_buckets (key, tokens, last_ns, count, per_ns) VALUES (?, ?, ?, ?, ?) ON CONFLICT (key) DO NOTHING`)
	reset := s.SQL(`UPDATE quota_buckets SET tokens = ?, last_ns = ?, count = ?, per_ns = ? WHERE key = ? AND (count <> ? OR per_ns <> ?)`)
	// tokens after the refill, computed once per bucket in the statement.
	refill := fmt.Sprintf(`%s(count, tokens + %s(0, ? - last_ns) * 1.0 * count / per_ns)`, least, greatest)
	take := s.SQL(fmt.Sprintf(`UPDATE quota_buckets SET tokens = %s - 1, last_ns = %s(last_ns, ?) WHERE key = ? AND %s >= 1`,
		refill, greatest, refill))
	err = runTx(ctx, s.ops, nil, func(tx *sql.Tx) error {
		for _, w := range wants {
			if w.Count <= 0 || w.PerNS <= 0 {
				return fmt.Errorf("store: quota %s: a rate of %d per %dns", w.Key, w.Count, w.PerNS)
			}
			if _, err := tx.ExecContext(ctx, ins, w.Key, float64(w.Count), nowNS, w.Count, w.PerNS); err != nil {
				return fmt.Errorf("store: quota: %w", err)
			}
			if _, err := tx.ExecContext(ctx, reset, float64(w.Count), nowNS, w.Count, w.PerNS, w.Key, w.Count, w.PerNS); err != nil {
				return fmt.Errorf("store: quota: %w", err)
			}
			res, err := tx.ExecContext(ctx, take, nowNS, nowNS, w.Key, nowNS)
			if err != nil {
				return fmt.Errorf("store: quota: %w", err)
			}
			if n, err := res.RowsAffected(); err != nil {
				return fmt.Errorf("store: quota: %w", err)
			} else if n != 1 {
				empty = w.Key
				return errEmpty
			}
		}
		return nil
	})
	if err == errEmpty {
		return empty, nil
	}
	return "", err
}

// errEmpty rolls a TakeQuota back when one bucket has no token.
var errEmpty = fmt.Errorf("store: quota: empty")

// ClaimDelegationExpiry claims the logging of a delegation's expiry for
// this node: it reports true once, for the first claimant across every
// node on the store. ReleaseDelegationExpiry gives the claim back when the
// entry could not be written.
func (s *Store) ClaimDelegationExpiry(ctx context.Context, id string, nowNS int64) (bool, error) {
	res, err := s.ops.ExecContext(ctx, s.SQL(`UPDATE delegations SET expiry_logged_ns = ? WHERE id = ? AND expiry_logged_ns IS NULL`), nowNS, id)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// ReleaseDelegationExpiry undoes a ClaimDelegationExpiry.
func (s *Store) ReleaseDelegationExpiry(ctx context.Context, id string) error {
	_, err := s.ops.ExecContext(ctx, s.SQL(`UPDATE delegations SET expiry_logged_ns = NULL WHERE id = ?`), id)
	return err
}

// Clock reads the store's clock, the one every node on a PostgreSQL store
// shares; nil for SQLite, which is on this machine and shares its clock.
func (s *Store) Clock() func(ctx context.Context) (time.Time, error) {
	if s.driver != Postgres {
		return nil
	}
	return func(ctx context.Context) (time.Time, error) {
		var t time.Time
		if err := s.r.QueryRowContext(ctx, `SELECT clock_timestamp()`).Scan(&t); err != nil {
			return time.Time{}, fmt.Errorf("store: clock: %w", err)
		}
		return t, nil
	}
}

// ClaimRequest records a signed request's digest for every node on the
// store until expiresNS, and reports whether this was its first use: a
// request replayed to another node within its window is refused there too.
// Expired digests are dropped on the way.
func (s *Store) ClaimRequest(ctx context.Context, digest string, nowNS, expiresNS int64) (bool, error) {
	if _, err := s.ops.ExecContext(ctx, s.SQL(`DELETE FROM seen_requests WHERE expires_ns < ?`), nowNS); err != nil {
		return false, fmt.Errorf("store: seen requests: %w", err)
	}
	res, err := s.ops.ExecContext(ctx, s.SQL(`INSERT INTO seen_requests (digest, expires_ns) VALUES (?, ?) ON CONFLICT (digest) DO NOTHING`), digest, expiresNS)
	if err != nil {
		return false, fmt.Errorf("store: seen requests: %w", err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// Claimed reports whether digest is claimed (ClaimRequest) and its claim
// has not expired at nowNS, without claiming it.
func (s *Store) Claimed(ctx context.Context, digest string, nowNS int64) (bool, error) {
	var n int
	err := s.ops.QueryRowContext(ctx, s.SQL(`SELECT COUNT(*) FROM seen_requests WHERE digest = ? AND expires_ns >= ?`), digest, nowNS).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("store: seen requests: %w", err)
	}
	return n > 0, nil
}
