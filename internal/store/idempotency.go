package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Idempotency key states.
const (
	IdempotencyRunning = "running"
	IdempotencyDone    = "done"
)

// IdempotencyEntry is a row of idempotency_keys: one Idempotency-Key of one
// principal (Scope), the fingerprint of the request first sent under it,
// and, once answered, the answer.
type IdempotencyEntry struct {
	Scope, Key  string
	Fingerprint string
	State       string // IdempotencyRunning or IdempotencyDone
	Status      int
	Body        string
	CreatedNS   int64
	ExpiresNS   int64
}

// BeginIdempotent claims (scope, key) for a request with fingerprint, for
// every node on the store, until expiresNS. It reports true when the claim
// is new: the caller runs the request and then completes or releases it.
// Otherwise it returns the entry already there, running or done, whatever
// its fingerprint: the caller compares. Expired entries are dropped on the
// way, so an expired key starts afresh.
func (s *Store) BeginIdempotent(ctx context.Context, scope, key, fingerprint string, nowNS, expiresNS int64) (IdempotencyEntry, bool, error) {
	const op = "store: idempotency key"
	if _, err := s.ops.ExecContext(ctx, s.SQL(`DELETE FROM idempotency_keys WHERE expires_ns < ?`), nowNS); err != nil {
		return IdempotencyEntry{}, false, fmt.Errorf("%s: %w", op, err)
	}
	// Twice at most: an entry can expire between the insert and the read.
	for range 2 {
		res, err := s.ops.ExecContext(ctx, s.SQL(`INSERT INTO idempotency_keys (scope, key, fingerprint, state, created_ns, expires_ns)
VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (scope, key) DO NOTHING`), scope, key, fingerprint, IdempotencyRunning, nowNS, expiresNS)
		if err != nil {
			return IdempotencyEntry{}, false, fmt.Errorf("%s: %w", op, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return IdempotencyEntry{}, false, fmt.Errorf("%s: %w", op, err)
		} else if n == 1 {
			return IdempotencyEntry{Scope: scope, Key: key, Fingerprint: fingerprint, State: IdempotencyRunning,
				CreatedNS: nowNS, ExpiresNS: expiresNS}, true, nil
		}
		e := IdempotencyEntry{Scope: scope, Key: key}
		err = s.ops.QueryRowContext(ctx, s.SQL(`SELECT fingerprint, state, status, body, created_ns, expires_ns
FROM idempotency_keys WHERE scope = ? AND key = ?`), scope, key).Scan(&e.Fingerprint, &e.State, &e.Status, &e.Body, &e.CreatedNS, &e.ExpiresNS)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return IdempotencyEntry{}, false, fmt.Errorf("%s: %w", op, err)
		}
		return e, false, nil
	}
	return IdempotencyEntry{}, false, fmt.Errorf("%s: %s was claimed and dropped twice while read", op, key)
}

// CompleteIdempotent stores the answer of a running (scope, key) and keeps
// it until expiresNS.
func (s *Store) CompleteIdempotent(ctx context.Context, scope, key string, status int, body string, expiresNS int64) error {
	res, err := s.ops.ExecContext(ctx, s.SQL(`UPDATE idempotency_keys SET state = ?, status = ?, body = ?, expires_ns = ?
WHERE scope = ? AND key = ? AND state = ?`), IdempotencyDone, status, body, expiresNS, scope, key, IdempotencyRunning)
	if err != nil {
		return fmt.Errorf("store: idempotency key: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("store: idempotency key: %w", err)
	} else if n != 1 {
		return fmt.Errorf("store: idempotency key %s is not running", key)
	}
	return nil
}

// ReleaseIdempotent drops a running (scope, key): its request did nothing,
// so a retry under the key runs afresh.
func (s *Store) ReleaseIdempotent(ctx context.Context, scope, key string) error {
	_, err := s.ops.ExecContext(ctx, s.SQL(`DELETE FROM idempotency_keys WHERE scope = ? AND key = ? AND state = ?`), scope, key, IdempotencyRunning)
	if err != nil {
		return fmt.Errorf("store: idempotency key: %w", err)
	}
	return nil
}
