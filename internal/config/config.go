// Package config reads and validates the harbormaster serve configuration
// and the configuration of a Pilot in its own process (pilot.go), both
// YAML. Every field is documented in docs/operations.md; defaults are
// applied by WithDefaults and every error names the field.
package config

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/harbormaster-dev/harbormaster/internal/llm"
	"github.com/harbormaster-dev/harbormaster/internal/quota"
)

// Config is the serve configuration.
type Config struct {
	// Name is the control plane's name (marque issuer, checkpoint origin).
	// Defaults to "harbormaster".
	Name string `yaml:"name"`
	// Listen is the HTTP address of the API and MCP. Defaults to
	// 127.0.0.1:8080. An address other than loopback needs TLS, or
	// AllowInsecureListen: agents' bearer tokens and humans' signed
	// requests must not cross a network in clear text.
	Listen string `yaml:"listen"`
	// TLS, when set, serves the API and MCP over HTTPS with this
	// certificate and key. Defaults to none (plain HTTP, loopback only).
	TLS *TLS `yaml:"tls"`
	// AllowInsecureListen permits a listen address other than loopback
	// without TLS, for a node behind a TLS-terminating proxy on a private
	// network. Defaults to false.
	AllowInsecureListen bool `yaml:"allow_insecure_listen"`
	// ListenPG, when set, is the address of the PostgreSQL wire front
	// (docs/pgwire.md), e.g. 127.0.0.1:6432. Defaults to none: off.
	ListenPG string `yaml:"listen_pg"`
	// MetricsListen is the only address /metrics is served at, a listener
	// of its own: nothing of the process (the Go runtime's allocation
	// counters, other agents' activity, the queue) is served where agents
	// connect (DESIGN.md invariant 10), so it may not be listen's or
	// listen_pg's address. Defaults to DefaultMetricsListen, on loopback;
	// "off" serves no metrics. An address other than loopback must be one
	// no agent can reach. The metrics carry no credential: no TLS here.
	MetricsListen string `yaml:"metrics_listen"`
	// PGTLS is the wire front's certificate. Without it the front offers
	// no TLS, and only agents with a pg_scram verifier can connect.
	PGTLS PGTLS `yaml:"pg_tls"`
	// PGTransactions bounds the wire front's transactions (BEGIN ...
	// COMMIT), each of which holds one of its target Pilot's connections
	// while it is open.
	PGTransactions PGTransactions `yaml:"pg_transactions"`
	// PGCatalog is the wire front's catalog: catalog queries (psql \d,
	// ORMs' reflection) answered over a shadow catalog drawn from each
	// agent's bound.
	PGCatalog PGCatalog `yaml:"pg_catalog"`
	// Store is the control store: the path of a SQLite file (one node),
	// or a postgres:// or postgresql:// URL of a PostgreSQL database that
	// several nodes share (docs/operations.md). A URL may leave the
	// password out: PGPASSWORD and the passfile apply. Required.
	Store string `yaml:"store"`
	// ControlPlaneKey is the PEM (PKCS#8) Ed25519 key that signs marques
	// and logbook checkpoints. Required.
	ControlPlaneKey string `yaml:"control_plane_key"`
	// Signers is the OpenSSH allowed-signers file of the humans who may sign
	// (principals NAME@TARGET). Required.
	Signers string `yaml:"signers"`
	// Delegations, when set, is a directory of NAME.yaml files each with a
	// NAME.yaml.sig signature, loaded at start. Delegations may also be
	// uploaded with POST /v1/delegations.
	Delegations string `yaml:"delegations"`
	// MarqueTTL is how long a marque is valid. Defaults to 30s; at most 5m.
	MarqueTTL Duration `yaml:"marque_ttl"`
	// Targets are the databases agents act on. At least one.
	Targets []Target `yaml:"targets"`
	// Agents are the agent principals and their token hashes.
	Agents []Agent `yaml:"agents"`
	// Logbook tunes checkpoints.
	Logbook Logbook `yaml:"logbook"`
	// Queue tunes the referral queue.
	Queue Queue `yaml:"queue"`
	// Surveyor configures the Tier B panel. Without providers the surveyed
	// path is closed and statements that need it are referred.
	Surveyor Surveyor `yaml:"surveyor"`
	// Audit configures the sampled audit of surveyed conforms.
	Audit Audit `yaml:"audit"`
	// Leadsman configures the advisory notes on referred requests
	// (docs/leadsman.md). Without a provider it is off.
	Leadsman Leadsman `yaml:"leadsman"`
	// SwitchPoll is how often this node reads the switches. Defaults to
	// 1s, at most 1s; three missed reads turn Tier B off on this node.
	SwitchPoll Duration `yaml:"switch_poll"`
	// Services tunes the node's background services.
	Services Services `yaml:"services"`
	// Console tunes the web console's sessions.
	Console Console `yaml:"console"`
	// MCP guards the /mcp endpoint against DNS rebinding.
	MCP MCP `yaml:"mcp"`

	// dir is the config file's directory; relative paths resolve from it.
	dir string
}

// TLS is the HTTPS certificate of the API and MCP.
type TLS struct {
	// Cert is the PEM certificate file (the chain, leaf first). Required.
	Cert string `yaml:"cert"`
	// Key is the PEM private key file of that certificate. Required.
	Key string `yaml:"key"`
}

// Console tunes the web console (docs/console.md).
type Console struct {
	// SecureCookies marks the session cookie Secure on plain HTTP too: set
	// it when a proxy terminates TLS in front of the node. Over TLS the
	// cookie always is.
	SecureCookies bool `yaml:"secure_cookies"`
	// SessionTTL is how long a console session lasts. Defaults to 8h; at
	// most 24h.
	SessionTTL Duration `yaml:"session_ttl"`
	// AuditAlert is the audit-queue age the console shows in red. Defaults
	// to 24h, the shipped alert rule's threshold.
	AuditAlert Duration `yaml:"audit_alert"`
}

// MCP lists the names under which /mcp may be reached, as the MCP
// specification asks of a server (DNS rebinding). Loopback names and IP
// addresses are always allowed.
type MCP struct {
	// AllowedHosts are the host names (no port) clients reach this node
	// under, e.g. the name of a reverse proxy: a request whose Host is
	// another name is refused with 403.
	AllowedHosts []string `yaml:"allowed_hosts"`
	// AllowedOrigins are the browser origins (scheme://host[:port]) that
	// may call /mcp besides loopback ones and those of AllowedHosts.
	AllowedOrigins []string `yaml:"allowed_origins"`
}

// Target is one database.
type Target struct {
	// Name as delegations name it. Required: lower-case letters, digits, _ and -.
	Name string `yaml:"name"`
	// DSN is the connection string (the Pilot's credentials). Exactly one of
	// DSN, DSNEnv and Pilot.
	DSN string `yaml:"dsn"`
	// DSNEnv names an environment variable holding the DSN.
	DSNEnv string `yaml:"dsn_env"`
	// Pilot, in a serve config, names a Pilot running in its own process
	// (harbormaster pilot) that holds the target's credentials; the
	// settings below are then that Pilot's, not set here.
	Pilot *RemotePilot `yaml:"pilot"`
	// Role, when set, is assumed for agent statements (least privilege).
	Role string `yaml:"role"`
	// SearchPath is pinned for every statement. Defaults to [public].
	SearchPath []string `yaml:"search_path"`
	// StatementTimeout defaults to 5s; LockTimeout to 2s.
	StatementTimeout Duration `yaml:"statement_timeout"`
	LockTimeout      Duration `yaml:"lock_timeout"`
}

// RemotePilot is how the control plane reaches a Pilot in its own
// process: over mutual TLS.
type RemotePilot struct {
	// URL is https://HOST:PORT. Required.
	URL string `yaml:"url"`
	// CA is the PEM file of the CA that signed the Pilot's server
	// certificate. Required.
	CA string `yaml:"ca"`
	// Cert and Key are the PEM client certificate and key the control
	// plane presents. Required.
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
	// ServerName is the name the Pilot's certificate must carry. Defaults
	// to the URL's host.
	ServerName string `yaml:"server_name"`
	// Timeout bounds one call to the Pilot; keep it above the Pilot's
	// call_timeout, so the Pilot gives up first. Defaults to 1m.
	Timeout Duration `yaml:"timeout"`
}

// Remote reports whether the target's Pilot runs in its own process.
func (t Target) Remote() bool { return t.Pilot != nil }

// PGTLS is the wire front's server certificate (PEM files).
type PGTLS struct {
	// Cert and Key are the certificate chain and its key. Both or neither.
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
}

// PGTransactions bounds the wire front's transactions.
type PGTransactions struct {
	// IdleTimeout ends a session idle this long inside a transaction,
	// rolling it back. Defaults to 60s.
	IdleTimeout Duration `yaml:"idle_timeout"`
	// MaxDuration rolls back a transaction open longer. Defaults to 10m.
	MaxDuration Duration `yaml:"max_duration"`
	// MaxOpen caps the transactions open at once on each target. Defaults
	// to 8, a quarter of the Pilot's 32 connections.
	MaxOpen int `yaml:"max_open"`
}

// PGCatalog configures the wire front's shadow catalogs (internal/shadow):
// one schema-only PostgreSQL server per agent bound, started from the
// local server binaries on its first catalog query.
type PGCatalog struct {
	// Shadow is "auto" (on when the PostgreSQL server binaries are found,
	// else off), "on" (the node does not start without them) or "off"
	// (catalog queries are refused, 0A000). Defaults to "auto".
	Shadow string `yaml:"shadow"`
	// BinDir holds initdb and postgres. Defaults to the ones found
	// (pg_config, then /usr/lib/postgresql/<N>/bin).
	BinDir string `yaml:"bin_dir"`
	// MaxServers caps the shadow servers running at once. Defaults to 8.
	MaxServers int `yaml:"max_servers"`
	// IdleStop stops a shadow server unused this long. Defaults to 10m.
	IdleStop Duration `yaml:"idle_stop"`
	// StatementTimeout bounds one catalog query. Defaults to 2s.
	StatementTimeout Duration `yaml:"statement_timeout"`
}

// Agent is one agent principal.
type Agent struct {
	// Principal is agent:NAME.
	Principal string `yaml:"principal"`
	// TokenSHA256 is the lowercase hex SHA-256 of the agent's bearer token
	// (harbormaster token prints both). The token itself is never stored.
	TokenSHA256 string `yaml:"token_sha256"`
	// Quota is the principal's fast-path rate, e.g. 600/minute (ZFN-18).
	// Defaults to none (only the delegations' signed quotas apply).
	Quota string `yaml:"quota"`
	// PGSCRAM is the agent's SCRAM-SHA-256 verifier for the wire front
	// (harbormaster token prints it): derived from the token, from which
	// it cannot be recovered. Without it the agent connects over the wire
	// only with TLS, sending its token as a password.
	PGSCRAM string `yaml:"pg_scram"`
}

// Surveyor configures the panel.
type Surveyor struct {
	// Identity is the Surveyor's principal. Defaults to "surveyor:default".
	Identity string `yaml:"identity"`
	// Jurors is the panel size n; at least 3. Defaults to 3.
	Jurors int `yaml:"jurors"`
	// Timeout bounds one panel. Defaults to 30s.
	Timeout Duration `yaml:"timeout"`
	// Providers are the model endpoints jurors are spread across.
	Providers []Provider `yaml:"providers"`
	// ShapeDissentBand is the shape screen's expected share of dissent
	// [low, high], exported as a metric for the shipped alert rules.
	// Defaults to [0.01, 0.30].
	ShapeDissentBand []float64 `yaml:"shape_dissent_band"`
}

// Provider is one model endpoint.
type Provider struct {
	// Name identifies it in judgments. Required, unique.
	Name string `yaml:"name"`
	// Kind is "openai" (OpenAI and OpenAI-compatible servers: vLLM,
	// llama.cpp server, Ollama) or "anthropic".
	Kind string `yaml:"kind"`
	// BaseURL of the API (e.g. http://127.0.0.1:11434/v1 for Ollama).
	BaseURL string `yaml:"base_url"`
	// Model name. Required.
	Model string `yaml:"model"`
	// APIKeyEnv names the environment variable holding the API key.
	APIKeyEnv string `yaml:"api_key_env"`
	// Timeout per call. Defaults to 20s.
	Timeout Duration `yaml:"timeout"`
	// Proxy is the egress HTTP proxy URL. Defaults to none (environment
	// proxies are ignored).
	Proxy string `yaml:"proxy"`
	// StructuredOutput asks for a JSON schema; answers are parsed strictly
	// either way. Defaults to true.
	StructuredOutput *bool `yaml:"structured_output"`
}

// Leadsman configures the Leadsman: a model that writes an advisory note
// on each referred request for the approvers. No decision reads it.
type Leadsman struct {
	// Identity is the Leadsman's principal, leadsman:NAME. Defaults to
	// "leadsman:default".
	Identity string `yaml:"identity"`
	// Provider is the model endpoint. Unset: the Leadsman is off.
	// structured_output does not apply (a note is prose).
	Provider *Provider `yaml:"provider"`
	// ShareRows and RehearsalWait are gone: nothing of a referred
	// statement runs before a human asks, so there are no rows to share
	// and nothing to wait for; the model sees the statement and the
	// reasons. Setting either is an error that says so. (A field tagged
	// gone is read only to refuse it; the example config omits it.)
	ShareRows     bool     `yaml:"share_rows" gone:"true"`
	RehearsalWait Duration `yaml:"rehearsal_wait" gone:"true"`
	// Poll is how often the Leadsman looks for requests without a note.
	// Defaults to 1s.
	Poll Duration `yaml:"poll"`
}

// On reports whether the Leadsman is configured.
func (l Leadsman) On() bool { return l.Provider != nil }

// Audit configures the sampled audit.
type Audit struct {
	// Rate is the share of surveyed conforms sampled. Defaults to 0.10.
	Rate float64 `yaml:"rate"`
	// CorrelatedRate applies to correlated panels. Defaults to 0.5.
	CorrelatedRate float64 `yaml:"correlated_rate"`
	// Window and MaxWrong: suspend a delegation's fast path when MaxWrong of
	// its last Window reviews were wrong. Defaults 20 and 1.
	Window   int `yaml:"window"`
	MaxWrong int `yaml:"max_wrong"`
	// Webhook is told of every finding (to reach the grantor).
	Webhook string `yaml:"webhook"`
}

// Queue tunes the referral queue.
type Queue struct {
	// TTL is how long a referred request waits for a human before it
	// expires. Defaults to 24h.
	TTL Duration `yaml:"ttl"`
	// ApprovalTTL is how long a proposed approval may be signed and used.
	// Defaults to 15m.
	ApprovalTTL Duration `yaml:"approval_ttl"`
	// Webhook, when set, receives a Slack-compatible JSON message for every
	// new referral. It never blocks the statement path.
	Webhook string `yaml:"webhook"`
	// ReferralRate is how many statements one agent may have referred to
	// a human, such as "1000/hour"; past it a statement that would be
	// referred is refused (HTTP 429), recorded and not queued. Defaults to
	// 1000/hour; "off" turns it off.
	ReferralRate string `yaml:"referral_rate"`
	// MaxWaiting caps the requests one agent may have waiting for a human;
	// past it a statement that would be referred is refused. Defaults to
	// 1000; -1 turns it off.
	MaxWaiting int `yaml:"max_waiting"`
}

// Services are the intervals of a node's background services, each
// defaulting to 1s (docs/operations.md, "Background services").
type Services struct {
	// QueueExpiry: how often waiting requests past the queue's TTL expire.
	QueueExpiry Duration `yaml:"queue_expiry"`
	// DelegationExpiry: how often delegations past their expiry are logged.
	DelegationExpiry Duration `yaml:"delegation_expiry"`
	// Reconcile: how often requests left running are settled from receipts.
	Reconcile Duration `yaml:"reconcile"`
	// Delegations: how often delegations added or revoked through other
	// nodes are read from the store.
	Delegations Duration `yaml:"delegations"`
	// DelegationsStale: how old the last good read of the delegations may
	// be before this node runs nothing on the fast path. Defaults to five
	// Delegations intervals.
	DelegationsStale Duration `yaml:"delegations_stale"`
	// Clock: how often a PostgreSQL store's clock is read. Defaults to 5s.
	Clock Duration `yaml:"clock"`
	// ClockLeeway: how far this node's clock may be off the store's before
	// its expiry decisions hold at both. Defaults to 1s.
	ClockLeeway Duration `yaml:"clock_leeway"`
}

// Referrals is the referral rate: zero for the default, a negative Count
// for none.
func (q Queue) Referrals() (quota.Rate, error) {
	switch strings.ToLower(strings.TrimSpace(q.ReferralRate)) {
	case "":
		return quota.Rate{}, nil
	case "off", "none":
		return quota.Rate{Count: -1}, nil
	}
	return quota.ParseRate(q.ReferralRate)
}

// Logbook tunes the logbook.
type Logbook struct {
	// CheckpointEvery signs a checkpoint every N entries. Defaults to 1000.
	CheckpointEvery int `yaml:"checkpoint_every"`
	// CheckpointInterval signs one at least this often when entries were
	// added. Defaults to 10s.
	CheckpointInterval Duration `yaml:"checkpoint_interval"`
	// Retain keeps entries, and the rows of the settled requests they
	// decided, this long; older ones are removed through signed
	// checkpoints, each removal recorded in the chain (docs/operations.md,
	// "Retention"). Defaults to 2160h (90 days); at least 24h.
	Retain Duration `yaml:"retain"`
	// KeepAll turns retention off: the store keeps everything and grows
	// without bound.
	KeepAll bool `yaml:"keep_all"`
	// PruneEvery is how often retention runs. Defaults to 1h.
	PruneEvery Duration `yaml:"prune_every"`
	// Archive, when set, is a directory that receives every range of
	// entries before it is removed, as JSON lines (logbook export's
	// format), written and synced first.
	Archive string `yaml:"archive"`
}

// DefaultRetain is how long the logbook keeps entries when logbook.retain
// is not set.
const DefaultRetain = 90 * 24 * time.Hour

// MinRetain is the shortest logbook.retain accepted.
const MinRetain = 24 * time.Hour

// Duration is a time.Duration written as "30s".
type Duration time.Duration

// UnmarshalYAML reads "30s", "5m".
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %q is not a duration such as 30s", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Load reads a config file. getenv resolves dsn_env.
func Load(path string) (*Config, error) {
	var c Config
	if err := decodeFile(path, &c); err != nil {
		return nil, err
	}
	c.dir = filepath.Dir(path)
	c = c.WithDefaults()
	if err := c.Validate(os.Getenv); err != nil {
		return nil, fmt.Errorf("config: %s: %w", path, err)
	}
	return &c, nil
}

// decodeFile reads a YAML file of at most 1 MiB into v, refusing fields v
// does not have.
func decodeFile(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if len(data) > 1<<20 {
		return fmt.Errorf("config: %s is over 1 MiB", path)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("config: %s: %w", path, err)
	}
	return nil
}

// LoadSurveyor reads a config file for its surveyor section only (as
// harbormaster surveyor regress does): the rest need not be complete.
func LoadSurveyor(path string) (*Config, error) {
	var c Config
	if err := decodeFile(path, &c); err != nil {
		return nil, err
	}
	c.dir = filepath.Dir(path)
	c = c.WithDefaults()
	var errs []error
	c.validateSurveyor(func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	})
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("config: %s: %w", path, err)
	}
	return &c, nil
}

// WithDefaults fills unset fields.
func (c Config) WithDefaults() Config {
	if c.Name == "" {
		c.Name = "harbormaster"
	}
	if c.Listen == "" {
		c.Listen = "127.0.0.1:8080"
	}
	if c.MetricsListen == "" {
		c.MetricsListen = DefaultMetricsListen
	}
	if c.MarqueTTL == 0 {
		c.MarqueTTL = Duration(30 * time.Second)
	}
	if c.Surveyor.Jurors == 0 {
		c.Surveyor.Jurors = 3
	}
	if c.Surveyor.Identity == "" {
		c.Surveyor.Identity = "surveyor:default"
	}
	if len(c.Surveyor.ShapeDissentBand) == 0 {
		c.Surveyor.ShapeDissentBand = []float64{0.01, 0.30}
	}
	if c.Leadsman.Identity == "" {
		c.Leadsman.Identity = "leadsman:default"
	}
	if c.Queue.TTL == 0 {
		c.Queue.TTL = Duration(24 * time.Hour)
	}
	if c.Queue.ApprovalTTL == 0 {
		c.Queue.ApprovalTTL = Duration(15 * time.Minute)
	}
	if c.SwitchPoll == 0 {
		c.SwitchPoll = Duration(time.Second)
	}
	if c.Console.SessionTTL == 0 {
		c.Console.SessionTTL = Duration(8 * time.Hour)
	}
	if c.Console.AuditAlert == 0 {
		c.Console.AuditAlert = Duration(24 * time.Hour)
	}
	if c.Logbook.CheckpointEvery == 0 {
		c.Logbook.CheckpointEvery = 1000
	}
	if c.Logbook.CheckpointInterval == 0 {
		c.Logbook.CheckpointInterval = Duration(10 * time.Second)
	}
	if c.Logbook.Retain == 0 {
		c.Logbook.Retain = Duration(DefaultRetain)
	}
	if c.Logbook.PruneEvery == 0 {
		c.Logbook.PruneEvery = Duration(time.Hour)
	}
	for i := range c.Targets {
		c.Targets[i] = c.Targets[i].withDefaults()
	}
	return c
}

func (t Target) withDefaults() Target {
	if t.Pilot != nil {
		// The remote Pilot's own config sets these.
		if t.Pilot.Timeout == 0 {
			t.Pilot.Timeout = Duration(time.Minute)
		}
		return t
	}
	if len(t.SearchPath) == 0 {
		t.SearchPath = []string{"public"}
	}
	if t.StatementTimeout == 0 {
		t.StatementTimeout = Duration(5 * time.Second)
	}
	if t.LockTimeout == 0 {
		t.LockTimeout = Duration(2 * time.Second)
	}
	return t
}

var (
	nameRE      = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)
	principalRE = regexp.MustCompile(`^agent:[a-z0-9][a-z0-9._-]{0,62}$`)
	hexRE       = regexp.MustCompile(`^[0-9a-f]{64}$`)
	scramRE     = regexp.MustCompile(`^SCRAM-SHA-256\$[0-9]{1,7}:[A-Za-z0-9+/=]{4,64}\$[A-Za-z0-9+/=]{44}:[A-Za-z0-9+/=]{44}$`)
	quotaRE     = regexp.MustCompile(`^[0-9]{1,9}\s*/\s*(second|minute|hour|day)$`)
)

// Validate checks every field and returns all problems, each naming its field.
func (c *Config) Validate(getenv func(string) string) error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.Store == "" {
		bad("store", "required: the path of the SQLite control store, or a postgres:// URL")
	}
	if c.ControlPlaneKey == "" {
		bad("control_plane_key", "required: a PEM Ed25519 key (harbormaster keygen --control-plane)")
	} else if _, err := LoadControlPlaneKey(c.Path(c.ControlPlaneKey)); err != nil {
		bad("control_plane_key", "%v", err)
	}
	if c.Signers == "" {
		bad("signers", "required: an OpenSSH allowed-signers file")
	} else if _, err := os.Stat(c.Path(c.Signers)); err != nil {
		bad("signers", "%v", err)
	}
	if c.Delegations != "" {
		if st, err := os.Stat(c.Path(c.Delegations)); err != nil || !st.IsDir() {
			bad("delegations", "must be a directory: %v", err)
		}
	}
	c.validateListen(bad)
	c.validateMetricsListen(bad)
	switch c.PGCatalog.Shadow {
	case "", "auto", "on", "off":
	default:
		bad("pg_catalog.shadow", "must be auto, on or off, got %q", c.PGCatalog.Shadow)
	}
	if c.PGCatalog.MaxServers < 0 || c.PGCatalog.IdleStop.D() < 0 || c.PGCatalog.StatementTimeout.D() < 0 {
		bad("pg_catalog", "max_servers, idle_stop and statement_timeout may not be negative")
	}
	if c.MarqueTTL.D() <= 0 || c.MarqueTTL.D() > 5*time.Minute {
		bad("marque_ttl", "must be between 1s and 5m")
	}
	if len(c.Targets) == 0 {
		bad("targets", "at least one target is required")
	}
	validateTargets(c.Targets, getenv, c.Path, true, bad)
	seenAgent := map[string]bool{}
	for i, a := range c.Agents {
		f := fmt.Sprintf("agents[%d]", i)
		if !principalRE.MatchString(a.Principal) {
			bad(f+".principal", "must look like agent:ops-bot, got %q", a.Principal)
		}
		if !hexRE.MatchString(a.TokenSHA256) {
			bad(f+".token_sha256", "must be 64 lower-case hex characters (the SHA-256 of the token)")
		}
		if seenAgent[a.TokenSHA256] {
			bad(f+".token_sha256", "two agents share one token")
		}
		seenAgent[a.TokenSHA256] = true
		if a.PGSCRAM != "" && !scramRE.MatchString(a.PGSCRAM) {
			bad(f+".pg_scram", "must be a SCRAM-SHA-256 verifier as harbormaster token prints it (SCRAM-SHA-256$4096:SALT$STOREDKEY:SERVERKEY)")
		}
		if a.Quota != "" && !quotaRE.MatchString(strings.ToLower(a.Quota)) {
			bad(f+".quota", "must look like 600/minute (per second, minute, hour or day), got %q", a.Quota)
		}
	}
	c.validateSurveyor(bad)
	c.validateLeadsman(bad)
	if c.Audit.Rate < 0 || c.Audit.Rate > 1 || c.Audit.CorrelatedRate < 0 || c.Audit.CorrelatedRate > 1 {
		bad("audit.rate", "rates must be between 0 and 1")
	}
	// A correlated panel is sampled more than a diverse one (the Surveyor
	// EDR): its rate must be above the deployment's, unless that is 1.
	rate, corr := c.Audit.Rate, c.Audit.CorrelatedRate
	if rate == 0 {
		rate = 0.10
	}
	if corr == 0 {
		corr = 0.5
	}
	if rate < 1 && corr <= rate {
		bad("audit.correlated_rate", "must be above audit.rate (%g), got %g: a correlated panel is sampled more than a diverse one", rate, corr)
	}
	if c.Audit.Window < 0 || c.Audit.MaxWrong < 0 {
		bad("audit.window", "window and max_wrong must not be negative")
	}
	if c.Audit.Webhook != "" && !strings.HasPrefix(c.Audit.Webhook, "https://") && !strings.HasPrefix(c.Audit.Webhook, "http://") {
		bad("audit.webhook", "must be an http(s) URL")
	}
	if c.SwitchPoll.D() <= 0 || c.SwitchPoll.D() > time.Second {
		bad("switch_poll", "must be between 1ms and 1s")
	}
	if c.Console.SessionTTL.D() < time.Minute || c.Console.SessionTTL.D() > 24*time.Hour {
		bad("console.session_ttl", "must be between 1m and 24h")
	}
	if c.Console.AuditAlert.D() < time.Minute {
		bad("console.audit_alert", "must be at least 1m")
	}
	if c.Queue.TTL.D() < time.Minute {
		bad("queue.ttl", "must be at least 1m")
	}
	if c.Queue.Webhook != "" && !strings.HasPrefix(c.Queue.Webhook, "https://") && !strings.HasPrefix(c.Queue.Webhook, "http://") {
		bad("queue.webhook", "must be an http(s) URL")
	}
	if _, err := c.Queue.Referrals(); err != nil {
		bad("queue.referral_rate", "must look like 1000/hour (per second, minute, hour or day) or off, got %q", c.Queue.ReferralRate)
	}
	if c.Queue.MaxWaiting < -1 {
		bad("queue.max_waiting", "must be positive, or -1 for no cap")
	}
	if c.ListenPG != "" {
		if _, _, err := net.SplitHostPort(c.ListenPG); err != nil {
			bad("listen_pg", "must be HOST:PORT, e.g. 127.0.0.1:6432: %v", err)
		}
	}
	if (c.PGTLS.Cert == "") != (c.PGTLS.Key == "") {
		bad("pg_tls", "cert and key go together: set both or neither")
	} else if c.PGTLS.Cert != "" {
		if _, err := tls.LoadX509KeyPair(c.Path(c.PGTLS.Cert), c.Path(c.PGTLS.Key)); err != nil {
			bad("pg_tls", "%v", err)
		}
	}
	if c.Logbook.CheckpointEvery < 1 {
		bad("logbook.checkpoint_every", "must be at least 1")
	}
	if !c.Logbook.KeepAll && c.Logbook.Retain.D() < MinRetain {
		bad("logbook.retain", "must be at least %s (or set logbook.keep_all)", MinRetain)
	}
	if c.Logbook.PruneEvery.D() < 0 {
		bad("logbook.prune_every", "must not be negative")
	}
	return errors.Join(errs...)
}

// validateListen refuses a listen address reachable from other machines
// without TLS, unless allow_insecure_listen says a proxy terminates TLS.
func (c *Config) validateListen(bad func(field, format string, args ...any)) {
	host, port, err := net.SplitHostPort(c.Listen)
	if err != nil || port == "" {
		bad("listen", "must be HOST:PORT such as 127.0.0.1:8080, got %q", c.Listen)
		return
	}
	if c.TLS != nil {
		switch {
		case c.TLS.Cert == "" || c.TLS.Key == "":
			bad("tls", "give both cert and key (PEM files)")
		default:
			if _, err := tls.LoadX509KeyPair(c.Path(c.TLS.Cert), c.Path(c.TLS.Key)); err != nil {
				bad("tls", "the certificate and key do not load: %v", err)
			}
		}
		return
	}
	if !LoopbackHost(host) && !c.AllowInsecureListen {
		bad("listen", "%s is reachable from other machines and tls is not set: agents' bearer tokens would cross the network in clear text; "+
			"set tls (cert, key), or allow_insecure_listen: true when a TLS proxy on a private network is the only way in", c.Listen)
	}
}

// DefaultMetricsListen is where /metrics is served unless metrics_listen
// says otherwise: loopback, on a port clear of the API's (8080), the wire
// front's (6432), the Pilot's (7443) and Prometheus's own (9090).
const DefaultMetricsListen = "127.0.0.1:9464"

// MetricsAddr is the address /metrics is served at, or "" when
// metrics_listen is off.
func (c *Config) MetricsAddr() string {
	if metricsOff(c.MetricsListen) {
		return ""
	}
	return c.MetricsListen
}

func metricsOff(v string) bool { return strings.EqualFold(strings.TrimSpace(v), "off") }

// validateMetricsListen refuses a metrics address that is, or overlaps,
// an address agents connect to (listen, listen_pg): there is no setting
// that puts /metrics where agents are.
func (c *Config) validateMetricsListen(bad func(field, format string, args ...any)) {
	if metricsOff(c.MetricsListen) {
		return
	}
	if _, port, err := net.SplitHostPort(c.MetricsListen); err != nil || port == "" {
		bad("metrics_listen", "must be HOST:PORT such as %s, or off, got %q", DefaultMetricsListen, c.MetricsListen)
		return
	}
	for _, l := range []struct{ field, addr string }{{"listen", c.Listen}, {"listen_pg", c.ListenPG}} {
		if l.addr != "" && sameListener(c.MetricsListen, l.addr) {
			bad("metrics_listen", "%s is where agents connect (%s: %s): /metrics is never served there, the process's counters would reach agents; "+
				"give it an address of its own, such as %s, or off", c.MetricsListen, l.field, l.addr, DefaultMetricsListen)
		}
	}
}

// sameListener reports whether two listen addresses (HOST:PORT) would
// take connections on a common address: the same port, and the same host
// or either one every interface ("", 0.0.0.0, ::), or localhost and a
// loopback address. Port 0 (any free port) is never the same. Host names
// other than localhost are compared by name.
func sameListener(a, b string) bool {
	ha, pa, err := net.SplitHostPort(a)
	if err != nil {
		return false
	}
	hb, pb, err := net.SplitHostPort(b)
	if err != nil {
		return false
	}
	na, ea := net.LookupPort("tcp", pa)
	nb, eb := net.LookupPort("tcp", pb)
	switch {
	case ea != nil || eb != nil:
		if pa != pb {
			return false
		}
	case na != nb || na == 0:
		return false
	}
	wildcard := func(h string) bool { ip := net.ParseIP(h); return h == "" || ip != nil && ip.IsUnspecified() }
	if wildcard(ha) || wildcard(hb) || strings.EqualFold(ha, hb) {
		return true
	}
	ia, ib := net.ParseIP(ha), net.ParseIP(hb)
	switch {
	case ia != nil && ib != nil:
		return ia.Equal(ib)
	case strings.EqualFold(ha, "localhost"):
		return ib != nil && ib.IsLoopback()
	case strings.EqualFold(hb, "localhost"):
		return ia != nil && ia.IsLoopback()
	}
	return false
}

// LoopbackHost reports whether a listen host is reachable from this
// machine only: localhost, 127.0.0.0/8 or ::1 (an empty host or 0.0.0.0
// is every interface).
func LoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Path resolves p relative to the config file's directory.
func (c *Config) Path(p string) string { return resolve(c.dir, p) }

func resolve(dir, p string) string {
	if p == "" || filepath.IsAbs(p) || dir == "" {
		return p
	}
	return filepath.Join(dir, p)
}

// validateTargets checks targets: remote says whether a target may name
// a remote Pilot (a serve config) instead of a DSN (a pilot config).
func validateTargets(targets []Target, getenv func(string) string, path func(string) string, remote bool, bad func(field, format string, args ...any)) {
	seen := map[string]bool{}
	for i, t := range targets {
		f := fmt.Sprintf("targets[%d]", i)
		if !nameRE.MatchString(t.Name) {
			bad(f+".name", "must be lower-case letters, digits, _ and -, got %q", t.Name)
		}
		if seen[t.Name] {
			bad(f+".name", "%q is listed twice", t.Name)
		}
		seen[t.Name] = true
		given := 0
		for _, set := range []bool{t.DSN != "", t.DSNEnv != "", t.Pilot != nil} {
			if set {
				given++
			}
		}
		switch {
		case t.Pilot != nil && !remote:
			bad(f+".pilot", "a Pilot's own config connects to its target: give dsn or dsn_env")
		case given > 1 && remote:
			bad(f, "give exactly one of dsn, dsn_env and pilot")
		case given > 1:
			bad(f, "give dsn or dsn_env, not both")
		case given == 0 && remote:
			bad(f+".dsn", "required (or dsn_env, or pilot for a Pilot in its own process)")
		case given == 0:
			bad(f+".dsn", "required (or dsn_env)")
		case t.DSNEnv != "" && getenv(t.DSNEnv) == "":
			bad(f+".dsn_env", "the environment variable %s is empty", t.DSNEnv)
		}
		if t.Pilot != nil && remote {
			validateRemotePilot(f+".pilot", t, path, bad)
		}
	}
}

func validateRemotePilot(f string, t Target, path func(string) string, bad func(field, format string, args ...any)) {
	p := t.Pilot
	if t.Role != "" || len(t.SearchPath) != 0 || t.StatementTimeout != 0 || t.LockTimeout != 0 {
		bad(f, "role, search_path, statement_timeout and lock_timeout of a remote Pilot's target are set in that Pilot's own config, not here")
	}
	if u, err := url.Parse(p.URL); err != nil || u.Scheme != "https" || u.Host == "" || u.Port() == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		bad(f+".url", "must look like https://HOST:PORT, got %q", p.URL)
	}
	for _, file := range []struct{ field, path, what string }{
		{"ca", p.CA, "the PEM CA certificate that signed the Pilot's server certificate"},
		{"cert", p.Cert, "the PEM client certificate the control plane presents"},
		{"key", p.Key, "the PEM private key of that certificate"},
	} {
		if file.path == "" {
			bad(f+"."+file.field, "required: %s (harbormaster pilot certs writes one)", file.what)
		} else if _, err := os.Stat(path(file.path)); err != nil {
			bad(f+"."+file.field, "%v", err)
		}
	}
	if p.Timeout.D() < time.Second || p.Timeout.D() > 10*time.Minute {
		bad(f+".timeout", "must be between 1s and 10m")
	}
}

// StoreLocation is Store as store.Open takes it: a PostgreSQL URL as
// written, a SQLite path relative to the config file's directory.
func (c *Config) StoreLocation() string {
	l := strings.ToLower(c.Store)
	if strings.HasPrefix(l, "postgres://") || strings.HasPrefix(l, "postgresql://") {
		return c.Store
	}
	return c.Path(c.Store)
}

// DSN returns a target's DSN.
func (t Target) ResolveDSN(getenv func(string) string) string {
	if t.DSN != "" {
		return t.DSN
	}
	return getenv(t.DSNEnv)
}

// LoadControlPlaneKey reads a PEM PKCS#8 Ed25519 private key.
func LoadControlPlaneKey(path string) (ed25519.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("%s: not a PEM PRIVATE KEY", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	ek, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: not an Ed25519 key", path)
	}
	return ek, nil
}

// NewControlPlaneKey makes a PEM PKCS#8 Ed25519 key.
func NewControlPlaneKey() ([]byte, ed25519.PrivateKey, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), priv, nil
}

// NewAgentToken makes a random bearer token and its hash.
func NewAgentToken() (token, sha string) {
	var b [24]byte
	_, _ = rand.Read(b[:])
	token = "hm_" + hex.EncodeToString(b[:])
	return token, HashToken(token)
}

// HashToken is the lowercase hex SHA-256 of a token.
func HashToken(token string) string {
	sum := sha256Sum([]byte(strings.TrimSpace(token)))
	return hex.EncodeToString(sum[:])
}

func sha256Sum(b []byte) [32]byte { return sha256.Sum256(b) }

func (c *Config) validateSurveyor(bad func(field, format string, args ...any)) {
	if b := c.Surveyor.ShapeDissentBand; len(b) != 0 && (len(b) != 2 || b[0] < 0 || b[1] > 1 || b[0] > b[1]) {
		bad("surveyor.shape_dissent_band", "must be [low, high] with 0 <= low <= high <= 1")
	}
	if c.Surveyor.Jurors != 0 && c.Surveyor.Jurors < 3 {
		bad("surveyor.jurors", "must be at least 3 (the floor is enforced)")
	}
	seenProv := map[string]bool{}
	endpoints := map[string]string{}
	for i, p := range c.Surveyor.Providers {
		f := fmt.Sprintf("surveyor.providers[%d]", i)
		if p.Name == "" || seenProv[p.Name] {
			bad(f+".name", "required and unique")
		}
		seenProv[p.Name] = true
		// Diversity is counted by provider: one endpoint and model under
		// two names would make a correlated panel look diverse.
		base := p.BaseURL
		if base == "" {
			base = map[string]string{"openai": llm.DefaultOpenAIBaseURL, "anthropic": llm.DefaultAnthropicBaseURL}[p.Kind]
		}
		key := p.Kind + " " + strings.TrimRight(strings.ToLower(base), "/") + " " + p.Model
		if other, dup := endpoints[key]; dup {
			bad(f, "the same endpoint and model as provider %q: one provider under two names would count twice towards the panel's diversity", other)
		}
		endpoints[key] = p.Name
		validateProvider(f, p, bad)
	}
}

var leadsmanRE = regexp.MustCompile(`^leadsman:[a-z0-9_-]{1,64}$`)

func (c *Config) validateLeadsman(bad func(field, format string, args ...any)) {
	l := c.Leadsman
	if l.Identity != "" && !leadsmanRE.MatchString(l.Identity) {
		bad("leadsman.identity", "must look like leadsman:default, got %q", l.Identity)
	}
	if l.ShareRows {
		bad("leadsman.share_rows", "is gone: a referred statement is no longer run before a human asks, so the Leadsman has no rows to share; remove the line")
	}
	if l.RehearsalWait.D() != 0 {
		bad("leadsman.rehearsal_wait", "is gone: notes no longer wait for a rehearsal; remove the line")
	}
	if l.Poll.D() < 0 || l.Poll.D() > time.Minute {
		bad("leadsman.poll", "must be between 0 (default 1s) and 1m")
	}
	if l.Provider != nil {
		if l.Provider.Name == "" {
			bad("leadsman.provider.name", "required")
		}
		validateProvider("leadsman.provider", *l.Provider, bad)
	}
}

func validateProvider(f string, p Provider, bad func(field, format string, args ...any)) {
	if p.Kind != "openai" && p.Kind != "anthropic" {
		bad(f+".kind", "must be openai or anthropic, got %q", p.Kind)
	}
	if p.Model == "" {
		bad(f+".model", "required")
	}
	if p.BaseURL != "" && !strings.HasPrefix(p.BaseURL, "http://") && !strings.HasPrefix(p.BaseURL, "https://") {
		bad(f+".base_url", "must be an http(s) URL, got %q", p.BaseURL)
	}
	if p.Proxy != "" && !strings.HasPrefix(p.Proxy, "http://") && !strings.HasPrefix(p.Proxy, "https://") {
		bad(f+".proxy", "must be an http(s) URL, got %q", p.Proxy)
	}
	if p.Timeout.D() < 0 || p.Timeout.D() > 10*time.Minute {
		bad(f+".timeout", "must be between 0 (default 20s) and 10m")
	}
}

// ReadFileLimited reads a file of at most limit bytes.
func ReadFileLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > limit {
		return nil, fmt.Errorf("%s: %d bytes is over the %d byte limit", path, st.Size(), limit)
	}
	buf := make([]byte, st.Size())
	if _, err := f.Read(buf); err != nil && st.Size() > 0 {
		return nil, err
	}
	return buf, nil
}
