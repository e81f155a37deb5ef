package shadow

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/internal/pgtmp"
)

// template returns the Manager's template cluster, made on first use: a
// failure is returned to this use and the next one tries again.
func (m *Manager) template(ctx context.Context) (*pgtmp.Template, error) {
	m.tmplMu.Lock()
	defer m.tmplMu.Unlock()
	if m.tmpl != nil {
		return m.tmpl, nil
	}
	m.mu.Lock()
	closed := m.closed
	m.mu.Unlock()
	if closed {
		return nil, errors.New("shadow: closed")
	}
	t, err := pgtmp.NewTemplate(ctx, m.serverConfig(), prepareTemplate)
	if err != nil {
		return nil, err
	}
	m.tmpl = t
	return t, nil
}

// prepareTemplate does, once, what every shadow server needs and no bound
// changes: in the postgres database (renamed to the target's name in each
// copy, fill), the blocked functions' execution and the public schema's
// CREATE revoked from PUBLIC, the database closed to PUBLIC, its comment
// (initdb's "default administrative connection database") removed; and
// template0 dropped. template1 stays, for fill to connect to while it
// renames postgres, and is dropped by fill.
//
// Nothing here depends on a Spec: the template is made before any bound
// is seen and never started again, so it holds nothing of any bound.
func prepareTemplate(ctx context.Context, srv *pgtmp.Server) error {
	conn, err := pgx.Connect(ctx, srv.DSN("postgres"))
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, stmt := range []string{
		"REVOKE CREATE ON SCHEMA public FROM PUBLIC; " + revokeBlocked() + "; REVOKE ALL ON DATABASE postgres FROM PUBLIC; COMMENT ON DATABASE postgres IS NULL",
		"ALTER DATABASE template0 IS_TEMPLATE false",
		// DROP DATABASE runs alone, outside a transaction block.
		"DROP DATABASE template0",
	} {
		if _, err := conn.Exec(ctx, stmt, pgx.QueryExecModeSimpleProtocol); err != nil {
			return fmt.Errorf("%.60s: %w", stmt, err)
		}
	}
	return nil
}
