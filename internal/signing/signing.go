package signing

import (
	"crypto/rsa"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/ssh"
)

// Namespaces separate the kinds of human act. A signature made in one
// namespace never verifies in another, so an approval cannot be replayed as a
// delegation, nor a denial as an approval.
const (
	NamespaceDelegation = "harbormaster-delegation"
	NamespaceApproval   = "harbormaster-approval"
	NamespaceRevocation = "harbormaster-revocation"
	NamespaceDenial     = "harbormaster-denial"
	// NamespaceSession signs one API request of a human (reading the queue,
	// the audit queue); NamespaceSwitch signs an operator's switch change.
	NamespaceSession = "harbormaster-session"
	NamespaceSwitch  = "harbormaster-switch"
	// NamespaceReview signs a reviewer's acts: marking a residual clause
	// auditable, and reviewing a sampled judgment. NamespaceEnable signs
	// enabling the Surveyor for a residual rule, and reinstating a
	// suspended delegation.
	NamespaceReview = "harbormaster-review"
	NamespaceEnable = "harbormaster-enable"
)

// namespacePrefix is what every Harbormaster namespace starts with. Sign and
// Verify refuse any other namespace so that this package can never be used to
// make or accept a signature meant for git, file signing or any other
// application that shares the same SSH keys.
const namespacePrefix = "harbormaster-"

// Size limits. Inputs over them are refused before any parsing.
const (
	// MaxSignatureSize is the largest armored signature accepted, in bytes.
	// An armored Ed25519 signature is about 300 bytes; a 16384-bit RSA one
	// about 5 KiB.
	MaxSignatureSize = 64 << 10
	// MaxAllowedSignersSize is the largest allowed-signers file accepted, in
	// bytes.
	MaxAllowedSignersSize = 1 << 20
	// MaxPrivateKeySize is the largest private key file accepted, in bytes.
	MaxPrivateKeySize = 64 << 10
)

// RSA key sizes accepted, in bits. OpenSSH's own ceiling is 16384.
const (
	minRSABits = 2048
	maxRSABits = 16384
)

var (
	// ErrBadSignature means the bytes are not a valid signature over the
	// message in the namespace asked for: malformed, too large, made in
	// another namespace, by an unsupported key type, or cryptographically
	// wrong.
	ErrBadSignature = errors.New("bad signature")
	// ErrUnknownSigner means the signature is valid but its key is not
	// allowed to sign in this namespace for this target at this time: the key
	// is not listed, or its lines restrict namespaces, validity or principals
	// so that none applies, or it is listed under more than one name.
	ErrUnknownSigner = errors.New("unknown signer")
	// ErrTooLarge is wrapped by errors for inputs over a size limit.
	ErrTooLarge = errors.New("input too large")
	// ErrEncryptedKey is returned for a passphrase-protected private key.
	// Decrypt a copy, or sign with ssh-keygen -Y sign, which interoperates.
	ErrEncryptedKey = errors.New("private key is passphrase-protected")
	// ErrUnsupportedKey is wrapped by errors for key types this package does
	// not accept (see checkKey).
	ErrUnsupportedKey = errors.New("unsupported key type")
)

// Signer is the verified identity behind a signature.
type Signer struct {
	// Name is the human's name: the NAME of the NAME@TARGET principal that
	// matched.
	Name string
	// Principal is the principal pattern that matched, e.g. "alice@shop-*".
	Principal string
	// Fingerprint is the key's SHA256 fingerprint, "SHA256:...", as
	// ssh-keygen -l prints it.
	Fingerprint string
	// Line is the line of the allowed-signers file that matched.
	Line int
}

// Fingerprint returns the SHA256 fingerprint of pub as ssh-keygen -l prints
// it ("SHA256:" and unpadded base64).
func Fingerprint(pub ssh.PublicKey) string {
	return ssh.FingerprintSHA256(pub)
}

// checkNamespace refuses namespaces outside Harbormaster's.
func checkNamespace(ns string) error {
	rest, ok := strings.CutPrefix(ns, namespacePrefix)
	if !ok || rest == "" {
		return fmt.Errorf("namespace %q is not a harbormaster namespace (want %s...)", ns, namespacePrefix)
	}
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return fmt.Errorf("namespace %q: only a-z, 0-9 and - may follow %q", ns, namespacePrefix)
		}
	}
	return nil
}

// checkKey accepts Ed25519, ECDSA (NIST P-256, P-384, P-521) and RSA keys of
// 2048 to 16384 bits. Certificates, security-key (sk-*) keys and DSA are
// refused.
func checkKey(pub ssh.PublicKey) error {
	switch pub.Type() {
	case ssh.KeyAlgoED25519, ssh.KeyAlgoECDSA256, ssh.KeyAlgoECDSA384, ssh.KeyAlgoECDSA521:
		return nil
	case ssh.KeyAlgoRSA:
		cpk, ok := pub.(ssh.CryptoPublicKey)
		if !ok {
			return fmt.Errorf("%w: %s", ErrUnsupportedKey, pub.Type())
		}
		rk, ok := cpk.CryptoPublicKey().(*rsa.PublicKey)
		if !ok {
			return fmt.Errorf("%w: %s", ErrUnsupportedKey, pub.Type())
		}
		if bits := rk.N.BitLen(); bits < minRSABits || bits > maxRSABits {
			return fmt.Errorf("%w: RSA key of %d bits (want %d to %d)", ErrUnsupportedKey, bits, minRSABits, maxRSABits)
		}
		return nil
	}
	if _, ok := pub.(*ssh.Certificate); ok {
		return fmt.Errorf("%w: certificates are not supported (%s)", ErrUnsupportedKey, pub.Type())
	}
	return fmt.Errorf("%w: %s (want ssh-ed25519, ecdsa-sha2-nistp256/384/521 or ssh-rsa)", ErrUnsupportedKey, pub.Type())
}

// clip shortens untrusted text quoted in error messages.
func clip(s string) string {
	const n = 48
	if len(s) > n {
		s = s[:n] + "..."
	}
	return fmt.Sprintf("%q", s)
}
