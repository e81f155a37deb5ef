package remote

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// ServerTLS is the Pilot server's TLS configuration: its certificate and
// key (PEM files), TLS 1.3 only, and a client certificate required and
// verified against clientCA (a PEM file of one or more CA certificates).
// It offers HTTP/1.1 only: one request per connection at a time and no
// stream-level retries, so a statement is never resent by the transport.
func ServerTLS(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("pilot remote: server certificate %s / key %s: %w", certFile, keyFile, err)
	}
	pool, err := loadPool(clientCAFile)
	if err != nil {
		return nil, fmt.Errorf("pilot remote: client CA: %w", err)
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		NextProtos:   []string{"http/1.1"},
	}, nil
}

// ClientTLS is the control plane's TLS configuration for one Pilot: the
// server's CA (a PEM file), the client certificate and key it presents
// (PEM files), TLS 1.3 only. serverName is the name the server's
// certificate must carry; empty means the URL's host.
func ClientTLS(caFile, certFile, keyFile, serverName string) (*tls.Config, error) {
	pool, err := loadPool(caFile)
	if err != nil {
		return nil, fmt.Errorf("pilot remote: server CA: %w", err)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("pilot remote: client certificate %s / key %s: %w", certFile, keyFile, err)
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		RootCAs:      pool,
		Certificates: []tls.Certificate{cert},
		ServerName:   serverName,
		NextProtos:   []string{"http/1.1"},
	}, nil
}

func loadPool(file string) (*x509.CertPool, error) {
	pemBytes, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		return nil, fmt.Errorf("%s: no PEM CERTIFICATE in it", file)
	}
	return pool, nil
}

// CertFiles are the files WriteCerts writes, by role.
type CertFiles struct {
	// CA is the CA certificate: the Pilot's client_ca and the control
	// plane's pilot.ca. Its private key is not kept.
	CA string
	// PilotCert and PilotKey are the Pilot server's.
	PilotCert, PilotKey string
	// ClientCert and ClientKey are the control plane's.
	ClientCert, ClientKey string
}

// Names of the files WriteCerts writes in its directory.
const (
	FileCA         = "ca.crt"
	FilePilotCert  = "pilot.crt"
	FilePilotKey   = "pilot.key"
	FileClientCert = "control-plane.crt"
	FileClientKey  = "control-plane.key"
)

// WriteCerts makes a fresh CA (ECDSA P-256), a Pilot server certificate
// for hosts (DNS names or IP addresses) and a control-plane client
// certificate, valid from now for validFor, and writes them to dir as
// PEM: certificates 0644, private keys 0600. It refuses to overwrite a
// file. The CA's private key is discarded once both are signed: to issue
// more, run it again (or use your own CA: the configs take any PEM files).
func WriteCerts(dir string, hosts []string, now time.Time, validFor time.Duration) (CertFiles, error) {
	f := CertFiles{CA: filepath.Join(dir, FileCA), PilotCert: filepath.Join(dir, FilePilotCert), PilotKey: filepath.Join(dir, FilePilotKey),
		ClientCert: filepath.Join(dir, FileClientCert), ClientKey: filepath.Join(dir, FileClientKey)}
	if len(hosts) == 0 {
		return f, errors.New("pilot remote: certs: at least one host name or address is required")
	}
	if validFor <= 0 {
		return f, errors.New("pilot remote: certs: the validity must be positive")
	}
	for _, p := range []string{f.CA, f.PilotCert, f.PilotKey, f.ClientCert, f.ClientKey} {
		if _, err := os.Stat(p); err == nil {
			return f, fmt.Errorf("pilot remote: certs: %s already exists; not overwriting", p)
		}
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return f, err
	}
	notBefore, notAfter := now.Add(-time.Minute), now.Add(validFor)
	ca := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "harbormaster pilot CA"},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return f, fmt.Errorf("pilot remote: certs: CA: %w", err)
	}
	if ca, err = x509.ParseCertificate(caDER); err != nil {
		return f, err
	}
	server := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: hosts[0]},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			server.IPAddresses = append(server.IPAddresses, ip)
		} else {
			server.DNSNames = append(server.DNSNames, h)
		}
	}
	client := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "harbormaster control plane"},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return f, fmt.Errorf("pilot remote: certs: %w", err)
	}
	if err := writePEM(f.CA, "CERTIFICATE", caDER, 0o644); err != nil {
		return f, err
	}
	for _, c := range []struct {
		tpl             *x509.Certificate
		certPath, kPath string
	}{{server, f.PilotCert, f.PilotKey}, {client, f.ClientCert, f.ClientKey}} {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return f, err
		}
		der, err := x509.CreateCertificate(rand.Reader, c.tpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return f, fmt.Errorf("pilot remote: certs: %w", err)
		}
		kder, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return f, err
		}
		if err := writePEM(c.kPath, "PRIVATE KEY", kder, 0o600); err != nil {
			return f, err
		}
		if err := writePEM(c.certPath, "CERTIFICATE", der, 0o644); err != nil {
			return f, err
		}
	}
	return f, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return n
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("pilot remote: certs: %w", err)
	}
	if err := pem.Encode(fh, &pem.Block{Type: typ, Bytes: der}); err != nil {
		fh.Close()
		return fmt.Errorf("pilot remote: certs: %s: %w", path, err)
	}
	return fh.Close()
}
