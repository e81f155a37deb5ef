package signing

import (
	"container/heap"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A human authenticates an API request by signing it with their SSH key:
// no passwords or tokens for humans, and the same allowed-signers file that
// says who may sign delegations says who may read the queue or flip a
// switch (by namespace). The header is
//
//	Authorization: Harbormaster-SSH t=<unix seconds>,sig=<base64 of the armored signature>
//
// over RequestMessage. A signature is good from MaxRequestFutureSkew before
// its time to MaxRequestAge after it, and only once: VerifyRequest remembers
// every request it accepted until its window closes and refuses it a second
// time, so a captured header cannot be replayed. The memory is the
// AllowedSigners' own, in this process: on a deployment of several nodes, a
// request accepted by one node can still be replayed once to each other
// node within its window.

// RequestScheme is the Authorization scheme of a signed request.
const RequestScheme = "Harbormaster-SSH"

// MaxRequestAge is how long after its time a signed request is accepted:
// its freshness window.
const MaxRequestAge = 60 * time.Second

// MaxRequestFutureSkew is how far ahead of now a signed request's time may
// be: the clock skew allowed between a signer's machine and the server. A
// request signed further ahead is refused, not held until it is due.
const MaxRequestFutureSkew = time.Minute

// maxRememberedRequests bounds how many accepted requests VerifyRequest
// remembers at once (each for at most MaxRequestFutureSkew+MaxRequestAge).
// When it is full, new requests are refused until old ones expire: replay
// protection is never traded for memory.
const maxRememberedRequests = 1 << 16

// ErrRequestAuth is wrapped by every error of VerifyRequest.
var ErrRequestAuth = errors.New("signed request refused")

// ErrRequestReplayed: the request (same signer, namespace, target, method,
// path, body and time) was accepted before. It wraps ErrRequestAuth.
var ErrRequestReplayed = fmt.Errorf("%w: already used", ErrRequestAuth)

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

// VerifyRequest checks a signed request for target in namespace at now, and
// accepts it once. Its time must be at most MaxRequestAge before now and
// MaxRequestFutureSkew after it. A request accepted before, and not yet out
// of its window, is refused with ErrRequestReplayed: a request is identified
// by its signer's key and the signed message (method, path and query, time,
// body), not by the signature bytes, which can be re-encoded or (ECDSA)
// re-signed. Each target is its own use, so a caller may verify one request
// for several targets to learn which the signer may act on. Refused
// requests are not remembered.
func (a *AllowedSigners) VerifyRequest(p ParsedRequestAuth, namespace, method, pathAndQuery string, body []byte, target string, now time.Time) (Signer, error) {
	signed := time.Unix(p.Unix, 0)
	switch age := now.Sub(signed); {
	case age > MaxRequestAge:
		return Signer{}, fmt.Errorf("%w: the request was signed at %s, more than %s ago", ErrRequestAuth, signed.UTC().Format(time.RFC3339), MaxRequestAge)
	case age < -MaxRequestFutureSkew:
		return Signer{}, fmt.Errorf("%w: the request is signed at %s, more than %s ahead of this server's clock", ErrRequestAuth, signed.UTC().Format(time.RFC3339), MaxRequestFutureSkew)
	}
	msg := RequestMessage(method, pathAndQuery, p.Unix, body)
	s, err := a.Verify(msg, p.Signature, namespace, target, now)
	if err != nil {
		return Signer{}, fmt.Errorf("%w: %w", ErrRequestAuth, err)
	}
	if err := a.requests.use(requestKey(namespace, target, s.Fingerprint, msg), signed.Add(MaxRequestAge), now); err != nil {
		return Signer{}, err
	}
	return s, nil
}

// RequestID identifies a signed request for a replay memory shared by
// several nodes: the signer's key and the signed message in namespace, as
// VerifyRequest's own memory does, never the signature bytes. fingerprint
// is the Signer VerifyRequest returned.
func RequestID(namespace, fingerprint, method, pathAndQuery string, unix int64, body []byte) string {
	k := requestKey(namespace, "", fingerprint, RequestMessage(method, pathAndQuery, unix, body))
	return hex.EncodeToString(k[:])
}

// requestKey identifies one use of a signed request.
func requestKey(namespace, target, fingerprint string, msg []byte) [32]byte {
	h := sha256.New()
	for _, part := range [][]byte{[]byte("harbormaster-request-use v1"), []byte(namespace), []byte(target), []byte(fingerprint), msg} {
		h.Write(binary.AppendUvarint(nil, uint64(len(part))))
		h.Write(part)
	}
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// requestMemory remembers the requests VerifyRequest accepted, each until
// the end of its window, when it would be refused as too old anyway. The
// zero value is ready; it is safe for concurrent use.
type requestMemory struct {
	mu       sync.Mutex
	max      int // 0: maxRememberedRequests
	seen     map[[32]byte]struct{}
	byExpiry expiryHeap
}

// use records key, accepted at now and good until expires, or refuses it
// if it is already recorded or the memory is full. It first forgets every
// request whose window has closed.
func (m *requestMemory) use(key [32]byte, expires, now time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for n := now.UnixNano(); len(m.byExpiry) > 0 && m.byExpiry[0].expires < n; {
		delete(m.seen, heap.Pop(&m.byExpiry).(remembered).key)
	}
	if _, ok := m.seen[key]; ok {
		return fmt.Errorf("%w: the same request, signed by the same key in the same second, was accepted before", ErrRequestReplayed)
	}
	limit := m.max
	if limit == 0 {
		limit = maxRememberedRequests
	}
	if len(m.seen) >= limit {
		return fmt.Errorf("%w: %d signed requests in the last %s, the most this server remembers; try again shortly", ErrRequestAuth, len(m.seen), MaxRequestFutureSkew+MaxRequestAge)
	}
	if m.seen == nil {
		m.seen = make(map[[32]byte]struct{})
	}
	m.seen[key] = struct{}{}
	heap.Push(&m.byExpiry, remembered{expires: expires.UnixNano(), key: key})
	return nil
}

// remembered is one accepted request, forgotten after expires (Unix ns).
type remembered struct {
	expires int64
	key     [32]byte
}

// expiryHeap is a min-heap of remembered requests by expiry.
type expiryHeap []remembered

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].expires < h[j].expires }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(remembered)) }
func (h *expiryHeap) Pop() any {
	old := *h
	r := old[len(old)-1]
	*h = old[:len(old)-1]
	return r
}
