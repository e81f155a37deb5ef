package signing

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/hiddeco/sshsig"
	"golang.org/x/crypto/ssh"
)

// PrivateKey is a human's signing key, parsed once.
type PrivateKey struct {
	signer ssh.Signer
}

// ParsePrivateKey parses an unencrypted private key, normally an OpenSSH one
// ("-----BEGIN OPENSSH PRIVATE KEY-----", as ssh-keygen writes); PKCS#1,
// PKCS#8 and SEC 1 PEM keys are accepted too. The key type must be one that
// Verify accepts. A passphrase-protected key gives ErrEncryptedKey.
func ParsePrivateKey(pemBytes []byte) (*PrivateKey, error) {
	if len(pemBytes) > MaxPrivateKeySize {
		return nil, fmt.Errorf("signing: parse private key: %w: %d bytes, limit %d", ErrTooLarge, len(pemBytes), MaxPrivateKeySize)
	}
	s, err := ssh.ParsePrivateKey(pemBytes)
	if err != nil {
		if _, ok := errors.AsType[*ssh.PassphraseMissingError](err); ok {
			return nil, fmt.Errorf("signing: parse private key: %w", ErrEncryptedKey)
		}
		return nil, fmt.Errorf("signing: parse private key: %w", err)
	}
	if err := checkKey(s.PublicKey()); err != nil {
		return nil, fmt.Errorf("signing: parse private key: %w", err)
	}
	return &PrivateKey{signer: s}, nil
}

// LoadPrivateKey reads and parses a private key file (see ParsePrivateKey).
func LoadPrivateKey(path string) (*PrivateKey, error) {
	data, err := readLimited(path, MaxPrivateKeySize)
	if err != nil {
		return nil, fmt.Errorf("signing: load private key: %w", err)
	}
	k, err := ParsePrivateKey(data)
	if err != nil {
		return nil, fmt.Errorf("%w (%s)", err, path)
	}
	return k, nil
}

// PublicKey returns the key's public half.
func (k *PrivateKey) PublicKey() ssh.PublicKey { return k.signer.PublicKey() }

// Fingerprint returns the public key's SHA256 fingerprint.
func (k *PrivateKey) Fingerprint() string { return Fingerprint(k.signer.PublicKey()) }

// Sign signs msg in namespace and returns the armored signature, byte for
// byte what ssh-keygen -Y sign -n namespace writes for the same key and
// message (SHA-512 message hash; rsa-sha2-512 for RSA keys).
func (k *PrivateKey) Sign(namespace string, msg []byte) ([]byte, error) {
	if err := checkNamespace(namespace); err != nil {
		return nil, fmt.Errorf("signing: sign: %w", err)
	}
	sig, err := sshsig.Sign(bytes.NewReader(msg), k.signer, sshsig.HashSHA512, namespace)
	if err != nil {
		return nil, fmt.Errorf("signing: sign: %w", err)
	}
	return armor(sig.Marshal()), nil
}

// Sign signs msg in namespace with an unencrypted private key (see
// ParsePrivateKey) and returns the armored signature
// (-----BEGIN SSH SIGNATURE-----).
func Sign(privateKeyPEM []byte, namespace string, msg []byte) ([]byte, error) {
	k, err := ParsePrivateKey(privateKeyPEM)
	if err != nil {
		return nil, err
	}
	return k.Sign(namespace, msg)
}

// GenerateEd25519 makes a new Ed25519 key pair: the private key as an
// unencrypted OpenSSH PEM file, as ssh-keygen -t ed25519 writes with no
// passphrase, and the public key as one authorized_keys line
// ("ssh-ed25519 AAAA... comment\n", as in a .pub file). The comment may be
// empty and must hold no control characters.
func GenerateEd25519(comment string) (privPEM []byte, pubLine []byte, err error) {
	if err := checkComment(comment); err != nil {
		return nil, nil, fmt.Errorf("signing: generate: %w", err)
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("signing: generate: %w", err)
	}
	block, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		return nil, nil, fmt.Errorf("signing: generate: %w", err)
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return nil, nil, fmt.Errorf("signing: generate: %w", err)
	}
	line := bytes.TrimSuffix(ssh.MarshalAuthorizedKey(sshPub), []byte("\n"))
	if comment != "" {
		line = append(append(line, ' '), comment...)
	}
	return pem.EncodeToMemory(block), append(line, '\n'), nil
}

// checkComment refuses comments that could break a line-oriented file.
func checkComment(c string) error {
	for _, r := range c {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("comment %s contains a control character", clip(c))
		}
	}
	return nil
}

// readLimited reads a whole file, refusing one over limit bytes.
func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: %w: over %d bytes", path, ErrTooLarge, limit)
	}
	return data, nil
}
