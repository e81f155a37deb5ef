package node

import (
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"
	"log/slog"

	"github.com/harbormaster-dev/harbormaster/internal/audit"
	"github.com/harbormaster-dev/harbormaster/internal/config"
	"github.com/harbormaster-dev/harbormaster/internal/llm"
	"github.com/harbormaster-dev/harbormaster/internal/store"
	"github.com/harbormaster-dev/harbormaster/internal/surveyor"
)

// NewPanel builds the Surveyor's panel from the config, or nil when no
// provider is configured (the surveyed path is then closed).
func NewPanel(cfg config.Surveyor, getenv func(string) string) (*surveyor.Panel, error) {
	if len(cfg.Providers) == 0 {
		return nil, nil
	}
	var jurors []llm.Juror
	for _, p := range cfg.Providers {
		j, err := llm.New(llm.ProviderConfig{Name: p.Name, Kind: p.Kind, BaseURL: p.BaseURL, Model: p.Model, APIKeyEnv: p.APIKeyEnv,
			Timeout: p.Timeout.D(), Proxy: p.Proxy, StructuredOutput: p.StructuredOutput}, getenv)
		if err != nil {
			return nil, fmt.Errorf("surveyor provider %s: %w", p.Name, err)
		}
		jurors = append(jurors, j)
	}
	return surveyor.NewPanel(surveyor.Config{Jurors: cfg.Jurors, Identity: cfg.Identity, Timeout: cfg.Timeout.D()}, jurors, surveyor.DefaultBundle())
}

// auditKey derives the sampling key from the control-plane key: agents
// never see it, so they cannot predict the sample.
func auditKey(k ed25519.PrivateKey) []byte {
	sum := sha256.Sum256(append([]byte("harbormaster audit sampling v1\n"), k.Seed()...))
	return sum[:]
}

func newAuditor(cfg config.Audit, key ed25519.PrivateKey, st *store.Store, lb audit.Appender, log *slog.Logger) (*audit.Auditor, error) {
	return audit.New(audit.Config{Rate: cfg.Rate, CorrelatedRate: cfg.CorrelatedRate, Window: cfg.Window, MaxWrong: cfg.MaxWrong,
		Webhook: cfg.Webhook, Key: auditKey(key), Logger: log}, st, lb)
}
