package signing

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// A human authenticates an API request by signing it with their SSH key:
// no passwords or tokens for humans, and the same allowed-signers file that
// says who may sign delegations says who may read the queue or flip a
// switch (by namespace). The header is
//
//	Authorization: Harbormaster-SSH t=<unix seconds>,sig=<base64 of the armored signature>
//
// over RequestMessage. A signature is good for MaxRequestSkew either side of
// its time; within that window it can be replayed for the same method, path
// and body only.

// RequestScheme is the Authorization scheme of a signed request.
const RequestScheme = "Harbormaster-SSH"

// MaxRequestSkew bounds how far a signed request's time may be from now.
const MaxRequestSkew = 60 * time.Second

// ErrRequestAuth is wrapped by every error of VerifyRequest.
var ErrRequestAuth = errors.New("signed request refused")

// RequestMessage is the exact text a signed request covers.
func RequestMessage(method, pathAndQuery string, unix int64, body []byte) []byte {
	sum := sha256.Sum256(body)
	return []byte(fmt.Sprintf("harbormaster-request v1\n%s %s\n%d\n%s\n", strings.ToUpper(method), pathAndQuery, unix, hex.EncodeToString(sum[:])))
}

// SignRequest returns the Authorization header value for a request.
func (k *PrivateKey) SignRequest(namespace, method, pathAndQuery string, now time.Time, body []byte) (string, error) {
	t := now.Unix()
	sig, err := k.Sign(namespace, RequestMessage(method, pathAndQuery, t, body))
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s t=%d,sig=%s", RequestScheme, t, base64.StdEncoding.EncodeToString(sig)), nil
}

// ParsedRequestAuth is a parsed Authorization header.
type ParsedRequestAuth struct {
	Unix      int64
	Signature []byte
}

// ParseRequestAuth reads an Authorization header of the signed scheme.
func ParseRequestAuth(header string) (ParsedRequestAuth, error) {
	rest, ok := strings.CutPrefix(header, RequestScheme+" ")
	if !ok || len(header) > 2*MaxSignatureSize {
		return ParsedRequestAuth{}, fmt.Errorf("%w: not a %s header", ErrRequestAuth, RequestScheme)
	}
	var p ParsedRequestAuth
	for _, part := range strings.Split(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return ParsedRequestAuth{}, fmt.Errorf("%w: bad time", ErrRequestAuth)
			}
			p.Unix = n
		case "sig":
			b, err := base64.StdEncoding.DecodeString(v)
			if err != nil {
				return ParsedRequestAuth{}, fmt.Errorf("%w: bad signature encoding", ErrRequestAuth)
			}
			p.Signature = b
		}
	}
	if p.Unix == 0 || len(p.Signature) == 0 {
		return ParsedRequestAuth{}, fmt.Errorf("%w: t and sig are required", ErrRequestAuth)
	}
	return p, nil
}

// VerifyRequest checks a signed request for target in namespace at now.
func (a *AllowedSigners) VerifyRequest(p ParsedRequestAuth, namespace, method, pathAndQuery string, body []byte, target string, now time.Time) (Signer, error) {
	skew := now.Sub(time.Unix(p.Unix, 0))
	if skew > MaxRequestSkew || skew < -MaxRequestSkew {
		return Signer{}, fmt.Errorf("%w: the request was signed at %s, more than %s from now", ErrRequestAuth, time.Unix(p.Unix, 0).UTC().Format(time.RFC3339), MaxRequestSkew)
	}
	s, err := a.Verify(RequestMessage(method, pathAndQuery, p.Unix, body), p.Signature, namespace, target, now)
	if err != nil {
		return Signer{}, fmt.Errorf("%w: %w", ErrRequestAuth, err)
	}
	return s, nil
}
