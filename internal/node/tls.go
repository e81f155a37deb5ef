package node

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/config"
)

// certLoader serves the configured certificate and reads it again when
// either file changes, so a renewed certificate (certbot, cert-manager)
// is picked up without a restart. A renewal that does not load keeps the
// last good certificate.
type certLoader struct {
	certPath, keyPath string

	mu      sync.Mutex
	cert    *tls.Certificate
	modTime time.Time
}

func newCertLoader(c *config.Config) (*certLoader, error) {
	l := &certLoader{certPath: c.Path(c.TLS.Cert), keyPath: c.Path(c.TLS.Key)}
	if _, err := l.get(); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *certLoader) latestMod() time.Time {
	var latest time.Time
	for _, p := range []string{l.certPath, l.keyPath} {
		if st, err := os.Stat(p); err == nil && st.ModTime().After(latest) {
			latest = st.ModTime()
		}
	}
	return latest
}

func (l *certLoader) get() (*tls.Certificate, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	mod := l.latestMod()
	if l.cert != nil && !mod.After(l.modTime) {
		return l.cert, nil
	}
	c, err := tls.LoadX509KeyPair(l.certPath, l.keyPath)
	if err != nil {
		if l.cert != nil {
			return l.cert, nil
		}
		return nil, fmt.Errorf("tls: %w", err)
	}
	l.cert, l.modTime = &c, mod
	return l.cert, nil
}

// serverTLS is the API's TLS configuration, or nil without tls in the
// config.
func serverTLS(c *config.Config) (*tls.Config, error) {
	if c.TLS == nil {
		return nil, nil
	}
	l, err := newCertLoader(c)
	if err != nil {
		return nil, err
	}
	return &tls.Config{MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return l.get() }}, nil
}
