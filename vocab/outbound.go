package vocab

// A revision's allowed outbound hosts (manifest allowed_outbound_hosts).

import (
	"net/netip"
	"strconv"
	"strings"

	"github.com/cockroachdb/errors"
)

// Bounds of allowed_outbound_hosts.
const (
	MaxOutboundHosts     = 32
	MaxOutboundHostBytes = 255
)

// OutboundHost is one entry of allowed_outbound_hosts, in Spin's syntax:
// "SCHEME://HOST[:PORT]". SCHEME is http, https or * (either); HOST is a
// DNS name, "*.example.com" (any name below example.com, not itself), "*"
// (any name) or an IP literal ("10.0.0.5", "[::1]"); PORT is a number or *
// (any), and without one the scheme's own (80, 443; either for *://).
type OutboundHost struct {
	Scheme string     // "http", "https" or "*"
	Host   string     // lower case, without a trailing dot; "*" or "*.suffix" for wildcards
	Addr   netip.Addr // the IP literal's address (Host is its text); invalid for a name
	Port   int        // 1-65535; 0: the scheme's own; -1: any
}

// ParseOutboundHost parses one allowed_outbound_hosts entry.
func ParseOutboundHost(s string) (OutboundHost, error) {
	if len(s) > MaxOutboundHostBytes {
		return OutboundHost{}, errors.Newf("longer than %d bytes", MaxOutboundHostBytes)
	}
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return OutboundHost{}, errors.New(`want SCHEME://HOST[:PORT], e.g. "https://api.example.com"`)
	}
	var h OutboundHost
	switch scheme = strings.ToLower(scheme); scheme {
	case "http", "https", "*":
		h.Scheme = scheme
	default:
		return OutboundHost{}, errors.Newf("scheme %q: want http, https or *", scheme)
	}
	if strings.ContainsAny(rest, "/?#@") {
		return OutboundHost{}, errors.New("only a scheme, a host and a port: no path, query, fragment or user")
	}
	host, port := rest, ""
	if strings.HasPrefix(rest, "[") {
		end := strings.Index(rest, "]")
		if end < 0 {
			return OutboundHost{}, errors.New("an IPv6 literal without its closing ]")
		}
		host, port = rest[1:end], strings.TrimPrefix(rest[end+1:], ":")
		if rest[end+1:] != "" && !strings.HasPrefix(rest[end+1:], ":") {
			return OutboundHost{}, errors.New("only a port may follow an IPv6 literal")
		}
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() || a.Zone() != "" {
			return OutboundHost{}, errors.Newf("[%s] is not an IPv6 address", host)
		}
		h.Addr, h.Host = a, a.String()
	} else {
		if i := strings.LastIndexByte(rest, ':'); i >= 0 {
			host, port = rest[:i], rest[i+1:]
		}
		host = strings.TrimSuffix(strings.ToLower(host), ".")
		if a, err := netip.ParseAddr(host); err == nil {
			if !a.Is4() {
				return OutboundHost{}, errors.New("an IPv6 address is written in brackets: [::1]")
			}
			h.Addr = a
		} else if err := checkHostPattern(host); err != nil {
			return OutboundHost{}, err
		}
		h.Host = host
	}
	switch {
	case port == "" && strings.HasSuffix(rest, ":"):
		return OutboundHost{}, errors.New("an empty port")
	case port == "":
	case port == "*":
		h.Port = -1
	default:
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || port[0] == '0' {
			return OutboundHost{}, errors.Newf("port %q: want 1-65535 or *", port)
		}
		h.Port = n
	}
	return h, nil
}

// checkHostPattern accepts "*", "*.name" and a DNS name: labels of
// letters, digits and hyphens (not at either end), at most 63 bytes each.
func checkHostPattern(host string) error {
	if host == "*" {
		return nil
	}
	name := strings.TrimPrefix(host, "*.")
	if name == "" {
		return errors.New("an empty host")
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return errors.Newf("host %q: not a DNS name (labels of letters, digits and inner hyphens; * only as the whole first label)", host)
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return errors.Newf("host %q: not a DNS name (labels of letters, digits and inner hyphens; * only as the whole first label)", host)
			}
		}
	}
	return nil
}

// String is the entry in its canonical form.
func (h OutboundHost) String() string {
	host := h.Host
	if h.Addr.Is6() {
		host = "[" + host + "]"
	}
	switch {
	case h.Port < 0:
		return h.Scheme + "://" + host + ":*"
	case h.Port > 0:
		return h.Scheme + "://" + host + ":" + strconv.Itoa(h.Port)
	}
	return h.Scheme + "://" + host
}

// defaultPort is the port of scheme ("http" or "https").
func defaultPort(scheme string) int {
	if scheme == "http" {
		return 80
	}
	return 443
}

// Matches reports whether a request to scheme ("http" or "https"), host (a
// name in lower case or an IP's text) and port is one h allows.
func (h OutboundHost) Matches(scheme, host string, port int) bool {
	if h.Scheme != "*" && h.Scheme != scheme {
		return false
	}
	switch {
	case h.Port < 0:
	case h.Port == 0:
		if port != defaultPort(scheme) {
			return false
		}
	case h.Port != port:
		return false
	}
	switch {
	case h.Addr.IsValid():
		a, err := netip.ParseAddr(host)
		return err == nil && a.Unmap() == h.Addr.Unmap()
	case h.Host == "*":
		_, err := netip.ParseAddr(host)
		return err != nil // a wildcard matches names, never an IP literal
	case strings.HasPrefix(h.Host, "*."):
		return strings.HasSuffix(host, h.Host[1:]) && len(host) > len(h.Host)-1
	}
	return h.Host == host
}

// OutboundHosts is a revision's allowed_outbound_hosts; empty denies every
// outbound request.
type OutboundHosts []OutboundHost

// Allows reports whether any entry matches the request (see Matches).
func (hs OutboundHosts) Allows(scheme, host string, port int) bool {
	for _, h := range hs {
		if h.Matches(scheme, host, port) {
			return true
		}
	}
	return false
}

// ListsAddr reports whether addr is listed literally, as an IP entry whose
// port matches port: the only way a loopback, private or link-local
// address may be reached.
func (hs OutboundHosts) ListsAddr(addr netip.Addr, port int) bool {
	for _, h := range hs {
		if h.Addr.IsValid() && h.Addr.Unmap() == addr.Unmap() && (h.Port < 0 || h.Port == port || h.Port == 0 &&
			(h.Scheme == "*" && (port == 80 || port == 443) || h.Scheme != "*" && port == defaultPort(h.Scheme))) {
			return true
		}
	}
	return false
}

// Strings is the entries in their canonical form.
func (hs OutboundHosts) Strings() []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.String()
	}
	return out
}
