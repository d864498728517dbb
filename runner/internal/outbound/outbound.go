// Package outbound sends a guest's outgoing HTTP requests (wasi:http's
// outgoing-handler) within its revision's allowed_outbound_hosts.
//
// A request is checked twice. Its URL first: the scheme, host and port
// must match an entry of the list (vocab.OutboundHosts.Allows). Then every
// address the host resolves to, at the moment of connecting: a loopback,
// private, link-local, unspecified, multicast or otherwise non-public
// address is refused unless the list names that address literally (as
// "http://10.0.0.5:8080"), and the node's own listening addresses are
// refused always. The dialer connects to the address it checked, so a
// name that resolves to a public address for the check and to 127.0.0.1
// for the connection (DNS rebinding) has no window.
//
// No connection is kept between requests (a pooled connection would
// outlive the revision whose list allowed it), redirects are answered to
// the guest rather than followed, proxies from the environment are not
// used, and the response body is read up to a bound.
package outbound

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/vocab"
)

// The errors of Do, by what the guest sees (wasi:http's error-code).
var (
	// ErrDenied: the list does not allow the request, or every address of
	// its host is one the guest may not reach (HTTP-request-denied).
	ErrDenied = errors.New("outbound: request denied")
	// ErrDNS: the host does not resolve (DNS-error).
	ErrDNS = errors.New("outbound: the host does not resolve")
	// ErrRefused: no listed address accepted the connection
	// (connection-refused).
	ErrRefused = errors.New("outbound: connection refused")
	// ErrTimeout: the activation's time ran out while waiting
	// (connection-timeout).
	ErrTimeout = errors.New("outbound: timed out")
	// ErrTooLarge: the response body is larger than the bound
	// (HTTP-response-body-size).
	ErrTooLarge = errors.New("outbound: the response body is too large")
	// ErrProtocol: the peer's answer is not HTTP (HTTP-protocol-error).
	ErrProtocol = errors.New("outbound: not an HTTP answer")
)

// Request is a guest's outgoing request.
type Request struct {
	Method        string
	Scheme        string // "http" or "https"
	Authority     string // host[:port]
	PathWithQuery string
	Header        [][2]string
	Body          []byte
}

// Response is what the peer answered; Body is at most the bound.
type Response struct {
	Status int
	Header [][2]string
	Body   []byte
}

// Client sends requests; it is safe for concurrent use.
type Client struct {
	// lookup resolves a host name (net.DefaultResolver's, or a test's).
	lookup func(ctx context.Context, host string) ([]netip.Addr, error)
	own    atomic.Pointer[[]netip.AddrPort] // the node's listening addresses
	local  []netip.Addr                     // this host's addresses, for an own address on all of them
	hc     *http.Client
}

// New returns a client that never reaches the listening addresses own (an
// unspecified address, 0.0.0.0:8080, stands for every address of this host
// at that port).
func New(own []netip.AddrPort) *Client {
	c := &Client{lookup: func(ctx context.Context, host string) ([]netip.Addr, error) {
		return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	}}
	c.SetOwn(own)
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil {
				c.local = append(c.local, p.Addr().Unmap())
			}
		}
	}
	c.hc = &http.Client{
		Transport: &http.Transport{
			Proxy: nil, DisableKeepAlives: true, DisableCompression: true, MaxResponseHeaderBytes: 64 << 10,
			DialContext: c.dial, ForceAttemptHTTP2: false, TLSHandshakeTimeout: 10 * time.Second,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return c
}

// SetOwn replaces the node's listening addresses (once it listens).
func (c *Client) SetOwn(own []netip.AddrPort) {
	own = append([]netip.AddrPort(nil), own...)
	c.own.Store(&own)
}

// WithLookup replaces the resolver (tests: a name that resolves to a
// loopback address).
func (c *Client) WithLookup(lookup func(ctx context.Context, host string) ([]netip.Addr, error)) *Client {
	c.lookup = lookup
	return c
}

// dialKey carries a request's list and deadline to the dialer: net/http
// dials with the request context's values but without its deadline, so
// the deadline travels as a value too and bounds the lookup and connect.
type dialKey struct{}

type dialLimits struct {
	hosts    vocab.OutboundHosts
	deadline time.Time // zero: none
}

// Do sends r if hosts allow it, within ctx (the activation's deadline),
// and reads at most maxBody bytes of the answer's body.
func (c *Client) Do(ctx context.Context, hosts vocab.OutboundHosts, r *Request, maxBody int) (*Response, error) {
	host, port, err := splitAuthority(r.Scheme, r.Authority)
	if err != nil {
		return nil, errors.Wrapf(ErrDenied, "%v", err)
	}
	if !hosts.Allows(r.Scheme, host, port) {
		return nil, errors.Wrapf(ErrDenied, "%s://%s is not in allowed_outbound_hosts", r.Scheme, r.Authority)
	}
	path := r.PathWithQuery
	if path == "" {
		path = "/"
	}
	if !strings.HasPrefix(path, "/") {
		return nil, errors.Wrapf(ErrDenied, "path %q does not start with /", path)
	}
	lim := dialLimits{hosts: hosts}
	lim.deadline, _ = ctx.Deadline()
	req, err := http.NewRequestWithContext(context.WithValue(ctx, dialKey{}, lim), r.Method,
		r.Scheme+"://"+r.Authority+path, bytes.NewReader(r.Body))
	if err != nil {
		return nil, errors.Wrapf(ErrDenied, "%v", err)
	}
	for _, kv := range r.Header {
		req.Header.Add(kv[0], kv[1])
	}
	req.ContentLength = int64(len(r.Body))
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, classify(ctx, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, int64(maxBody)+1))
	if err != nil {
		return nil, classify(ctx, err)
	}
	if len(body) > maxBody {
		return nil, errors.Wrapf(ErrTooLarge, "more than %d bytes", maxBody)
	}
	out := &Response{Status: resp.StatusCode, Body: body}
	for name, vs := range resp.Header {
		for _, v := range vs {
			out.Header = append(out.Header, [2]string{strings.ToLower(name), v})
		}
	}
	return out, nil
}

// splitAuthority is the host (lower case, an IPv6 literal without
// brackets) and port of authority, the scheme's own port when it has none.
func splitAuthority(scheme, authority string) (string, int, error) {
	if scheme != "http" && scheme != "https" {
		return "", 0, errors.Newf("scheme %q: only http and https", scheme)
	}
	if authority == "" || strings.ContainsAny(authority, "@/?# ") {
		return "", 0, errors.Newf("authority %q is not host[:port]", authority)
	}
	port := 443
	if scheme == "http" {
		port = 80
	}
	host := authority
	if h, p, err := net.SplitHostPort(authority); err == nil {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return "", 0, errors.Newf("authority %q: bad port", authority)
		}
		host, port = h, n
	} else if strings.HasPrefix(authority, "[") {
		host = strings.TrimSuffix(strings.TrimPrefix(authority, "["), "]")
	}
	return strings.TrimSuffix(strings.ToLower(host), "."), port, nil
}

// dial connects to the first address of the request's host that the list
// lets the guest reach; it is the only way the client connects.
func (c *Client) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	lim, _ := ctx.Value(dialKey{}).(dialLimits)
	hosts := lim.hosts
	if !lim.deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, lim.deadline)
		defer cancel()
	}
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, errors.Wrapf(ErrDenied, "%v", err)
	}
	port, _ := strconv.Atoi(p)
	var ips []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{a}
	} else if ips, err = c.lookup(ctx, host); err != nil || len(ips) == 0 {
		return nil, errors.Wrapf(ErrDNS, "%s: %v", host, err)
	}
	var last error = errors.Wrapf(ErrDenied, "%s resolves only to addresses a guest may not reach", host)
	d := net.Dialer{Timeout: 10 * time.Second} // and the deadline, through ctx
	for _, ip := range ips {
		ip = ip.Unmap()
		if !c.reachable(hosts, ip, port) {
			continue
		}
		conn, err := d.DialContext(ctx, network, netip.AddrPortFrom(ip, uint16(port)).String())
		if err == nil {
			return conn, nil
		}
		last = errors.Wrapf(ErrRefused, "%v", err)
	}
	return nil, last
}

// reachable reports whether a guest with list hosts may connect to ip at
// port: never the node itself; a non-public address only when listed
// literally.
func (c *Client) reachable(hosts vocab.OutboundHosts, ip netip.Addr, port int) bool {
	if ip.IsUnspecified() {
		return false // a connect to 0.0.0.0 or :: reaches this host's loopback
	}
	for _, own := range *c.own.Load() {
		if int(own.Port()) != port {
			continue
		}
		oa := own.Addr().Unmap()
		if oa == ip || oa.IsUnspecified() && (ip.IsLoopback() || ip.IsUnspecified() || containsAddr(c.local, ip)) {
			return false
		}
	}
	return Public(ip) || hosts.ListsAddr(ip, port)
}

func containsAddr(as []netip.Addr, a netip.Addr) bool {
	for _, x := range as {
		if x == a {
			return true
		}
	}
	return false
}

// nonPublic are the ranges no guest reaches unless listed literally,
// beyond what netip's predicates name: this network, shared address space
// (carrier-grade NAT), IETF protocol assignments, benchmarking, the
// documentation ranges, and the reserved and broadcast block.
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"), netip.MustParsePrefix("100.64.0.0/10"), netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("198.18.0.0/15"), netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("240.0.0.0/4"), netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("2001:db8::/32"), netip.MustParsePrefix("100::/64"),
}

// Public reports whether ip is a public unicast address.
func Public(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !ip.IsValid() || ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsMulticast() || ip.IsUnspecified() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(ip) {
			return false
		}
	}
	return true
}

// classify maps a transport error to the error a guest sees.
func classify(ctx context.Context, err error) error {
	for _, known := range []error{ErrDenied, ErrDNS, ErrRefused} {
		if errors.Is(err, known) {
			return err
		}
	}
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
		return errors.Wrapf(ErrTimeout, "%v", err)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return errors.Wrapf(ErrTimeout, "%v", err)
	}
	return errors.Wrapf(ErrProtocol, "%v", err)
}
