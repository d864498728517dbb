// Package client is a small Go client for a latent-node's HTTP API: invoke a
// route, upload modules and activate a release, read, list and delete
// deployments, read admission usage. It
// honours Retry-After on retryable refusals, with jitter and a bounded retry
// budget, and returns refusals as *Problem values.
//
// It imports the standard library only, nothing from this module and no
// third-party package, so any Go program can use it without taking on the
// node's dependencies. For that reason it is the one package that builds its
// errors with the standard library (errors, fmt) instead of
// github.com/cockroachdb/errors; internal/importcheck enforces both.
package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// Client talks to one node. The zero value is not usable; use New.
type Client struct {
	base  *url.URL
	key   string
	http  *http.Client
	retry RetryPolicy
	sleep func(ctx context.Context, d time.Duration) error
	// tls and caFile are applied by New, after every option.
	tls    *tls.Config
	caFile string
}

// RetryPolicy bounds retries of retryable refusals (429/503 with Retry-After).
type RetryPolicy struct {
	MaxRetries int           // per call (default 2; 0 after WithRetry(RetryPolicy{}) disables)
	MaxWait    time.Duration // longest single wait honoured (default 10s)
	Jitter     float64       // fraction of the wait added at random, [0,1] (default 0.2)
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient replaces the default http.Client.
func WithHTTPClient(h *http.Client) Option { return func(c *Client) { c.http = h } }

// WithTLSConfig sets the TLS configuration of https connections (for
// example RootCAs, or Certificates for a client certificate). New applies it
// to a clone of the HTTP client's *http.Transport (http.DefaultTransport's
// when WithHTTPClient gave none); a copy of the configuration is kept.
func WithTLSConfig(cfg *tls.Config) Option { return func(c *Client) { c.tls = cfg.Clone() } }

// WithCAFile trusts the CA certificates of the PEM file at path, instead of
// the system's roots, to verify the node's certificate (for a node whose
// certificate a private CA signs). New reads the file and fails when it
// holds no certificate. With WithTLSConfig too, the file's CAs replace its
// RootCAs.
func WithCAFile(path string) Option { return func(c *Client) { c.caFile = path } }

// WithRetry replaces the retry policy.
func WithRetry(p RetryPolicy) Option { return func(c *Client) { c.retry = p } }

// ErrNoKey is returned by every call of a client made without an API key:
// every endpoint it calls needs one, and the node would answer 401.
var ErrNoKey = errors.New("client: no API key: pass the key (lk_…) to client.New")

// New returns a client for the node at baseURL authenticating with key. An
// empty key is accepted here; every call then returns ErrNoKey without
// sending anything.
func New(baseURL, key string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: %q is not an http(s) URL", baseURL)
	}
	c := &Client{base: u, key: key, http: &http.Client{},
		retry: RetryPolicy{MaxRetries: 2, MaxWait: 10 * time.Second, Jitter: 0.2}, sleep: sleepCtx}
	for _, o := range opts {
		o(c)
	}
	if err := c.applyTLS(); err != nil {
		return nil, err
	}
	return c, nil
}

// applyTLS installs the TLS configuration of WithTLSConfig and WithCAFile.
func (c *Client) applyTLS() error {
	if c.tls == nil && c.caFile == "" {
		return nil
	}
	cfg := c.tls
	if cfg == nil {
		cfg = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if c.caFile != "" {
		pem, err := os.ReadFile(c.caFile)
		if err != nil {
			return fmt.Errorf("client: CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("client: CA file %s: no PEM certificate", c.caFile)
		}
		cfg.RootCAs = pool
	}
	base, ok := c.http.Transport.(*http.Transport)
	if !ok || base == nil {
		if c.http.Transport != nil {
			return errors.New("client: WithTLSConfig and WithCAFile need the HTTP client's Transport to be an *http.Transport")
		}
		base = http.DefaultTransport.(*http.Transport)
	}
	tr := base.Clone()
	tr.TLSClientConfig = cfg
	h := *c.http
	h.Transport = tr
	c.http = &h
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Problem is a refusal or failure as the node reports it
// (application/problem+json).
type Problem struct {
	Status    int    `json:"status"`
	Type      string `json:"type,omitempty"`
	Title     string `json:"title,omitempty"`
	Detail    string `json:"detail,omitempty"`
	Code      string `json:"code,omitempty"`
	Reason    string `json:"reason,omitempty"`
	Scope     string `json:"scope,omitempty"`
	Dimension string `json:"dimension,omitempty"`
	Retryable bool   `json:"retryable"`
	// InvalidFields are the field problems of a refused manifest or module.
	InvalidFields []FieldProblem `json:"invalid_fields,omitempty"`
	Outcome       string         `json:"outcome,omitempty"`
	ExitCode      *int           `json:"exit_code,omitempty"`
	TrapKind      string         `json:"trap_kind,omitempty"`
	Stderr        string         `json:"stderr,omitempty"`
	// RetryAfter is the node's Retry-After, when it sent one.
	RetryAfter time.Duration `json:"-"`
	// Header is the answer's header (for an executed activation it holds
	// Latent-Activation-Id, Latent-Revision, Latent-Outcome and the usage
	// headers).
	Header http.Header `json:"-"`
}

// FieldProblem is one problem of a refused manifest or module.
type FieldProblem struct {
	Field   string `json:"field"`
	Problem string `json:"problem"`
}

func (p *Problem) Error() string {
	var b strings.Builder
	b.WriteString("latent-node: ")
	b.WriteString(strconv.Itoa(p.Status))
	outcome := p.Outcome
	if outcome == p.Reason {
		outcome = "" // an executed activation's problem: the reason is the outcome
	}
	for _, s := range []string{p.Code, p.Reason, outcome, p.TrapKind} {
		if s != "" {
			b.WriteString(" " + s)
		}
	}
	if p.ExitCode != nil {
		b.WriteString(" exit=" + strconv.Itoa(*p.ExitCode))
	}
	if p.Detail != "" {
		b.WriteString(": " + p.Detail)
	}
	return b.String()
}

// InvokeOptions are the optional request headers of an invocation.
type InvokeOptions struct {
	ActivationID string
	RoutingKey   string
	Priority     *int
	Timeout      time.Duration // Latent-Timeout-Ms
	Deadline     time.Time     // Latent-Deadline-Unix-Ms
	Fuel         uint64        // Latent-Budget fuel=
	MemoryBytes  uint64        // Latent-Budget memory=
	WallTime     time.Duration // Latent-Budget wall-ms=
	Metadata     map[string]string
	// Method is the request's method; "" is POST. A revision with the WAGI
	// ABI takes any method, a stdio revision POST only.
	Method string
	// PathSuffix is the path after the route ("items/7"), a WAGI revision's
	// PATH_INFO; each of its segments is escaped.
	PathSuffix string
	// Query is the raw query string, without the "?".
	Query string
	// Header holds further request headers (Content-Type, Accept, a
	// traceparent, ...). The fields above win over it, and Authorization
	// is always the client's key.
	Header http.Header
}

// Result is a successful invocation.
type Result struct {
	Status       int         // the HTTP status (200)
	Header       http.Header // the answer's header, for whatever the fields below leave out
	Output       []byte
	ActivationID string
	Revision     string
	Outcome      string
	FuelUsed     uint64
	MemoryPeak   uint64
	QueueWait    time.Duration
	Execution    time.Duration
	CellClass    string
}

// Invoke runs tenant/service/route with input. A non-2xx answer is a
// *Problem, except the answer a WAGI guest wrote itself (Latent-Outcome
// success, whatever its status): that is a Result with the guest's status,
// headers and body.
func (c *Client) Invoke(ctx context.Context, tenant, service, route string, input []byte, o InvokeOptions) (*Result, error) {
	p := invokePath(tenant, service, route, o)
	method := o.Method
	if method == "" {
		method = http.MethodPost
	}
	resp, body, err := c.do(ctx, method, p, "application/octet-stream", input, func(h http.Header) {
		setInvokeHeaders(h, o)
	})
	var prob *Problem
	if errors.As(err, &prob) && resp != nil && guestAnswer(resp) {
		err = nil
	}
	if err != nil {
		return nil, err
	}
	h := resp.Header
	r := &Result{Status: resp.StatusCode, Header: h, Output: body, ActivationID: h.Get("Latent-Activation-Id"), Revision: h.Get("Latent-Revision"),
		Outcome: h.Get("Latent-Outcome"), CellClass: h.Get("Latent-Cell-Class")}
	r.FuelUsed, _ = strconv.ParseUint(h.Get("Latent-Fuel-Used"), 10, 64)
	r.MemoryPeak, _ = strconv.ParseUint(h.Get("Latent-Memory-Peak-Bytes"), 10, 64)
	if ms, err := strconv.ParseInt(h.Get("Latent-Queue-Wait-Ms"), 10, 64); err == nil {
		r.QueueWait = time.Duration(ms) * time.Millisecond
	}
	if ms, err := strconv.ParseInt(h.Get("Latent-Execution-Ms"), 10, 64); err == nil {
		r.Execution = time.Duration(ms) * time.Millisecond
	}
	return r, nil
}

// invokePath is the request path (and query) of an invocation.
func invokePath(tenant, service, route string, o InvokeOptions) string {
	p := "/v1/invoke/" + url.PathEscape(tenant) + "/" + url.PathEscape(service) + "/" + url.PathEscape(route)
	if o.PathSuffix != "" {
		segs := strings.Split(o.PathSuffix, "/")
		for i, s := range segs {
			segs[i] = url.PathEscape(s)
		}
		p += "/" + strings.Join(segs, "/")
	}
	if o.Query != "" {
		p += "?" + o.Query
	}
	return p
}

// guestAnswer reports a non-2xx answer a WAGI guest wrote itself: it
// executed successfully and is not a problem document.
func guestAnswer(resp *http.Response) bool {
	return resp.Header.Get("Latent-Outcome") == "success" &&
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json")
}

func setInvokeHeaders(h http.Header, o InvokeOptions) {
	for k, vs := range o.Header {
		if http.CanonicalHeaderKey(k) == "Authorization" {
			continue
		}
		h.Del(k)
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	if o.ActivationID != "" {
		h.Set("Latent-Activation-Id", o.ActivationID)
	}
	if o.RoutingKey != "" {
		h.Set("Latent-Routing-Key", o.RoutingKey)
	}
	if o.Priority != nil {
		h.Set("Latent-Priority", strconv.Itoa(*o.Priority))
	}
	if o.Timeout > 0 {
		h.Set("Latent-Timeout-Ms", strconv.FormatInt(o.Timeout.Milliseconds(), 10))
	}
	if !o.Deadline.IsZero() {
		h.Set("Latent-Deadline-Unix-Ms", strconv.FormatInt(o.Deadline.UnixMilli(), 10))
	}
	var budget []string
	if o.Fuel > 0 {
		budget = append(budget, "fuel="+strconv.FormatUint(o.Fuel, 10))
	}
	if o.MemoryBytes > 0 {
		budget = append(budget, "memory="+strconv.FormatUint(o.MemoryBytes, 10))
	}
	if o.WallTime > 0 {
		budget = append(budget, "wall-ms="+strconv.FormatInt(o.WallTime.Milliseconds(), 10))
	}
	if len(budget) > 0 {
		h.Set("Latent-Budget", strings.Join(budget, ", "))
	}
	for k, v := range o.Metadata {
		h.Set("Latent-Meta-"+k, v)
	}
}

// Digest returns the "sha256:<hex>" digest of a module.
func Digest(module []byte) string {
	sum := sha256.Sum256(module)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// UploadArtifact uploads a module under its digest and returns the digest.
func (c *Client) UploadArtifact(ctx context.Context, module []byte) (string, error) {
	d := Digest(module)
	_, _, err := c.do(ctx, http.MethodPut, "/v1/artifacts/"+d, "application/wasm", module, nil)
	return d, err
}

// Deployment is the active release of a service: the answer to a release
// activation, and one entry of ListDeployments.
type Deployment struct {
	Tenant     string        `json:"tenant"`
	Service    string        `json:"service"`
	Release    string        `json:"release"`
	Generation uint64        `json:"generation"`
	Revisions  []RevisionRef `json:"revisions"`
}

// RevisionRef names a revision of a deployed release.
type RevisionRef struct {
	Name string `json:"name"`
	ID   string `json:"id"`
}

// ServiceDeployment is a service's active release with its manifest
// (GetDeployment).
type ServiceDeployment struct {
	Deployment
	// Routes are the manifest's routes.
	Routes []Route
	// Manifest is the release manifest as the node holds it (JSON).
	Manifest json.RawMessage
}

// Route is one route of a release manifest.
type Route struct {
	Name     string        `json:"name"`
	Function string        `json:"function,omitempty"` // empty: the module's _start
	Targets  []RouteTarget `json:"targets"`
}

// RouteTarget is one weighted target of a route.
type RouteTarget struct {
	Revision string `json:"revision"`
	Weight   int64  `json:"weight"`
}

// ServiceList is a tenant's deployed services (ListDeployments).
type ServiceList struct {
	Tenant string `json:"tenant"`
	// Generation is the catalog generation the list was read at.
	Generation uint64          `json:"generation"`
	Services   []ListedService `json:"services"`
	// Next is the after of the next page (ListDeploymentsPage); empty on
	// the last page.
	Next string `json:"next,omitempty"`
}

// ListedService is one service of a ServiceList: its name and active
// release.
type ListedService struct {
	Name       string        `json:"name"`
	Release    string        `json:"release"`
	Generation uint64        `json:"generation"`
	Revisions  []RevisionRef `json:"revisions"`
}

func deploymentPath(tenant, service string) string {
	return "/v1/deployments/" + url.PathEscape(tenant) + "/" + url.PathEscape(service)
}

// Deploy activates a release manifest (the JSON form, artifacts by digest).
func (c *Client) Deploy(ctx context.Context, tenant, service string, manifest any) (*Deployment, error) {
	data, err := json.Marshal(manifest)
	if err != nil {
		return nil, fmt.Errorf("client: encode manifest: %w", err)
	}
	_, body, err := c.do(ctx, http.MethodPut, deploymentPath(tenant, service), "application/json", data, nil)
	if err != nil {
		return nil, err
	}
	var d Deployment
	if err := json.Unmarshal(body, &d); err != nil {
		return nil, fmt.Errorf("client: decode deployment: %w", err)
	}
	return &d, nil
}

// GetDeployment returns the active release of tenant/service with its
// routes and manifest. A service without one is a *Problem (404).
func (c *Client) GetDeployment(ctx context.Context, tenant, service string) (*ServiceDeployment, error) {
	_, body, err := c.do(ctx, http.MethodGet, deploymentPath(tenant, service), "", nil, nil)
	if err != nil {
		return nil, err
	}
	var raw struct {
		Deployment
		Manifest json.RawMessage `json:"manifest"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, fmt.Errorf("client: decode deployment: %w", err)
	}
	var m struct {
		Routes []Route `json:"routes"`
	}
	if len(raw.Manifest) > 0 {
		if err := json.Unmarshal(raw.Manifest, &m); err != nil {
			return nil, fmt.Errorf("client: decode manifest: %w", err)
		}
	}
	return &ServiceDeployment{Deployment: raw.Deployment, Routes: m.Routes, Manifest: raw.Manifest}, nil
}

// ListDeployments returns tenant's deployed services, ordered by name (the
// key's principal may list its own tenant only), following the node's
// pages. Each page is read at its own catalog generation, so a listing of
// many pages is best-effort: a service deployed or deleted meanwhile may or
// may not be in it; Generation is the first page's.
func (c *Client) ListDeployments(ctx context.Context, tenant string) (*ServiceList, error) {
	var all *ServiceList
	after := ""
	for {
		page, err := c.ListDeploymentsPage(ctx, tenant, after, 0)
		if err != nil {
			return nil, err
		}
		if all == nil {
			all = page
		} else {
			all.Services = append(all.Services, page.Services...)
		}
		if page.Next == "" {
			all.Next = ""
			return all, nil
		}
		if page.Next <= after {
			return nil, fmt.Errorf("client: the node's next page %q does not follow %q", page.Next, after)
		}
		after = page.Next
	}
}

// ListDeploymentsPage returns one page of tenant's deployed services:
// those named after after (from the first when empty), at most limit (the
// node's default and maximum, 1000, when limit is 0). Next is the after of
// the following page, empty on the last.
func (c *Client) ListDeploymentsPage(ctx context.Context, tenant, after string, limit int) (*ServiceList, error) {
	q := url.Values{}
	if after != "" {
		q.Set("after", after)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	path := "/v1/deployments/" + url.PathEscape(tenant)
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	_, body, err := c.do(ctx, http.MethodGet, path, "", nil, nil)
	if err != nil {
		return nil, err
	}
	var l ServiceList
	if err := json.Unmarshal(body, &l); err != nil {
		return nil, fmt.Errorf("client: decode service list: %w", err)
	}
	return &l, nil
}

// DeleteDeployment removes tenant/service and returns the catalog
// generation of the deletion. A service without a release is a *Problem (404).
func (c *Client) DeleteDeployment(ctx context.Context, tenant, service string) (uint64, error) {
	_, body, err := c.do(ctx, http.MethodDelete, deploymentPath(tenant, service), "", nil, nil)
	if err != nil {
		return 0, err
	}
	var d struct {
		Generation uint64 `json:"generation"`
	}
	if err := json.Unmarshal(body, &d); err != nil {
		return 0, fmt.Errorf("client: decode deletion: %w", err)
	}
	return d.Generation, nil
}

// Admission returns the caller's own tenant usage (GET /v1/admission) as raw JSON.
func (c *Client) Admission(ctx context.Context) (json.RawMessage, error) {
	_, body, err := c.do(ctx, http.MethodGet, "/v1/admission", "", nil, nil)
	return body, err
}

// History returns the node's recent history (GET /ui/history, admin) as
// raw JSON: {"interval_ms", "points"}, the points after since (Unix ms)
// when since > 0.
func (c *Client) History(ctx context.Context, since int64) (json.RawMessage, error) {
	path := "/ui/history"
	if since > 0 {
		path += "?since=" + strconv.FormatInt(since, 10)
	}
	_, body, err := c.do(ctx, http.MethodGet, path, "", nil, nil)
	return body, err
}

// maxResponseBytes bounds what the client reads from the node.
const maxResponseBytes = 64 << 20

// do sends one request, retrying retryable refusals within the budget.
func (c *Client) do(ctx context.Context, method, path, contentType string, body []byte, headers func(http.Header)) (*http.Response, []byte, error) {
	if c.key == "" {
		return nil, nil, ErrNoKey
	}
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, method, c.base.String()+path, bytes.NewReader(body))
		if err != nil {
			return nil, nil, fmt.Errorf("client: request: %w", err)
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		req.Header.Set("Authorization", "Bearer "+c.key)
		if headers != nil {
			headers(req.Header)
		}
		resp, err := c.http.Do(req)
		if err != nil {
			return nil, nil, fmt.Errorf("client: %s %s: %w", method, path, err)
		}
		data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
		_ = resp.Body.Close()
		if err != nil {
			return nil, nil, fmt.Errorf("client: read response: %w", err)
		}
		if resp.StatusCode >= 200 && resp.StatusCode < 300 {
			return resp, data, nil
		}
		p := &Problem{Status: resp.StatusCode, Header: resp.Header}
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
			_ = json.Unmarshal(data, p)
			p.Status = resp.StatusCode
		} else {
			p.Detail = strings.TrimSpace(string(data))
		}
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
			p.RetryAfter = time.Duration(s) * time.Second
		}
		if !p.Retryable || p.RetryAfter == 0 || attempt >= c.retry.MaxRetries || p.RetryAfter > c.retry.MaxWait {
			return resp, data, p
		}
		wait := p.RetryAfter + time.Duration(rand.Float64()*c.retry.Jitter*float64(p.RetryAfter))
		if err := c.sleep(ctx, wait); err != nil {
			return resp, data, p
		}
	}
}
