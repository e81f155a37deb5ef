package remote

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/marque"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// ClientConfig configures a Client for one target of a remote Pilot.
type ClientConfig struct {
	// Target is the target's name, as the Pilot serves it. Required.
	Target string
	// URL is the Pilot's base URL, https://HOST:PORT. Required.
	URL string
	// TLS is the client's TLS configuration (ClientTLS builds it): the
	// server's CA, the client certificate, TLS 1.3 only. Required.
	TLS *tls.Config
	// Timeout bounds one call, from the request to the end of its answer.
	// Keep it above the server's CallTimeout, so the Pilot gives up first
	// and says so. Defaults to 1 minute.
	Timeout time.Duration
	// Logger defaults to a discard logger.
	Logger *slog.Logger
}

// WithDefaults fills unset fields.
func (c ClientConfig) WithDefaults() ClientConfig {
	if c.Timeout <= 0 {
		c.Timeout = time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c ClientConfig) validate() error {
	if c.Target == "" {
		return errors.New("pilot remote: client: Target is required")
	}
	u, err := url.Parse(c.URL)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("pilot remote: client: URL must look like https://HOST:PORT, got %q", c.URL)
	}
	if c.TLS == nil || len(c.TLS.Certificates) == 0 || c.TLS.RootCAs == nil {
		return errors.New("pilot remote: client: TLS with a client certificate and the server's CA is required (ClientTLS)")
	}
	if c.TLS.MinVersion < tls.VersionTLS13 {
		return errors.New("pilot remote: client: TLS must be 1.3 only (ClientTLS)")
	}
	return nil
}

// Client is a remote Pilot for one target: a pilot.Executor whose calls
// cross to `harbormaster pilot`. It is safe for concurrent use.
type Client struct {
	cfg  ClientConfig
	base string
	http *http.Client
	tr   *http.Transport

	mu      sync.RWMutex
	catalog *sqlcheck.Catalog
	digest  string

	refreshing atomic.Bool
	bg         sync.WaitGroup
	ctx        context.Context
	stop       context.CancelFunc
}

var _ pilot.Executor = (*Client)(nil)

// Connect makes a Client and reads the target's catalog from the Pilot:
// it fails if the Pilot cannot be reached, refuses the handshake or does
// not serve the target.
func Connect(ctx context.Context, cfg ClientConfig) (*Client, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	tlsCfg := cfg.TLS.Clone()
	tlsCfg.NextProtos = []string{"http/1.1"}
	tr := &http.Transport{
		TLSClientConfig:     tlsCfg,
		TLSHandshakeTimeout: 10 * time.Second,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		// HTTP/1.1 only (no stream-level retries), no proxy from the
		// environment, no compression.
		ForceAttemptHTTP2:   false,
		TLSNextProto:        map[string]func(string, *tls.Conn) http.RoundTripper{},
		Proxy:               nil,
		DisableCompression:  true,
		MaxIdleConnsPerHost: 64,
		// Shorter than the server's idle timeout (2m), so the client
		// closes an idle connection before the server can: a request
		// written onto a connection the server is closing is one whose
		// fate is unknown.
		IdleConnTimeout:       30 * time.Second,
		ResponseHeaderTimeout: cfg.Timeout,
	}
	c := &Client{cfg: cfg, base: strings.TrimSuffix(cfg.URL, "/") + "/v1/targets/" + url.PathEscape(cfg.Target) + "/",
		tr: tr, http: &http.Client{Transport: tr, Timeout: cfg.Timeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	c.ctx, c.stop = context.WithCancel(context.WithoutCancel(ctx))
	if err := c.RefreshCatalog(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("pilot remote: target %s at %s: %w", cfg.Target, cfg.URL, err)
	}
	return c, nil
}

// Target is the target's name.
func (c *Client) Target() string { return c.cfg.Target }

// Catalog is the Pilot's catalog as last read.
func (c *Client) Catalog() *sqlcheck.Catalog {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.catalog
}

// RefreshCatalog reads the Pilot's catalog.
func (c *Client) RefreshCatalog(ctx context.Context) error {
	rep, _, err := c.call(ctx, opCatalog, struct{}{})
	if err != nil {
		return err
	}
	if rep.Catalog == nil {
		return errors.New("pilot remote: catalog: the answer has no catalog")
	}
	cat, err := rep.Catalog.catalog()
	if err != nil {
		return fmt.Errorf("pilot remote: catalog: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.digest != rep.Catalog.Digest {
		c.catalog, c.digest = cat, rep.Catalog.Digest
	}
	return nil
}

// noticeCatalog reads the catalog again, in the background, when an
// answer says the Pilot's differs from ours.
func (c *Client) noticeCatalog(digest string) {
	if digest == "" {
		return
	}
	c.mu.RLock()
	same := digest == c.digest || c.digest == ""
	c.mu.RUnlock()
	if same || c.ctx.Err() != nil || !c.refreshing.CompareAndSwap(false, true) {
		return
	}
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		defer c.refreshing.Store(false)
		if err := c.RefreshCatalog(c.ctx); err != nil {
			c.cfg.Logger.Warn("pilot remote: the Pilot's catalog changed and could not be read again", "target", c.cfg.Target, "err", err)
			return
		}
		c.cfg.Logger.Info("pilot remote: the Pilot's catalog changed; read it again", "target", c.cfg.Target)
	}()
}

// Close stops a catalog read in flight and closes idle connections.
func (c *Client) Close() {
	c.stop()
	c.bg.Wait()
	c.tr.CloseIdleConnections()
}

// errNotSent marks a failure before any connection was obtained: nothing
// of the request was written.
var errNotSent = errors.New("nothing was sent")

// call sends one call and decodes its envelope. An error wraps
// errNotSent when no connection was obtained; any other error means the
// request may have reached the Pilot. A *Error is the Pilot's own error,
// reported in a well-formed answer.
func (c *Client) call(ctx context.Context, op string, body any) (*received, bool, error) {
	js, err := json.Marshal(body)
	if err != nil {
		return nil, false, fmt.Errorf("pilot remote %s: %s: %w: %w", c.cfg.Target, op, errNotSent, err)
	}
	var connected atomic.Bool
	trace := &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { connected.Store(true) }}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodPost, c.base+op, bytes.NewReader(js))
	if err != nil {
		return nil, false, fmt.Errorf("pilot remote %s: %s: %w: %w", c.cfg.Target, op, errNotSent, err)
	}
	// Never resent: without GetBody the transport cannot rewind the body
	// to retry the request on another connection.
	req.GetBody = nil
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		if !connected.Load() {
			return nil, false, fmt.Errorf("pilot remote %s: %s: %w: %w: %w", c.cfg.Target, op, pilot.ErrUnreachable, errNotSent, err)
		}
		return nil, true, fmt.Errorf("pilot remote %s: %s: %w", c.cfg.Target, op, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBody+1))
	if err != nil {
		return nil, true, fmt.Errorf("pilot remote %s: %s: reading the answer: %w", c.cfg.Target, op, err)
	}
	if len(data) > MaxResponseBody {
		return nil, true, fmt.Errorf("pilot remote %s: %s: the answer is over %d bytes", c.cfg.Target, op, MaxResponseBody)
	}
	if resp.StatusCode != http.StatusOK {
		msg := strings.TrimSpace(string(data))
		if len(msg) > 200 {
			msg = msg[:200] + "..."
		}
		return nil, true, fmt.Errorf("pilot remote %s: %s: HTTP %d: %q", c.cfg.Target, op, resp.StatusCode, msg)
	}
	var rep received
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil || dec.More() {
		return nil, true, fmt.Errorf("pilot remote %s: %s: the answer is not an envelope: %v", c.cfg.Target, op, err)
	}
	c.noticeCatalog(resp.Header.Get(catalogHeader))
	if rep.Error != nil {
		switch rep.Error.Kind {
		case kindCommitUnknown, kindNotPreviewable, kindUnreachable, kindError,
			kindSessionAborted, kindSessionBroken, kindSavepoint, kindRolledBack, kindNoSession:
		default:
			return nil, true, fmt.Errorf("pilot remote %s: %s: an error of unknown kind %q: %s", c.cfg.Target, op, rep.Error.Kind, rep.Error.Message)
		}
		return &rep, true, &Error{Target: c.cfg.Target, Op: op, Kind: rep.Error.Kind, Message: rep.Error.Message, Code: rep.Error.Code}
	}
	return &rep, true, nil
}

// Ping checks that the Pilot answers and its target does.
func (c *Client) Ping(ctx context.Context) error {
	_, _, err := c.call(ctx, opPing, struct{}{})
	return err
}

// Execute sends one marque's statement to the Pilot, which verifies and
// runs it. Any failure after the request may have been written, other
// than the Pilot's own answer, wraps pilot.ErrCommitUnknown.
func (c *Client) Execute(ctx context.Context, req pilot.Request) (*pilot.Result, error) {
	return c.execute(ctx, opExecute, executeBody{Marque: req.Marque, SQL: req.SQL, Bound: req.Bound,
		ExpectBefore: req.ExpectBefore, ExpectRows: req.ExpectRows, ExpectAfter: req.ExpectAfter})
}

// ExecuteApproved sends an approved statement to the Pilot, as Execute.
func (c *Client) ExecuteApproved(ctx context.Context, req pilot.ApprovedRequest) (*pilot.Result, error) {
	return c.execute(ctx, opExecuteApproved, approvedBody{Marque: req.Marque, SQL: req.SQL, Approval: req.Approval})
}

func (c *Client) execute(ctx context.Context, op string, body any) (*pilot.Result, error) {
	// The caller going away must not leave a statement's outcome unknown:
	// once sent, the call runs to its answer (bounded by Timeout).
	rep, sent, err := c.call(context.WithoutCancel(ctx), op, body)
	var perr *Error
	switch {
	case errors.As(err, &perr):
		// The Pilot's own error, as it would have returned it in process
		// (ErrCommitUnknown among them).
		return nil, err
	case err != nil && !sent:
		// No connection was obtained: nothing was written.
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("%w: the request may have reached the Pilot and no answer came: %w", pilot.ErrCommitUnknown, err)
	case rep.Result == nil || rep.Result.Outcome != pilot.Executed && rep.Result.Outcome != pilot.Refused:
		return nil, fmt.Errorf("pilot remote %s: %s: %w: the answer holds no execution result", c.cfg.Target, op, pilot.ErrCommitUnknown)
	}
	res, err := rep.Result.result()
	if err != nil {
		return nil, fmt.Errorf("pilot remote %s: %s: %w: the answer's result is malformed: %w", c.cfg.Target, op, pilot.ErrCommitUnknown, err)
	}
	return res, nil
}

// Rehearse asks the Pilot to rehearse a statement inside a bound.
func (c *Client) Rehearse(ctx context.Context, sql string, canonicalBound []byte, auth marque.Auth, principal, path string) (*pilot.Result, error) {
	rep, _, err := c.call(ctx, opRehearse, rehearseBody{SQL: sql, Bound: canonicalBound, Auth: &auth, Principal: principal, Path: path})
	if err != nil {
		return nil, err
	}
	if rep.Result == nil || rep.Result.Outcome != pilot.Rehearsed && rep.Result.Outcome != pilot.Refused {
		return nil, fmt.Errorf("pilot remote %s: %s: the answer holds no rehearsal result", c.cfg.Target, opRehearse)
	}
	res, err := rep.Result.result()
	if err != nil {
		return nil, fmt.Errorf("pilot remote %s: %s: the answer's result is malformed: %w", c.cfg.Target, opRehearse, err)
	}
	return res, nil
}

// Describe asks the Pilot to describe a statement inside a bound.
func (c *Client) Describe(ctx context.Context, sql string, canonicalBound []byte, auth marque.Auth, principal, path string) (*pilot.Result, error) {
	rep, _, err := c.call(ctx, opDescribe, rehearseBody{SQL: sql, Bound: canonicalBound, Auth: &auth, Principal: principal, Path: path})
	if err != nil {
		return nil, err
	}
	if rep.Result == nil || rep.Result.Outcome != pilot.Described && rep.Result.Outcome != pilot.Refused {
		return nil, fmt.Errorf("pilot remote %s: %s: the answer holds no description", c.cfg.Target, opDescribe)
	}
	res, err := rep.Result.result()
	if err != nil {
		return nil, fmt.Errorf("pilot remote %s: %s: the answer's result is malformed: %w", c.cfg.Target, opDescribe, err)
	}
	return res, nil
}

// Preview asks the Pilot for a referred statement's preview; the bytes
// are the Pilot's own.
func (c *Client) Preview(ctx context.Context, sql string) (*pilot.Preview, []byte, error) {
	rep, _, err := c.call(ctx, opPreview, rehearseBody{SQL: sql})
	if err != nil {
		return nil, nil, err
	}
	if len(rep.Report) == 0 {
		return nil, nil, fmt.Errorf("pilot remote %s: %s: the answer holds no preview", c.cfg.Target, opPreview)
	}
	var pv pilot.Preview
	dec := json.NewDecoder(bytes.NewReader(rep.Report))
	dec.UseNumber()
	if err := dec.Decode(&pv); err != nil {
		return nil, nil, fmt.Errorf("pilot remote %s: %s: the preview: %w", c.cfg.Target, opPreview, err)
	}
	return &pv, []byte(rep.Report), nil
}

// Receipt asks whether a marque's statement committed.
func (c *Client) Receipt(ctx context.Context, marqueID string) (bool, int64, error) {
	return c.receipt(ctx, opReceipt, receiptBody{MarqueID: marqueID})
}

// VoidReceipt settles a marque nobody recorded an outcome for. It is
// safe to repeat: a second void meets the first and reports not executed.
func (c *Client) VoidReceipt(ctx context.Context, marqueID, requestID, principal string) (bool, int64, error) {
	return c.receipt(ctx, opVoidReceipt, receiptBody{MarqueID: marqueID, RequestID: requestID, Principal: principal})
}

func (c *Client) receipt(ctx context.Context, op string, body receiptBody) (bool, int64, error) {
	rep, _, err := c.call(ctx, op, body)
	if err != nil {
		return false, 0, err
	}
	if rep.Receipt == nil {
		return false, 0, fmt.Errorf("pilot remote %s: %s: the answer holds no receipt", c.cfg.Target, op)
	}
	return rep.Receipt.Found, rep.Receipt.Rows, nil
}

// PruneReceipts asks the Pilot to delete the receipts executed before a
// time; it keeps every one younger than pilot.ReceiptFloor itself.
func (c *Client) PruneReceipts(ctx context.Context, before time.Time) (int64, error) {
	_, n, err := c.receipt(ctx, opPruneReceipts, receiptBody{BeforeNS: before.UnixNano()})
	return n, err
}

// XactStatus asks the Pilot for pg_xact_status of a transaction id.
func (c *Client) XactStatus(ctx context.Context, txid string) (string, error) {
	rep, _, err := c.call(ctx, opXactStatus, receiptBody{TxID: txid})
	if err != nil {
		return "", err
	}
	if rep.Status == nil {
		return "", fmt.Errorf("pilot remote %s: %s: the answer holds no status", c.cfg.Target, opXactStatus)
	}
	return *rep.Status, nil
}
