package marque

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// The hm2 wire format. doc.go specifies it for readers; this file is the one
// place that writes and reads it.

const (
	// signingContext begins every signed message. It binds a signature to
	// this format and version: no other use of the control-plane key signs a
	// message that starts with it.
	signingContext = "harbormaster-marque-v2\x00"
	// maxString is the longest string a payload can carry (a uint16 length).
	maxString = 0xFFFF
	// sigChars is the length of an Ed25519 signature in unpadded base64url.
	sigChars = 86
)

// strictB64 is unpadded base64url that refuses non-zero trailing bits, so a
// byte string has exactly one encoding. The decoder would skip CR and LF; the
// verifier refuses them (and every other byte outside the alphabet) first.
var strictB64 = base64.RawURLEncoding.Strict()

// wireStringNames names the payload's strings in wire order.
var wireStringNames = [...]string{
	"jti", "iss", "request_id", "sub", "target", "statement_sha256", "path",
	"auth.kind", "auth.delegation_id", "auth.bound_sha256", "auth.signer",
	"auth.signature", "auth.approval_sha256", "judgment_id",
}

// wireStrings returns the claims' strings in wire order, as wireStringNames
// names them: the one statement of that order for the encoder, the decoder
// and validate.
func (c *Claims) wireStrings() [len(wireStringNames)]*string {
	return [...]*string{
		&c.ID, &c.Issuer, &c.RequestID, &c.Principal, &c.Target, &c.StatementHash, &c.Path,
		&c.Auth.Kind, &c.Auth.DelegationID, &c.Auth.BoundSHA256, &c.Auth.Signer,
		&c.Auth.Signature, &c.Auth.ApprovalSHA256, &c.JudgmentID,
	}
}

// signingPrefix is what every signed message under key id kid starts with:
// the context, then the key id as a payload string. The key id is signed, not
// sent: a marque minted under another key id fails the signature.
func signingPrefix(kid string) []byte {
	b := make([]byte, 0, len(signingContext)+2+len(kid))
	b = append(b, signingContext...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(kid)))
	return append(b, kid...)
}

// payloadSize is len(appendPayload(nil, c)).
func payloadSize(c *Claims) int {
	n := 0
	for _, p := range c.wireStrings() {
		n += 2 + len(*p)
	}
	n += 1 + 1 + 3*8
	if c.RuleIndex != nil {
		n += 8
	}
	if c.MaxRows != nil {
		n += 8
	}
	return n
}

// appendPayload appends the payload encoding of c. Every string must be at
// most maxString bytes (validate checks).
func appendPayload(b []byte, c *Claims) []byte {
	for _, p := range c.wireStrings() {
		b = binary.BigEndian.AppendUint16(b, uint16(len(*p)))
		b = append(b, *p...)
	}
	if c.RuleIndex == nil {
		b = append(b, 0)
	} else {
		b = append(b, 1)
		b = binary.BigEndian.AppendUint64(b, uint64(int64(*c.RuleIndex)))
	}
	if c.MaxRows == nil {
		b = append(b, 0)
	} else {
		b = append(b, 1)
		b = binary.BigEndian.AppendUint64(b, uint64(*c.MaxRows))
	}
	for _, t := range [...]time.Time{c.IssuedAt, c.NotBefore, c.Expiry} {
		b = binary.BigEndian.AppendUint64(b, uint64(seconds(t)))
	}
	return b
}

// seconds is t as whole seconds since the Unix epoch. fromSeconds inverts it
// for every int64 (the zero time is -62135596800, which validate refuses like
// any time before 1970), so a time has one encoding.
func seconds(t time.Time) int64 { return t.Unix() }

func fromSeconds(n int64) time.Time { return time.Unix(n, 0).UTC() }

// decodePayload reads a payload written by appendPayload, and nothing else:
// a short field or an optional's flag other than 0 or 1 is ErrMalformed;
// bytes after the last field are ErrClaims. It does not validate the claims.
func decodePayload(payload []byte) (Claims, error) {
	// One copy holds every string the claims carry.
	d := decoder{s: string(payload)}
	var c Claims
	for i, p := range c.wireStrings() {
		if *p = d.str(); d.err != nil {
			return Claims{}, fmt.Errorf("%w: payload: %s: %w", ErrMalformed, wireStringNames[i], d.err)
		}
	}
	if rule, ok := d.opt(); d.err != nil {
		return Claims{}, fmt.Errorf("%w: payload: rule: %w", ErrMalformed, d.err)
	} else if ok {
		r := int(rule)
		if int64(r) != rule {
			return Claims{}, fmt.Errorf("%w: rule %d is out of range", ErrClaims, rule)
		}
		c.RuleIndex = &r
	}
	if rows, ok := d.opt(); d.err != nil {
		return Claims{}, fmt.Errorf("%w: payload: max_rows: %w", ErrMalformed, d.err)
	} else if ok {
		c.MaxRows = &rows
	}
	for i, t := range [...]*time.Time{&c.IssuedAt, &c.NotBefore, &c.Expiry} {
		if *t = fromSeconds(d.i64()); d.err != nil {
			return Claims{}, fmt.Errorf("%w: payload: %s: %w", ErrMalformed, [...]string{"iat", "nbf", "exp"}[i], d.err)
		}
	}
	if rest := len(d.s) - d.off; rest > 0 {
		return Claims{}, fmt.Errorf("%w: %d bytes after the last claim (an unknown claim?)", ErrClaims, rest)
	}
	return c, nil
}

var errShort = errors.New("payload ends inside the field")

// decoder reads a payload front to back; the first error sticks.
type decoder struct {
	s   string
	off int
	err error
}

func (d *decoder) take(n int) string {
	if d.err != nil {
		return ""
	}
	if n > len(d.s)-d.off {
		d.err = errShort
		return ""
	}
	s := d.s[d.off : d.off+n]
	d.off += n
	return s
}

func (d *decoder) str() string {
	b := d.take(2)
	if d.err != nil {
		return ""
	}
	return d.take(int(b[0])<<8 | int(b[1]))
}

func (d *decoder) i64() int64 {
	b := d.take(8)
	if d.err != nil {
		return 0
	}
	var n uint64
	for i := 0; i < 8; i++ {
		n = n<<8 | uint64(b[i])
	}
	return int64(n)
}

// opt reads an optional integer: 0x00, or 0x01 and the integer.
func (d *decoder) opt() (int64, bool) {
	flag := d.take(1)
	if d.err != nil {
		return 0, false
	}
	switch flag[0] {
	case 0:
		return 0, false
	case 1:
		n := d.i64()
		return n, d.err == nil
	default:
		d.err = fmt.Errorf("presence flag %#02x is neither 0x00 nor 0x01", flag[0])
		return 0, false
	}
}
