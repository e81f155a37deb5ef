package signing

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// testNow is the fixed time at which tests judge validity windows.
var testNow = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

// testKey is a key pair for tests.
type testKey struct {
	priv    []byte // OpenSSH PEM
	pubLine []byte // authorized_keys line
}

// newEd25519 makes a fresh Ed25519 key with GenerateEd25519.
func newEd25519(t testing.TB, comment string) testKey {
	t.Helper()
	priv, pub, err := GenerateEd25519(comment)
	if err != nil {
		t.Fatalf("GenerateEd25519: %v", err)
	}
	return testKey{priv: priv, pubLine: pub}
}

// keyFromCrypto marshals a Go private key as an OpenSSH key pair.
func keyFromCrypto(t testing.TB, k crypto.Signer) testKey {
	t.Helper()
	block, err := ssh.MarshalPrivateKey(k, "")
	if err != nil {
		t.Fatalf("MarshalPrivateKey: %v", err)
	}
	pub, err := ssh.NewPublicKey(k.Public())
	if err != nil {
		t.Fatalf("NewPublicKey: %v", err)
	}
	return testKey{priv: pem.EncodeToMemory(block), pubLine: ssh.MarshalAuthorizedKey(pub)}
}

func newECDSA(t testing.TB, c elliptic.Curve) testKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(c, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return keyFromCrypto(t, k)
}

func newRSA(t testing.TB, bits int) testKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		t.Fatal(err)
	}
	return keyFromCrypto(t, k)
}

// line formats an allowed-signers line or fails the test.
func line(t testing.TB, k testKey, options string, principals ...string) string {
	t.Helper()
	f := strings.Fields(string(k.pubLine))
	s := strings.Join(principals, ",")
	if options != "" {
		s += " " + options
	}
	return s + " " + f[0] + " " + f[1]
}

// signers parses allowed-signers lines or fails the test.
func signers(t testing.TB, lines ...string) *AllowedSigners {
	t.Helper()
	a, err := ParseAllowedSigners([]byte(strings.Join(lines, "\n") + "\n"))
	if err != nil {
		t.Fatalf("ParseAllowedSigners: %v", err)
	}
	return a
}

// sign signs msg or fails the test.
func sign(t testing.TB, k testKey, ns string, msg []byte) []byte {
	t.Helper()
	sig, err := Sign(k.priv, ns, msg)
	if err != nil {
		t.Fatalf("Sign: %v", err)
	}
	return sig
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
