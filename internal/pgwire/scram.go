package pgwire

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// SCRAM-SHA-256 (RFC 5802, RFC 7677) as PostgreSQL speaks it: the server
// holds a verifier (StoredKey, ServerKey), never the token, exactly as
// PostgreSQL holds one for a password. The user name inside the SCRAM
// messages is ignored, as PostgreSQL ignores it: the startup message's
// user is the principal.

// scramIterations is the PBKDF2 cost of a verifier. Tokens are 192 random
// bits, so the cost guards nothing a guess could reach; it is PostgreSQL's
// default so the verifiers look like its own.
const scramIterations = 4096

// Verifier is a SCRAM-SHA-256 verifier in PostgreSQL's own text form:
// SCRAM-SHA-256$ITER:SALT$STOREDKEY:SERVERKEY.
type Verifier struct {
	Iterations int
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
}

// NewVerifier derives a verifier for a token with a fresh random salt.
func NewVerifier(token string) string {
	salt := make([]byte, 16)
	_, _ = rand.Read(salt)
	return deriveVerifier(token, salt, scramIterations).String()
}

func deriveVerifier(token string, salt []byte, iter int) Verifier {
	salted, _ := pbkdf2.Key(sha256.New, token, salt, iter, 32)
	clientKey := hmacSHA256(salted, "Client Key")
	stored := sha256.Sum256(clientKey)
	return Verifier{Iterations: iter, Salt: salt, StoredKey: stored[:], ServerKey: hmacSHA256(salted, "Server Key")}
}

func (v Verifier) String() string {
	b := base64.StdEncoding
	return fmt.Sprintf("SCRAM-SHA-256$%d:%s$%s:%s", v.Iterations, b.EncodeToString(v.Salt), b.EncodeToString(v.StoredKey), b.EncodeToString(v.ServerKey))
}

// ParseVerifier reads a verifier's text form.
func ParseVerifier(s string) (Verifier, error) {
	bad := errors.New("not a SCRAM-SHA-256 verifier (SCRAM-SHA-256$ITER:SALT$STOREDKEY:SERVERKEY)")
	rest, ok := strings.CutPrefix(s, "SCRAM-SHA-256$")
	if !ok {
		return Verifier{}, bad
	}
	params, keys, ok := strings.Cut(rest, "$")
	if !ok {
		return Verifier{}, bad
	}
	iterText, saltText, ok1 := strings.Cut(params, ":")
	storedText, serverText, ok2 := strings.Cut(keys, ":")
	if !ok1 || !ok2 {
		return Verifier{}, bad
	}
	var v Verifier
	var err error
	if v.Iterations, err = strconv.Atoi(iterText); err != nil || v.Iterations < 1 || v.Iterations > 1<<20 {
		return Verifier{}, bad
	}
	b := base64.StdEncoding
	if v.Salt, err = b.DecodeString(saltText); err != nil || len(v.Salt) == 0 {
		return Verifier{}, bad
	}
	if v.StoredKey, err = b.DecodeString(storedText); err != nil || len(v.StoredKey) != 32 {
		return Verifier{}, bad
	}
	if v.ServerKey, err = b.DecodeString(serverText); err != nil || len(v.ServerKey) != 32 {
		return Verifier{}, bad
	}
	return v, nil
}

func hmacSHA256(key []byte, msg string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// scramServer is one server side of an exchange.
type scramServer struct {
	v           Verifier
	real        bool // false: a stand-in verifier for an unknown user, which never verifies
	clientFirst string
	serverFirst string
	nonce       string
}

// errSCRAM is a malformed exchange; errSCRAMProof a wrong token.
var (
	errSCRAM      = errors.New("malformed SCRAM-SHA-256 message")
	errSCRAMProof = errors.New("wrong token")
)

// first reads client-first-message and returns server-first-message.
func (s *scramServer) first(msg string) (string, error) {
	// gs2-header: "n,," (no channel binding) or "y,," (client could, we
	// offer none). "p=" asks for channel binding we did not offer.
	var bare string
	switch {
	case strings.HasPrefix(msg, "n,,"), strings.HasPrefix(msg, "y,,"):
		bare = msg[3:]
	default:
		return "", errSCRAM
	}
	var cnonce string
	for _, attr := range strings.Split(bare, ",") {
		if v, ok := strings.CutPrefix(attr, "r="); ok {
			cnonce = v
		}
		if strings.HasPrefix(attr, "m=") {
			return "", errSCRAM
		}
	}
	if cnonce == "" || len(cnonce) > 256 || strings.ContainsAny(cnonce, ",") {
		return "", errSCRAM
	}
	var sn [18]byte
	_, _ = rand.Read(sn[:])
	s.clientFirst = bare
	s.nonce = cnonce + base64.StdEncoding.EncodeToString(sn[:])
	s.serverFirst = fmt.Sprintf("r=%s,s=%s,i=%d", s.nonce, base64.StdEncoding.EncodeToString(s.v.Salt), s.v.Iterations)
	return s.serverFirst, nil
}

// final reads client-final-message and returns server-final-message, or
// errSCRAMProof when the proof is wrong.
func (s *scramServer) final(msg string) (string, error) {
	i := strings.LastIndex(msg, ",p=")
	if i < 0 {
		return "", errSCRAM
	}
	withoutProof, proofText := msg[:i], msg[i+3:]
	var binding, nonce string
	for _, attr := range strings.Split(withoutProof, ",") {
		if v, ok := strings.CutPrefix(attr, "c="); ok {
			binding = v
		}
		if v, ok := strings.CutPrefix(attr, "r="); ok {
			nonce = v
		}
	}
	// biws is base64("n,,"); eSws is base64("y,,").
	if (binding != "biws" && binding != "eSws") || nonce != s.nonce {
		return "", errSCRAM
	}
	proof, err := base64.StdEncoding.DecodeString(proofText)
	if err != nil || len(proof) != 32 {
		return "", errSCRAM
	}
	authMessage := s.clientFirst + "," + s.serverFirst + "," + withoutProof
	sig := hmacSHA256(s.v.StoredKey, authMessage)
	clientKey := make([]byte, 32)
	for j := range clientKey {
		clientKey[j] = proof[j] ^ sig[j]
	}
	got := sha256.Sum256(clientKey)
	if subtle.ConstantTimeCompare(got[:], s.v.StoredKey) != 1 || !s.real {
		return "", errSCRAMProof
	}
	return "v=" + base64.StdEncoding.EncodeToString(hmacSHA256(s.v.ServerKey, authMessage)), nil
}
