package config

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// PilotConfig is the configuration of `harbormaster pilot`: Pilots for one
// or more targets in a process of their own, serving the control plane
// over mutual TLS. Every field is documented in docs/operations.md ("A
// Pilot in its own process").
type PilotConfig struct {
	// Listen is the TLS address. Defaults to 127.0.0.1:7443.
	Listen string `yaml:"listen"`
	// TLS holds the server's certificate and the client CA.
	TLS PilotTLS `yaml:"tls"`
	// ControlPlane is whose marques this Pilot accepts.
	ControlPlane PilotControlPlane `yaml:"control_plane"`
	// Signers is the OpenSSH allowed-signers file of the humans whose
	// signatures the Pilot verifies itself. Required.
	Signers string `yaml:"signers"`
	// CallTimeout bounds one call. Defaults to the longest
	// statement_timeout plus lock_timeout of the targets, plus 30s.
	CallTimeout Duration `yaml:"call_timeout"`
	// Targets are the databases this process holds the credentials of
	// (dsn or dsn_env only). At least one.
	Targets []Target `yaml:"targets"`

	dir string
}

// PilotTLS are the Pilot server's TLS files (PEM).
type PilotTLS struct {
	// Cert and Key are the server certificate and its key. Required.
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
	// ClientCA is the CA whose client certificates are accepted: the
	// control plane's. Required.
	ClientCA string `yaml:"client_ca"`
}

// PilotControlPlane is the control plane whose marques a Pilot accepts.
type PilotControlPlane struct {
	// Name is the control plane's name (its serve config's name), the
	// marque issuer. Defaults to "harbormaster".
	Name string `yaml:"name"`
	// PublicKey is the PEM (PKIX) Ed25519 public key of the control
	// plane's key: the Pilot verifies every marque with it. Required; a
	// private key is refused (the Pilot must not be able to mint).
	PublicKey string `yaml:"public_key"`
}

// LoadPilot reads a pilot config file.
func LoadPilot(path string) (*PilotConfig, error) {
	var c PilotConfig
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

// WithDefaults fills unset fields.
func (c PilotConfig) WithDefaults() PilotConfig {
	if c.Listen == "" {
		c.Listen = "127.0.0.1:7443"
	}
	if c.ControlPlane.Name == "" {
		c.ControlPlane.Name = "harbormaster"
	}
	longest := time.Duration(0)
	for i := range c.Targets {
		if c.Targets[i].Pilot == nil {
			c.Targets[i] = c.Targets[i].withDefaults()
		}
		longest = max(longest, c.Targets[i].StatementTimeout.D()+c.Targets[i].LockTimeout.D())
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = Duration(longest + 30*time.Second)
	}
	return c
}

// Validate checks every field and returns all problems, each naming its field.
func (c *PilotConfig) Validate(getenv func(string) string) error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	for _, file := range []struct{ field, path, what string }{
		{"tls.cert", c.TLS.Cert, "the Pilot's PEM server certificate (harbormaster pilot certs writes one)"},
		{"tls.key", c.TLS.Key, "the PEM private key of that certificate"},
		{"tls.client_ca", c.TLS.ClientCA, "the PEM CA certificate whose client certificates are accepted: the control plane's"},
		{"signers", c.Signers, "an OpenSSH allowed-signers file"},
	} {
		if file.path == "" {
			bad(file.field, "required: %s", file.what)
		} else if _, err := os.Stat(c.Path(file.path)); err != nil {
			bad(file.field, "%v", err)
		}
	}
	if c.ControlPlane.PublicKey == "" {
		bad("control_plane.public_key", "required: the control plane's PEM Ed25519 public key (harbormaster keygen --control-plane writes FILE.pub)")
	} else if _, err := LoadControlPlanePublicKey(c.Path(c.ControlPlane.PublicKey)); err != nil {
		bad("control_plane.public_key", "%v", err)
	}
	if len(c.Targets) == 0 {
		bad("targets", "at least one target is required")
	}
	validateTargets(c.Targets, getenv, c.Path, false, bad)
	longest := time.Duration(0)
	for _, t := range c.Targets {
		longest = max(longest, t.StatementTimeout.D()+t.LockTimeout.D())
	}
	if c.CallTimeout.D() <= longest || c.CallTimeout.D() > time.Hour {
		bad("call_timeout", "must exceed the longest statement_timeout plus lock_timeout (%s), and be at most 1h", longest)
	}
	return errors.Join(errs...)
}

// Path resolves p relative to the config file's directory.
func (c *PilotConfig) Path(p string) string { return resolve(c.dir, p) }

// LoadControlPlanePublicKey reads a PEM (PKIX) Ed25519 public key. A
// private key is refused: whoever holds it can mint marques.
func LoadControlPlanePublicKey(path string) (ed25519.PublicKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	switch {
	case block != nil && block.Type == "PRIVATE KEY":
		return nil, fmt.Errorf("%s is a private key: the Pilot needs only the public key, and must not be able to mint marques (harbormaster pilot certs --control-plane-key %s writes it)", path, path)
	case block == nil || block.Type != "PUBLIC KEY":
		return nil, fmt.Errorf("%s: not a PEM PUBLIC KEY", path)
	}
	k, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	ek, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("%s: not an Ed25519 key", path)
	}
	return ek, nil
}

// ControlPlanePublicKeyPEM is the PEM (PKIX) form of a control-plane
// public key, as LoadControlPlanePublicKey reads it.
func ControlPlanePublicKeyPEM(pub ed25519.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}
