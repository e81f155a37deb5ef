package marque

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"
	"io"
	"sync"
	"time"
)

// DefaultTTL is the lifetime of a marque when MinterConfig.TTL is zero.
const DefaultTTL = 30 * time.Second

// MinterConfig configures a Minter.
type MinterConfig struct {
	// Issuer is the control plane's name, written as the "iss" claim.
	// Required.
	Issuer string
	// Key is the control plane's Ed25519 signing key. Required.
	Key ed25519.PrivateKey
	// KeyID names Key. It is signed into every marque, not written into it,
	// and must equal the verifiers' KeyID; at most 65535 bytes. Defaults to
	// DefaultKeyID of Key's public key.
	KeyID string
	// TTL is exp-iat, rounded down to whole seconds; at least 1s. It must not
	// exceed the verifiers' MaxTTL or they refuse every marque. Defaults to 30
	// seconds (DefaultTTL).
	TTL time.Duration
	// Clock gives the current time. Required.
	Clock func() time.Time
	// Rand is the source of marque ids. Defaults to crypto/rand.Reader.
	Rand io.Reader
}

// WithDefaults returns a copy of the config with defaults filled in.
func (c MinterConfig) WithDefaults() MinterConfig {
	if c.KeyID == "" && len(c.Key) == ed25519.PrivateKeySize {
		c.KeyID = DefaultKeyID(c.Key.Public().(ed25519.PublicKey))
	}
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.Rand == nil {
		c.Rand = rand.Reader
	}
	return c
}

func (c MinterConfig) validate() error {
	if c.Issuer == "" {
		return errors.New("Issuer is required")
	}
	if err := checkPrivateKey(c.Key); err != nil {
		return fmt.Errorf("Key: %w", err)
	}
	if err := checkKeyID(c.KeyID); err != nil {
		return err
	}
	if c.TTL < time.Second {
		return fmt.Errorf("TTL %s is under one second", c.TTL)
	}
	if c.Clock == nil {
		return errors.New("Clock is required")
	}
	if c.Rand == nil {
		return errors.New("Rand is required")
	}
	return nil
}

func checkPrivateKey(k ed25519.PrivateKey) error {
	if len(k) != ed25519.PrivateKeySize {
		return fmt.Errorf("is %d bytes, want %d", len(k), ed25519.PrivateKeySize)
	}
	// A private key whose public half does not match its seed signs tokens no
	// verifier accepts; catch that at startup, not per request.
	derived := ed25519.NewKeyFromSeed(k.Seed())
	if !derived.Public().(ed25519.PublicKey).Equal(k.Public()) {
		return errors.New("public half does not match the seed")
	}
	return nil
}

// Minter mints marques. It is safe for concurrent use.
type Minter struct {
	issuer string
	ttl    time.Duration
	clock  func() time.Time
	key    ed25519.PrivateKey
	prefix []byte // signingPrefix(KeyID)

	randMu sync.Mutex // Rand need not be safe for concurrent use
	rand   io.Reader
}

// NewMinter returns a Minter for the config, after filling defaults and
// validating it.
func NewMinter(cfg MinterConfig) (*Minter, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("marque: new minter: %w", err)
	}
	return &Minter{
		issuer: cfg.Issuer,
		ttl:    cfg.TTL.Truncate(time.Second),
		clock:  cfg.Clock,
		key:    append(ed25519.PrivateKey(nil), cfg.Key...),
		prefix: signingPrefix(cfg.KeyID),
		rand:   cfg.Rand,
	}, nil
}

// idEncoding is base32 over the 32 characters of [a-z2-7] in ASCII order,
// so an id's text sorts as its bytes do: by time (newID).
var idEncoding = base32.NewEncoding("234567abcdefghijklmnopqrstuvwxyz").WithPadding(base32.NoPadding)

// NewID reserves a fresh marque id, for a caller that records the id
// (in the decision entry) before it mints the marque with MintID.
func (m *Minter) NewID() (string, error) { return m.NewIDAt(m.clock()) }

// NewIDAt is NewID with at, not the minter's clock, as the id's time: the
// gateway gives the time the agent sent the statement, so an id the agent
// may read tells it nothing it did not know (not when its statement was
// authorized, which would split the path's time before and after).
func (m *Minter) NewIDAt(at time.Time) (string, error) {
	id, err := m.newIDAt(at)
	if err != nil {
		return "", fmt.Errorf("marque: id: %w", err)
	}
	return id, nil
}

// Mint signs a marque for the claims. It fills ID, Issuer, IssuedAt, NotBefore
// (= IssuedAt) and Expiry (= IssuedAt + TTL), replacing whatever the caller put
// there, validates the result, and returns the token with the claims exactly
// as signed. Claims that Verify would refuse on their face (missing request id,
// empty auth signature, unknown path, ...) are refused with ErrClaims.
func (m *Minter) Mint(c Claims) (string, Claims, error) {
	id, err := m.newID()
	if err != nil {
		return "", Claims{}, fmt.Errorf("marque: mint: id: %w", err)
	}
	return m.MintID(id, c)
}

// Grant fills and validates the claims exactly as MintID does, without
// signing them: the authorization a gateway hands, as a value, to a Pilot
// running in its own process (the Pilot's Authority). A signature would be the
// process vouching for itself; a Pilot in another process gets a token.
func (m *Minter) Grant(id string, c Claims) (Grant, error) {
	c, err := m.fill(id, c)
	if err != nil {
		return Grant{}, fmt.Errorf("marque: grant: %w", err)
	}
	return Grant{c: c, ok: true}, nil
}

// Grant is an authorization Minter.Grant made: the claims a marque would
// carry, unsigned. Only this package makes one, and it is never encoded
// (its fields are unexported), so it cannot come off a network; the Pilot
// checks it with Verifier.VerifyGrant exactly as it checks a token's
// claims once the signature holds.
type Grant struct {
	c  Claims
	ok bool
}

// Claims are the grant's claims.
func (g Grant) Claims() Claims { return g.c }

// fill sets the claims' id, issuer and lifetime from now, and validates
// them: what a marque and a grant both carry.
func (m *Minter) fill(id string, c Claims) (Claims, error) {
	if id == "" {
		return Claims{}, fmt.Errorf("%w: empty id", ErrClaims)
	}
	now := m.clock()
	c.ID = id
	c.Issuer = m.issuer
	c.IssuedAt = time.Unix(now.Unix(), 0).UTC()
	c.NotBefore = c.IssuedAt
	c.Expiry = c.IssuedAt.Add(m.ttl)
	if err := c.validate(); err != nil {
		return Claims{}, err
	}
	return c, nil
}

// MintID is Mint with an id reserved by NewID. Each id is minted once: the
// receipt's primary key in the target executes at most one marque per id.
func (m *Minter) MintID(id string, c Claims) (string, Claims, error) {
	c, err := m.fill(id, c)
	if err != nil {
		return "", Claims{}, fmt.Errorf("marque: mint: %w", err)
	}
	size := payloadSize(&c)
	n := len(Prefix) + strictB64.EncodedLen(size) + 1 + sigChars
	if n > MaxTokenSize {
		return "", Claims{}, fmt.Errorf("marque: mint: %w: token would be %d bytes, over MaxTokenSize %d",
			ErrClaims, n, MaxTokenSize)
	}
	msg := make([]byte, 0, len(m.prefix)+size)
	msg = append(msg, m.prefix...)
	msg = appendPayload(msg, &c)
	sig := voi.Sign(voi.PrivateKey(m.key), msg)
	token := make([]byte, 0, n)
	token = append(token, Prefix...)
	token = strictB64.AppendEncode(token, msg[len(m.prefix):])
	token = append(token, '.')
	token = strictB64.AppendEncode(token, sig)
	return string(token), c, nil
}

// newID is a marque id: the minter's clock in Unix milliseconds (6 bytes,
// big-endian) and 10 bytes from Rand, in unpadded base32. Ids minted later
// sort later, so the receipts the target keys by them (and the store's
// rows) are appended to the end of their index rather than scattered over
// it (issue 25); 80 random bits keep two ids of one millisecond apart.
func (m *Minter) newID() (string, error) { return m.newIDAt(m.clock()) }

// newIDAt is newID at the time at.
func (m *Minter) newIDAt(at time.Time) (string, error) {
	var b [16]byte
	ms := max(at.UnixMilli(), 0)
	for i := 5; i >= 0; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
	m.randMu.Lock()
	_, err := io.ReadFull(m.rand, b[6:])
	m.randMu.Unlock()
	if err != nil {
		return "", err
	}
	return idEncoding.EncodeToString(b[:]), nil
}

func checkKeyID(kid string) error {
	if kid == "" {
		return errors.New("KeyID is required")
	}
	if len(kid) > maxString {
		return fmt.Errorf("KeyID is %d bytes, over %d", len(kid), maxString)
	}
	return nil
}
