package mcpserver

import (
	"context"
	"errors"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/scope"
)

// ErrUnauthorized is a token the server does not accept (stdio mode).
var ErrUnauthorized = errors.New("the server refused the agent token")

// backend answers the tools for one principal: in process through the
// gateway, or (stdio) through a running server's HTTP API. Errors are the
// gateway's (gateway.SQLError, ErrUnknownTarget, ErrNotFound,
// ErrLogUnavailable) in both cases, so the tools render them alike, by
// their class (gateway.Classify).
type backend interface {
	Submit(ctx context.Context, target, sql string) (*gateway.Response, error)
	WaitRequest(ctx context.Context, id string, wait time.Duration) (*gateway.RequestView, error)
	// Delegations returns the principal's delegations in force.
	Delegations(ctx context.Context) ([]scope.DelegationView, error)
	Tables(ctx context.Context, target string) (*scope.TablesView, error)
}

// gatewayBackend is the in-process backend of one authenticated principal.
type gatewayBackend struct {
	gw        *gateway.Gateway
	principal string
	clock     func() time.Time
}

func (b *gatewayBackend) Submit(ctx context.Context, target, sql string) (*gateway.Response, error) {
	return b.gw.Submit(ctx, b.principal, target, sql)
}

func (b *gatewayBackend) WaitRequest(ctx context.Context, id string, wait time.Duration) (*gateway.RequestView, error) {
	return b.gw.WaitRequest(ctx, id, b.principal, wait)
}

func (b *gatewayBackend) Delegations(context.Context) ([]scope.DelegationView, error) {
	now := b.clock()
	out := []scope.DelegationView{}
	for _, d := range b.gw.Registry().Delegations(b.principal) {
		if d.Active(now) {
			out = append(out, scope.ViewDelegation(d, now))
		}
	}
	return out, nil
}

func (b *gatewayBackend) Tables(_ context.Context, target string) (*scope.TablesView, error) {
	return scope.DescribeTables(b.gw, b.principal, target, b.clock())
}
