package gateway

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/audit"
	"github.com/harbormaster-dev/harbormaster/internal/ledger"
	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/marque"
	"github.com/harbormaster-dev/harbormaster/internal/metrics"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/quota"
	"github.com/harbormaster-dev/harbormaster/internal/referrals"
	"github.com/harbormaster-dev/harbormaster/internal/registry"
	"github.com/harbormaster-dev/harbormaster/internal/route"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
	"github.com/harbormaster-dev/harbormaster/internal/store"
	"github.com/harbormaster-dev/harbormaster/internal/surveyor"
	"github.com/harbormaster-dev/harbormaster/internal/switches"
)

// Config configures the statement path.
type Config struct {
	// Name is the control plane's name: the marque issuer. Defaults to "harbormaster".
	Name string
	// Limits cap statements before parsing. Defaults to sqlcheck's.
	Limits sqlcheck.Limits
	// Clock defaults to time.Now.
	Clock func() time.Time
	// Logger defaults to a discard logger.
	Logger *slog.Logger
	// ReconcileAfter is how long a request may stay running (a marque
	// minted, no outcome recorded) before Run resolves it from the target's
	// receipt, when this node is not still working on it. Defaults to one
	// minute; serve uses twice the marque lifetime.
	ReconcileAfter time.Duration
	// QueueTTL is how long a referred request waits for a human before it
	// expires. Defaults to 24h.
	QueueTTL time.Duration
	// ApprovalTTL is how long a proposed approval stays signable. Defaults to 15m.
	ApprovalTTL time.Duration
	// PrincipalQuota is the fast-path rate per agent principal (ZFN-18);
	// principals not listed have none beyond their delegations' quotas.
	PrincipalQuota map[string]quota.Rate
	// Switches is the node's view of the Tier B switches. Nil means Tier B
	// is off everywhere.
	Switches *switches.Poller
	// Webhook, when set, receives a Slack-compatible JSON message for every
	// new referral (internal/referrals). Failures never block the statement
	// path.
	Webhook string
	// HTTPClient sends webhooks. Defaults to a client with a 5s timeout
	// (referrals.Config).
	HTTPClient *http.Client
	// Metrics, when set, records decisions, quota refusals and logbook latency.
	Metrics *metrics.Metrics
	// Surveyor is the Tier B panel. Nil: the surveyed path is closed.
	Surveyor *surveyor.Panel
	// Auditor samples surveyed conforms for review. Tier B does not run
	// without one.
	Auditor *audit.Auditor
	// ReferralRate is how many statements per principal may be referred
	// to a human; past it a statement that would be referred is refused
	// (internal/referrals). Defaults to 1000/hour; a negative Count turns
	// it off.
	ReferralRate quota.Rate
	// MaxWaiting caps the requests one principal may have waiting for a
	// human; past it a statement that would be referred is refused.
	// Defaults to 1000; negative turns it off.
	MaxWaiting int
	// Services tunes the node's background services (services.go).
	Services Services
	// StoreClock, when set, reads the control store's clock, the one every
	// node shares; the clock service compares this node's with it
	// (internal/registry). Nil: the store is on this machine, with its clock.
	StoreClock func(ctx context.Context) (time.Time, error)
	// ClockLeeway is how far this node's clock may be off the store's
	// before its expiry decisions hold at both. Defaults to 1s.
	ClockLeeway time.Duration
	// LocalClock reads this node's clock for durations: the age of the
	// last read of the delegations and the round trip of a reading of the
	// store's clock (registry.Config.Now), where Clock may be a fixed
	// instant in tests. Defaults to time.Now.
	LocalClock func() time.Time
	// SharedQuota, when set, takes fast-path tokens from buckets every
	// node on the store shares (a PostgreSQL store): it returns the key of
	// the first empty bucket, or "". Nil: this node's own buckets, exact
	// for one node.
	SharedQuota func(ctx context.Context, now time.Time, wants []quota.Want) (string, error)
	// MaxTransactions caps the client transactions (transactions.go) open
	// at once on each target, each holding one of its Pilot's
	// connections. Defaults to 8; negative: none may open.
	MaxTransactions int
}

// WithDefaults fills unset fields.
func (c Config) WithDefaults() Config {
	if c.MaxTransactions == 0 {
		c.MaxTransactions = 8
	}
	if c.Name == "" {
		c.Name = "harbormaster"
	}
	c.Limits = c.Limits.WithDefaults()
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.QueueTTL <= 0 {
		c.QueueTTL = 24 * time.Hour
	}
	if c.ReconcileAfter <= 0 {
		c.ReconcileAfter = time.Minute
	}
	if c.ApprovalTTL <= 0 {
		c.ApprovalTTL = 15 * time.Minute
	}
	c.Services = c.Services.WithDefaults()
	if c.ClockLeeway <= 0 {
		c.ClockLeeway = time.Second
	}
	if c.LocalClock == nil {
		c.LocalClock = time.Now
	}
	return c
}

// Errors a caller maps to client errors. Everything else is a server error.
var (
	ErrUnknownTarget  = errors.New("unknown target")
	ErrNotFound       = ledger.ErrNotFound
	ErrBadDelegation  = errors.New("delegation refused")
	ErrLogUnavailable = ledger.ErrLogUnavailable
)

// SQLError is a statement that cannot be decided at all (it does not parse,
// or is too large or deep to parse), or that no human could approve
// (sqlcheck.Analysis.Unapprovable). The request is still recorded.
type SQLError struct {
	RequestID string
	Code      string
	Message   string
}

func (e *SQLError) Error() string { return e.Message }

// Unapprovable reports whether the statement was refused because no human
// could approve it (several statements, DDL, a placeholder, ...), rather
// than because it could not be parsed.
func (e *SQLError) Unapprovable() bool {
	switch e.Code {
	case sqlcheck.CodeMultipleStatements, sqlcheck.CodeStatementNotAllow, sqlcheck.CodeSelectInto,
		sqlcheck.CodeLockingClause, sqlcheck.CodeParamNotAllowed:
		return true
	}
	return false
}

// Gateway is the control plane's statement path (DESIGN.md section 3): it
// decides every statement, records the decision durably, mints marques for
// statements inside a signed scope and hands them to the target's Pilot.
type Gateway struct {
	cfg     Config
	st      *store.Store
	lb      *logbook.Logbook
	minter  *marque.Minter
	signers *signing.AllowedSigners
	targets map[string]pilot.Executor
	checks  *sqlcheck.Cache[checked]
	led     *ledger.Ledger

	// reg holds the delegations in force, their staleness and the clock
	// skew their expiries are decided with (internal/registry).
	reg *registry.Registry

	// txOpen counts the client transactions open on each target
	// (transactions.go).
	txMu   sync.Mutex
	txOpen map[string]int

	// refs admits, announces and previews referrals (internal/referrals).
	refs *referrals.Service

	quota        *quota.Limiter
	expiryMu     sync.Mutex
	expiryLogged map[string]bool // delegations whose expiry is in the logbook (under expiryMu)
}

// New wires a gateway. pilots are the targets' Pilots, one per target, in
// this process or remote.
func New(ctx context.Context, cfg Config, st *store.Store, lb *logbook.Logbook, minter *marque.Minter,
	signers *signing.AllowedSigners, pilots []pilot.Executor) (*Gateway, error) {
	cfg = cfg.WithDefaults()
	if st == nil || lb == nil || minter == nil || signers == nil {
		return nil, errors.New("gateway: store, logbook, minter and signers are required")
	}
	g := &Gateway{cfg: cfg, st: st, lb: lb, minter: minter, signers: signers, targets: map[string]pilot.Executor{},
		quota: quota.New(cfg.Clock), expiryLogged: map[string]bool{}, checks: newCheckCache(cfg.Limits)}
	receipts := map[string]pilot.Settler{}
	for _, p := range pilots {
		if _, dup := g.targets[p.Target()]; dup {
			return nil, fmt.Errorf("gateway: target %s configured twice", p.Target())
		}
		g.targets[p.Target()] = p
		receipts[p.Target()] = p
	}
	var err error
	if g.led, err = ledger.New(ctx, ledger.Config{Clock: cfg.Clock, Logger: cfg.Logger, Append: g.append, Targets: receipts}, st, lb); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	g.refs, err = referrals.New(referrals.Config{ReferralRate: cfg.ReferralRate, MaxWaiting: cfg.MaxWaiting,
		Webhook: cfg.Webhook, HTTPClient: cfg.HTTPClient, Clock: cfg.Clock, Logger: cfg.Logger, Metrics: cfg.Metrics,
		Target: func(target string) (referrals.Previewer, error) {
			// The Pilot's preview role, and nothing else of it.
			p, ok := g.targets[target]
			if !ok {
				return nil, fmt.Errorf("gateway: %w: %q", ErrUnknownTarget, target)
			}
			return p, nil
		}}, g.led)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	g.reg, err = registry.New(ctx, registry.Config{Stale: cfg.Services.DelegationsStale, StoreClock: cfg.StoreClock,
		ClockLeeway: cfg.ClockLeeway, Now: cfg.LocalClock, Metrics: cfg.Metrics, Logger: cfg.Logger}, st)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	// Expiries already recorded by an earlier run are not recorded again.
	err = lb.Iterate(ctx, logbook.Query{Kind: logbook.KindDelegationExpired}, func(e logbook.Entry) error {
		g.expiryLogged[e.Subjects["delegation"]] = true
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	return g, nil
}

// Targets returns the configured target names.
func (g *Gateway) Targets() []string {
	out := make([]string, 0, len(g.targets))
	for t := range g.targets {
		out = append(out, t)
	}
	return out
}

// Pilot returns the Pilot of a target, as its catalog: what the fronts
// and the console need of it (an agent's scope, a bound's compilation).
// Everything else they ask of a target goes through the gateway.
func (g *Gateway) Pilot(target string) (pilot.Cataloger, bool) {
	p, ok := g.targets[target]
	return p, ok
}

// Response is the answer to an agent. Its JSON (response.go) is the HTTP
// API's and the MCP tool's: "columns" and "rows" as objects keyed by
// column name.
type Response struct {
	Outcome      string `json:"outcome"` // "executed" or "referred"
	RequestID    string `json:"request_id"`
	RowsAffected int64  `json:"rows_affected"`
	// Columns are the result's columns in the target's order, with the
	// names it gave them (two may share one) and their type OIDs.
	Columns []Column `json:"-"`
	// Rows are the result's rows, each with one value per column, in the
	// order of Columns.
	Rows         [][]any  `json:"-"`
	Truncated    bool     `json:"truncated"`
	Reasons      []string `json:"reasons"`
	Path         string   `json:"path,omitempty"`
	DelegationID string   `json:"delegation_id,omitempty"`
}

// Column is one column of a Response: its name and type OID.
type Column = pilot.Column

// idEncoding is base32 over the 32 characters of [a-z2-7] in ASCII order,
// so an id's text sorts as its bytes do: the ids keep the alphabet and
// length they always had, and every check of their form accepts them.
var idEncoding = base32.NewEncoding("234567abcdefghijklmnopqrstuvwxyz").WithPadding(base32.NoPadding)

// newID makes a request or judgment id: prefix, then 24 characters of 15
// bytes, a big-endian millisecond timestamp (6 bytes) and 72 random bits.
// Ids made one after another sort one after another, so the store's
// inserts keyed by them land on the same B-tree page instead of a random
// one (issue 25). The id shows when it was made to whoever sees it: a
// request id is shown only to its principal (who knows when it sent the
// statement) and to humans, and a judgment id carries its request's time,
// not the panel's, so it tells the agent nothing it did not know
// (invariant 10). The random bits keep ids unique within a millisecond;
// nothing relies on an id being unguessable (the marque's jti, which the
// target's receipt is keyed by, stays 128 random bits: marque.Minter).
func newID(prefix string, at time.Time) string {
	var b [15]byte
	ms := at.UnixMilli()
	if ms < 0 {
		ms = 0
	}
	for i := 5; i >= 0; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
	_, _ = rand.Read(b[6:]) // crypto/rand.Read never fails
	return prefix + idEncoding.EncodeToString(b[:])
}

// Submit runs one statement from an authenticated principal through the
// statement path. The numbered steps are DESIGN.md section 3's.
func (g *Gateway) Submit(ctx context.Context, principal, target, sql string) (resp *Response, err error) {
	return g.submit(ctx, principal, target, sql, nil)
}

// submit is Submit, inside the client transaction tx when it is not nil
// (transactions.go): a statement that runs at once runs in tx's target
// transaction, and its outcome is recorded when tx ends.
func (g *Gateway) submit(ctx context.Context, principal, target, sql string, tx *Tx) (resp *Response, err error) {
	now := g.cfg.Clock()
	defer func() { g.countDecision(now, resp, err) }()
	// 1 authenticate: the caller did; principal is who it proved to be.
	p, ok := g.targets[target]
	if !ok {
		return nil, fmt.Errorf("gateway: %w: %q", ErrUnknownTarget, target)
	}
	req := &ledger.Request{ID: newID("req_", now), Principal: principal, Target: target, SQL: sql, Created: now}
	delegs := g.reg.InForce(principal, target, now)

	// 2 parse, and answer at once what no human could approve.
	cat := p.Catalog()
	a, key := g.parse(req, cat, delegs)
	if err := g.rejectAtOnce(ctx, req, a); err != nil {
		return nil, err
	}
	// 3 static check against each delegation in force.
	in := g.checkEach(req, a, key, cat, delegs)
	// 4 route, decided once.
	rt, chosen := g.decideRoute(ctx, in, req, delegs, tx)
	// 5 the surveyed path: rehearsal inside the bound, then the panel.
	survey, err := g.follow(ctx, p, req, rt, chosen, tx)
	if err != nil {
		return nil, err
	}
	if req.Path == "" {
		// 6 a referral: admitted, recorded and queued for a human.
		return g.refer(ctx, req, rt.Evaluated, chosen)
	}
	var sess pilot.TxSession
	if tx != nil {
		// The decision names the client transaction's target transaction:
		// a reconciler leaves the request alone while it is in progress.
		sess = tx.session()
		req.TxID = sess.ID()
	}
	// 6 logbook, 7 the authorization: the decision is durable before any
	// authorization leaves.
	g.led.Flying(req.ID)
	defer g.led.Landed(req.ID)
	readFirst := g.readsFirst(p, req, a, tx)
	preq, err := g.authorize(ctx, p, req, rt, chosen, a.Canonical, readFirst)
	if err != nil {
		return nil, err
	}
	survey.expect(&preq)
	// 8 the Pilot verifies everything again and executes under guards.
	if sess != nil {
		return g.runInTx(ctx, tx, sess, req, preq, chosen)
	}
	res, err := p.Execute(ctx, preq)
	// 9 logbook: the execution's outcome, and 10 the answer.
	if readFirst {
		return g.recordRead(ctx, req, rt, chosen, res, err)
	}
	return g.executed(ctx, req, res, err, chosen, survey)
}

// pilotReferred records and answers a statement decided to run, then
// referred by the Pilot: it is queued all the same, and counts against
// the referral rate. inTx: it ran inside a client transaction, which its
// refusal aborted.
func (g *Gateway) pilotReferred(ctx context.Context, req *ledger.Request, res *pilot.Result, inTx bool) (*Response, error) {
	req.ApplyResult(res)
	if inTx {
		req.Reasons = append(req.Reasons, ReasonReferredInTx)
	}
	if err := g.led.Executed(context.WithoutCancel(ctx), req, res); err != nil {
		return nil, err
	}
	g.refs.Take(req.Principal)
	g.refs.Referred(req)
	g.cfg.Metrics.PilotRefusal(res.Code)
	return response(req), nil
}

// routeFacts are the facts route.Decide reads for a statement.
type routeFacts struct {
	g      *Gateway
	ctx    context.Context
	req    *ledger.Request
	delegs []*Delegation
	checks []route.Check
}

func (f routeFacts) Stale() string { return f.g.reg.Stale() }

func (f routeFacts) Survey(i int) route.Survey {
	s, err := f.g.surveyFacts(f.ctx, f.req.Target, f.delegs[i], f.checks[i].Decision)
	if err != nil {
		s.Unreadable = true
		f.g.cfg.Logger.Error("surveyed path", "request", f.req.ID, "err", err)
	}
	return s
}

func (f routeFacts) Quota(i int) route.Quota {
	return f.g.takeQuota(f.ctx, f.req.Principal, f.delegs[i])
}

// takeQuota takes a fast-path token from the delegation's bucket (its
// signed quota) and the principal's (config), or from neither, and says
// which was empty, or that the shared buckets could not be read.
func (g *Gateway) takeQuota(ctx context.Context, principal string, d *Delegation) route.Quota {
	var wants []quota.Want
	if q := d.Bound.Quota; q != nil {
		wants = append(wants, quota.Want{Key: "delegation:" + d.ID, Rate: quota.Rate{Count: q.Count, Per: q.Interval()}})
	}
	if r, ok := g.cfg.PrincipalQuota[principal]; ok {
		wants = append(wants, quota.Want{Key: "principal:" + principal, Rate: r})
	}
	if len(wants) == 0 {
		return route.Quota{}
	}
	var empty string
	if g.cfg.SharedQuota != nil {
		var err error
		if empty, err = g.cfg.SharedQuota(ctx, g.cfg.Clock(), wants); err != nil {
			g.cfg.Logger.Error("shared quota", "principal", principal, "delegation", d.ID, "err", err)
			return route.Quota{Unknown: true}
		}
	} else {
		empty = g.quota.Take(wants...)
	}
	switch {
	case empty == "":
		return route.Quota{}
	case strings.HasPrefix(empty, "delegation:"):
		g.cfg.Metrics.QuotaRefusal("delegation")
		return route.Quota{Empty: true}
	default:
		g.cfg.Metrics.QuotaRefusal("principal")
		return route.Quota{Empty: true, Principal: true}
	}
}

// quotaText is a delegation's signed quota as written, or "".
func quotaText(d *Delegation) string {
	if d.Bound.Quota == nil {
		return ""
	}
	return d.Bound.Quota.String()
}

// mintResult is a marque signed while its decision commits.
// authorityOf is the in-process authority of p, or nil when p is a
// Pilot in another process (or a wrapper that does not offer one).
func authorityOf(p pilot.Executor) *pilot.Authority {
	if l, ok := p.(interface{ Authority() *pilot.Authority }); ok {
		return l.Authority()
	}
	return nil
}

type mintResult struct {
	token string
	err   error
}

// append writes one logbook record, timing it.
func (g *Gateway) append(ctx context.Context, rec logbook.Record) (logbook.Entry, error) {
	start := time.Now()
	e, err := g.lb.Append(ctx, rec)
	if !rec.Lazy {
		// A lazy record waits for company on purpose: not a latency.
		g.cfg.Metrics.LogbookAppend(time.Since(start))
	}
	return e, err
}

// QueueStats reports the queue depth and the age of its oldest request.
func (g *Gateway) QueueStats(ctx context.Context) (int, time.Duration, error) {
	n, oldest, err := g.led.Count(ctx, StatusWaiting, "")
	if err != nil || n == 0 {
		return n, 0, err
	}
	return n, g.cfg.Clock().Sub(oldest), nil
}

// NotReadyError is Ready's error: which part does not answer (the store,
// the logbook, or "target NAME"), and why. Why is the part's own error
// text (a target's included), for the log and operators, never for an
// unauthenticated caller (DESIGN.md invariant 10).
type NotReadyError struct {
	Part string
	Err  error
}

func (e *NotReadyError) Error() string { return e.Part + ": " + e.Err.Error() }

func (e *NotReadyError) Unwrap() error { return e.Err }

// Ready checks that the store answers and every target answers. Its
// error is a *NotReadyError.
func (g *Gateway) Ready(ctx context.Context) error {
	if err := g.st.Ping(ctx); err != nil {
		return &NotReadyError{Part: "store", Err: err}
	}
	if _, _, err := g.lb.Head(ctx); err != nil {
		return &NotReadyError{Part: "logbook", Err: err}
	}
	for name, p := range g.targets {
		if err := p.Ping(ctx); err != nil {
			return &NotReadyError{Part: "target " + name, Err: err}
		}
	}
	return nil
}
