package signing

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/hiddeco/sshsig"
	"golang.org/x/crypto/ssh"
)

const (
	armorBegin = "-----BEGIN SSH SIGNATURE-----"
	armorEnd   = "-----END SSH SIGNATURE-----"
	// armorWidth is the line width ssh-keygen uses, so that our armor is
	// byte-for-byte what ssh-keygen -Y sign writes.
	armorWidth = 70
)

// armor encodes a signature blob the way ssh-keygen does.
func armor(blob []byte) []byte {
	enc := base64.StdEncoding.EncodeToString(blob)
	var b bytes.Buffer
	b.Grow(len(enc) + len(enc)/armorWidth + len(armorBegin) + len(armorEnd) + 4)
	b.WriteString(armorBegin)
	b.WriteByte('\n')
	for len(enc) > armorWidth {
		b.WriteString(enc[:armorWidth])
		b.WriteByte('\n')
		enc = enc[armorWidth:]
	}
	b.WriteString(enc)
	b.WriteByte('\n')
	b.WriteString(armorEnd)
	b.WriteByte('\n')
	return b.Bytes()
}

// dearmor decodes an armored signature strictly: surrounding whitespace is
// allowed, but nothing else outside the markers, no PEM headers, and only
// canonical base64 (any line width, LF or CRLF) between them.
func dearmor(armored []byte) ([]byte, error) {
	if len(armored) > MaxSignatureSize {
		return nil, fmt.Errorf("%w: armored signature is %d bytes, limit %d", ErrTooLarge, len(armored), MaxSignatureSize)
	}
	s := bytes.TrimSpace(armored)
	body, ok := bytes.CutPrefix(s, []byte(armorBegin))
	if !ok {
		return nil, errors.New("missing " + armorBegin)
	}
	body, ok = bytes.CutSuffix(body, []byte(armorEnd))
	if !ok {
		return nil, errors.New("missing " + armorEnd)
	}
	if len(body) == 0 || (body[0] != '\n' && body[0] != '\r') {
		return nil, errors.New("no line break after " + armorBegin)
	}
	b64 := make([]byte, 0, len(body))
	for _, c := range body {
		switch {
		case c == '\n' || c == '\r':
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '+', c == '/', c == '=':
			b64 = append(b64, c)
		default:
			return nil, fmt.Errorf("unexpected byte %#x in armored signature", c)
		}
	}
	blob, err := base64.StdEncoding.Strict().DecodeString(string(b64))
	if err != nil {
		return nil, fmt.Errorf("base64: %w", err)
	}
	return blob, nil
}

// parseArmored decodes and parses an armored signature and refuses
// non-canonical encodings and unsupported keys. It does not verify.
func parseArmored(armored []byte) (*sshsig.Signature, error) {
	blob, err := dearmor(armored)
	if err != nil {
		return nil, err
	}
	sig, err := sshsig.ParseSignature(blob)
	if err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	// Trailing data inside the signature field is only meaningful for
	// security-key signatures, which are not supported; refusing it keeps
	// one encoding per signature for the key types we do accept.
	if len(sig.Signature.Rest) != 0 {
		return nil, errors.New("trailing data in signature field")
	}
	if !bytes.Equal(sig.Marshal(), blob) {
		return nil, errors.New("non-canonical signature encoding")
	}
	if err := checkKey(sig.PublicKey); err != nil {
		return nil, err
	}
	return sig, nil
}

// SignatureInfo describes an armored signature without verifying it: use it
// to say who claims to have signed, never to decide anything.
type SignatureInfo struct {
	// Namespace is the namespace the signature claims to be made in.
	Namespace string
	// HashAlgorithm is "sha256" or "sha512".
	HashAlgorithm string
	// PublicKey is the key the signature claims to be made with.
	PublicKey ssh.PublicKey
	// Fingerprint is PublicKey's SHA256 fingerprint.
	Fingerprint string
}

// ParseSignature parses an armored signature (-----BEGIN SSH SIGNATURE-----)
// without verifying it. Errors wrap ErrBadSignature.
func ParseSignature(armored []byte) (SignatureInfo, error) {
	sig, err := parseArmored(armored)
	if err != nil {
		return SignatureInfo{}, fmt.Errorf("signing: parse signature: %w: %w", ErrBadSignature, err)
	}
	return SignatureInfo{
		Namespace:     sig.Namespace,
		HashAlgorithm: sig.HashAlgorithm.String(),
		PublicKey:     sig.PublicKey,
		Fingerprint:   Fingerprint(sig.PublicKey),
	}, nil
}
