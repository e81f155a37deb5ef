package llm

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"
)

// MaxResponseBytes caps a provider's response body. A verdict answer is a few
// hundred bytes; an error page a few KiB.
const MaxResponseBytes = 1 << 20

// errResponseTooLarge is the transport failure for a body over the cap.
var errResponseTooLarge = fmt.Errorf("response body larger than %d bytes", MaxResponseBytes)

// errRedirect refuses redirects: a provider must not move a call elsewhere.
var errRedirect = errors.New("redirect not followed")

type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// newHTTPClient returns the juror's HTTP client and its transport. The
// transport's Proxy is the configured proxy or nil: never
// http.ProxyFromEnvironment.
func newHTTPClient(cfg ProviderConfig, dial dialFunc) (*http.Client, *http.Transport) {
	var proxy func(*http.Request) (*url.URL, error)
	if cfg.Proxy != "" {
		u, _ := url.Parse(cfg.Proxy) // validated
		proxy = http.ProxyURL(u)
	}
	if dial == nil {
		dial = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	tr := &http.Transport{
		Proxy:                 proxy,
		DialContext:           dial,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          16,
		MaxIdleConnsPerHost:   16, // a panel calls one provider in parallel
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12},
	}
	hc := &http.Client{
		Transport: limitedTransport{next: tr, max: MaxResponseBytes},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return errRedirect
		},
	}
	return hc, tr
}

// limitedTransport caps every response body at max bytes.
type limitedTransport struct {
	next http.RoundTripper
	max  int64
}

func (t limitedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		return resp, err
	}
	resp.Body = &limitedBody{rc: resp.Body, left: t.max}
	return resp, nil
}

type limitedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, errResponseTooLarge
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return 0, errResponseTooLarge
	}
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }
