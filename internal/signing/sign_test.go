package signing

import (
	"bytes"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

func TestSignVerifyRoundTrip(t *testing.T) {
	t.Parallel()
	keys := []struct {
		name string
		key  testKey
	}{
		{"ed25519", newEd25519(t, "alice")},
		{"ecdsa-p256", newECDSA(t, elliptic.P256())},
		{"ecdsa-p384", newECDSA(t, elliptic.P384())},
		{"ecdsa-p521", newECDSA(t, elliptic.P521())},
		{"rsa-2048", newRSA(t, 2048)},
	}
	namespaces := []string{NamespaceDelegation, NamespaceApproval, NamespaceRevocation, NamespaceDenial}
	msg := []byte(`{"target":"shop","sentence":"unstick orders"}`)
	for _, tc := range keys {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := signers(t, line(t, tc.key, "", "alice@shop"))
			k, err := ParsePrivateKey(tc.key.priv)
			if err != nil {
				t.Fatal(err)
			}
			for _, ns := range namespaces {
				sig := sign(t, tc.key, ns, msg)
				if !bytes.HasPrefix(sig, []byte("-----BEGIN SSH SIGNATURE-----\n")) {
					t.Fatalf("signature not armored: %q", sig)
				}
				got, err := a.Verify(msg, sig, ns, "shop", testNow)
				if err != nil {
					t.Fatalf("Verify(%s): %v", ns, err)
				}
				want := Signer{Name: "alice", Principal: "alice@shop", Fingerprint: k.Fingerprint(), Line: 1}
				if got != want {
					t.Fatalf("Verify(%s) = %+v, want %+v", ns, got, want)
				}
				info, err := ParseSignature(sig)
				if err != nil {
					t.Fatal(err)
				}
				if info.Namespace != ns || info.HashAlgorithm != "sha512" || info.Fingerprint != k.Fingerprint() {
					t.Fatalf("ParseSignature = %+v", info)
				}
			}
		})
	}
}

func TestSignRefusesForeignNamespace(t *testing.T) {
	t.Parallel()
	k := newEd25519(t, "")
	for _, ns := range []string{"", "git", "file", "harbormaster-", "harbormaster-Delegation", "harbormaster-a b", "xharbormaster-delegation"} {
		if _, err := Sign(k.priv, ns, []byte("m")); err == nil {
			t.Errorf("Sign in namespace %q succeeded", ns)
		}
	}
	if _, err := Sign(k.priv, "harbormaster-switch", []byte("m")); err != nil {
		t.Errorf("Sign in a new harbormaster namespace: %v", err)
	}
}

func TestSignIsDeterministicForEd25519(t *testing.T) {
	t.Parallel()
	k := newEd25519(t, "")
	a := sign(t, k, NamespaceDelegation, []byte("m"))
	b := sign(t, k, NamespaceDelegation, []byte("m"))
	if !bytes.Equal(a, b) {
		t.Fatal("two Ed25519 signatures of the same message differ")
	}
}

func TestGenerateEd25519(t *testing.T) {
	t.Parallel()
	priv, pub, err := GenerateEd25519("alice@laptop")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := pem.Decode(priv); b == nil || b.Type != "OPENSSH PRIVATE KEY" {
		t.Fatalf("private key is not an OpenSSH PEM block: %q", priv)
	}
	k, err := ParsePrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(string(pub), " alice@laptop\n") || strings.Count(string(pub), "\n") != 1 {
		t.Fatalf("public line = %q", pub)
	}
	parsed, comment, _, _, err := ssh.ParseAuthorizedKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	if comment != "alice@laptop" || parsed.Type() != ssh.KeyAlgoED25519 || !bytes.Equal(parsed.Marshal(), k.PublicKey().Marshal()) {
		t.Fatalf("public line does not match private key: %q", pub)
	}

	_, pub2, err := GenerateEd25519("")
	if err != nil {
		t.Fatal(err)
	}
	if f := strings.Fields(string(pub2)); len(f) != 2 {
		t.Fatalf("public line without comment = %q", pub2)
	}
	if bytes.Equal(pub, pub2) {
		t.Fatal("two generated keys are equal")
	}

	for _, c := range []string{"a\nb", "a\rb", "a\x00b", "a\tb"} {
		if _, _, err := GenerateEd25519(c); err == nil {
			t.Errorf("GenerateEd25519(%q) accepted a control character", c)
		}
	}
}

func TestParsePrivateKeyRefusals(t *testing.T) {
	t.Parallel()
	_, edPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := ssh.MarshalPrivateKeyWithPassphrase(edPriv, "", []byte("hunter2"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		pem  []byte
		want error
	}{
		{"encrypted", pem.EncodeToMemory(enc), ErrEncryptedKey},
		{"rsa-1024", newRSA(t, 1024).priv, ErrUnsupportedKey},
		{"too large", bytes.Repeat([]byte("a"), MaxPrivateKeySize+1), ErrTooLarge},
		{"garbage", []byte("not a key"), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParsePrivateKey(tc.pem)
			if err == nil {
				t.Fatal("accepted")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if _, err := Sign(tc.pem, NamespaceDelegation, []byte("m")); err == nil {
				t.Fatal("Sign accepted the key")
			}
		})
	}
}

func TestLoadPrivateKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	k := newEd25519(t, "")
	path := filepath.Join(dir, "id_ed25519")
	if err := os.WriteFile(path, k.priv, 0o600); err != nil {
		t.Fatal(err)
	}
	pk, err := LoadPrivateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := pk.Sign(NamespaceApproval, []byte("m"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := signers(t, line(t, k, "", "alice@shop")).Verify([]byte("m"), sig, NamespaceApproval, "shop", testNow); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadPrivateKey(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: err = %v", err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, bytes.Repeat([]byte("a"), MaxPrivateKeySize+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadPrivateKey(big); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized file: err = %v", err)
	}
}
