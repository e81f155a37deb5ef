package registry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/bound"
	"github.com/harbormaster-dev/harbormaster/internal/metrics"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
	"github.com/harbormaster-dev/harbormaster/internal/store"
)

// Delegation is a signed delegation as the control plane holds it. It
// never changes; revocation is separate state, set under the registry's
// lock (Registry.Revoke, Registry.Refresh).
type Delegation struct {
	ID          string
	Target      string
	Grantee     string
	Signer      string
	Canonical   []byte
	Signature   []byte
	BoundSHA256 string
	Bound       *bound.Bound
	Rules       []sqlcheck.Rule
	Source      string
	Created     time.Time
	Revoked     *time.Time
}

// Active reports whether the delegation is in force at now, by now alone
// (Registry.InForce also holds it to the store's clock).
func (d *Delegation) Active(now time.Time) bool {
	return d.Revoked == nil && d.Bound.ActiveAt(now)
}

// NewDelegation makes a delegation from its canonical bytes, as signed by
// signer with sig. It verifies nothing: the caller has verified the
// signature, or read it from the store, where only verified ones are.
func NewDelegation(canonical, sig []byte, signer, source string, created time.Time) (*Delegation, error) {
	b, err := bound.ParseCanonical(canonical)
	if err != nil {
		return nil, err
	}
	rules, err := b.CheckRules()
	if err != nil {
		return nil, err
	}
	return &Delegation{ID: bound.ID(canonical), Target: b.Target, Grantee: b.Grantee, Signer: signer,
		Canonical: canonical, Signature: sig, BoundSHA256: bound.SHA256(canonical), Bound: b, Rules: rules,
		Source: source, Created: created}, nil
}

// ErrAlreadyRevoked: Revoke was asked to revoke a delegation revoked before.
var ErrAlreadyRevoked = errors.New("the delegation is already revoked")

// Config configures a Registry.
type Config struct {
	// Stale is how old the last good read of the delegations may be, while
	// the refresh service runs (Watch), before Stale reports them too old
	// to run anything on. Defaults to 5s.
	Stale time.Duration
	// StoreClock, when set, reads the control store's clock, the one every
	// node shares (MeasureClock). Nil: the store is on this machine, with
	// its clock, and MeasureClock measures nothing.
	StoreClock func(ctx context.Context) (time.Time, error)
	// ClockLeeway is how far this node's clock may be off the store's
	// before expiry decisions hold at both. Defaults to 1s.
	ClockLeeway time.Duration
	// Now reads this node's clock for durations: the age of the last read
	// of the delegations and the round trip of a reading of the store's
	// clock. It is not the clock expiries are decided at, which the caller
	// passes with each question. Defaults to time.Now.
	Now func() time.Time
	// Metrics, when set, records the delegations known and the clock skew.
	Metrics *metrics.Metrics
	// Logger defaults to a discard logger.
	Logger *slog.Logger
}

// WithDefaults fills unset fields.
func (c Config) WithDefaults() Config {
	if c.Stale <= 0 {
		c.Stale = 5 * time.Second
	}
	if c.ClockLeeway <= 0 {
		c.ClockLeeway = time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Registry is a node's delegations in force. It is safe for concurrent use.
type Registry struct {
	cfg Config
	st  *store.Store

	mu          sync.RWMutex
	delegations []*Delegation // every stored delegation, oldest first

	// read is when the delegations were last read from the store (by
	// Config.Now, for staleness); watched is set once the refresh service
	// runs (Watch).
	read    atomic.Pointer[time.Time]
	watched atomic.Bool

	// skew is the store's clock minus this node's, in nanoseconds, as last
	// measured; skewBeyond is set while it exceeds the leeway (clock.go).
	skew       atomic.Int64
	skewBeyond atomic.Bool
}

// New reads every delegation in st.
func New(ctx context.Context, cfg Config, st *store.Store) (*Registry, error) {
	if st == nil {
		return nil, errors.New("registry: the store is required")
	}
	r := &Registry{cfg: cfg.WithDefaults(), st: st}
	if err := r.Refresh(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// Refresh reads the delegations other nodes added or revoked since the
// last read: one tick of the delegations service.
func (r *Registry) Refresh(ctx context.Context) error {
	rows, err := r.st.Delegations(ctx)
	if err != nil {
		return fmt.Errorf("registry: load delegations: %w", err)
	}
	var out []*Delegation
	for _, row := range rows {
		d := r.Delegation(row.ID)
		if d != nil {
			// Known: only a revocation can have changed.
			d = &Delegation{ID: row.ID}
		} else if d, err = NewDelegation([]byte(row.Canonical), []byte(row.Signature), row.Signer, row.Source, time.Unix(0, row.CreatedNS).UTC()); err != nil {
			return fmt.Errorf("registry: load delegation %s: %w", row.ID, err)
		}
		if row.RevokedNS.Valid {
			t := time.Unix(0, row.RevokedNS.Int64).UTC()
			d.Revoked = &t
		}
		out = append(out, d)
	}
	r.absorb(out)
	now := r.cfg.Now()
	r.read.Store(&now)
	return nil
}

// absorb merges delegations read from the store into the node's: new ones
// are added in order, a revocation recorded since is applied. Nothing is
// ever removed, and a delegation revoked here stays revoked.
func (r *Registry) absorb(read []*Delegation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	known := make(map[string]*Delegation, len(r.delegations))
	for _, d := range r.delegations {
		known[d.ID] = d
	}
	for _, d := range read {
		switch k, ok := known[d.ID]; {
		case !ok:
			r.delegations = append(r.delegations, d)
			known[d.ID] = d
			r.cfg.Metrics.InitDelegation(d.ID)
		case k.Revoked == nil && d.Revoked != nil:
			k.Revoked = d.Revoked
		}
	}
}

// Watch records that the delegations service runs (Refresh, every so
// often): from now on Stale holds the delegations to Config.Stale.
func (r *Registry) Watch() { r.watched.Store(true) }

// Stale says why the node's delegations are too old to run anything on,
// or "" while they are fresh or no delegations service runs (one node
// alone, whose own writes are all it needs).
func (r *Registry) Stale() string {
	if !r.watched.Load() {
		return ""
	}
	last := r.read.Load()
	if last == nil {
		return "the delegations have not been read yet"
	}
	if age := r.cfg.Now().Sub(*last); age > r.cfg.Stale {
		return fmt.Sprintf("the delegations could not be read from the store for %s", age.Round(time.Millisecond))
	}
	return ""
}

// Add stores a delegation the caller has verified and recorded, and holds
// it. It returns the registry's delegation of that id: d, or the one
// already held if another call added it first.
func (r *Registry) Add(ctx context.Context, d *Delegation) (*Delegation, error) {
	err := r.st.InsertDelegation(ctx, store.Delegation{ID: d.ID, Target: d.Target, Grantee: d.Grantee, Signer: d.Signer,
		Canonical: string(d.Canonical), Signature: string(d.Signature), Source: d.Source, CreatedNS: d.Created.UnixNano()})
	if err != nil {
		return nil, fmt.Errorf("registry: store delegation: %w", err)
	}
	r.absorb([]*Delegation{d})
	return r.Delegation(d.ID), nil
}

// Revoke revokes d, a delegation the registry holds, as of at: by is the
// signer, act the revocation and its signature as stored. Under the
// registry's lock, which holds back every reading of the delegations in
// force meanwhile, it refuses a delegation already revoked
// (ErrAlreadyRevoked), runs record (the caller's logbook entry; if it
// fails, nothing is stored and its error is returned), writes the store,
// and marks d revoked. Every statement routed after Revoke returns sees
// the revocation; one routed before it may still run, and be recorded,
// after it returns (a read, recorded once it has run, can then follow
// the revocation entry in the logbook), as on any node that has not yet
// read the revocation from the store.
func (r *Registry) Revoke(ctx context.Context, d *Delegation, at time.Time, by, act string, record func() error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if d.Revoked != nil {
		return ErrAlreadyRevoked
	}
	if err := record(); err != nil {
		return err
	}
	if err := r.st.RevokeDelegation(ctx, d.ID, at.UnixNano(), by, act); err != nil {
		return fmt.Errorf("registry: revoke: %w", err)
	}
	t := at.UTC()
	d.Revoked = &t
	return nil
}

// Revoked returns when d was revoked, or nil, read under the lock
// Revoke and Refresh set it under.
func (r *Registry) Revoked(d *Delegation) *time.Time {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return d.Revoked
}

// Delegation returns a stored delegation by id, or nil.
func (r *Registry) Delegation(id string) *Delegation {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, d := range r.delegations {
		if d.ID == id {
			return d
		}
	}
	return nil
}

// Delegations returns the stored delegations of a principal ("" for all),
// oldest first.
func (r *Registry) Delegations(principal string) []*Delegation {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []*Delegation
	for _, d := range r.delegations {
		if principal == "" || d.Grantee == principal {
			out = append(out, d)
		}
	}
	return out
}

// InForce are the delegations in force for (principal, target) at now,
// at every instant of now (clock.go), as the statement path checks
// against them, in the order they were added.
func (r *Registry) InForce(principal, target string, now time.Time) []*Delegation {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []*Delegation
	for _, d := range r.delegations {
		if d.Grantee == principal && d.Target == target && r.inForce(d, now) {
			out = append(out, d)
		}
	}
	return out
}

// IsInForce reports whether d is still in force at every instant of now:
// unrevoked, and inside its times.
func (r *Registry) IsInForce(d *Delegation, now time.Time) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.inForce(d, now)
}
