package httpabi

// Response, the answer of an HTTP guest, and which of its headers pass.

import (
	"net/http"
	"strings"
)

// Response is the answer an HTTP guest gave.
type Response struct {
	Status int
	// ContentType and Location are empty when the guest did not set them
	// (a wasi-http guest's are in Header).
	ContentType string
	Location    string
	// Header are the other headers the guest set that its ABI lets through,
	// canonical names, in the guest's order; a name may repeat.
	Header [][2]string
	// Body is the answer's body.
	Body []byte
	// Raw says that Header is the whole answer (a wasi-http guest's): the
	// node adds no Content-Type the guest did not set.
	Raw bool
	// Streamed says that the status, headers and body already went to
	// the caller as the guest wrote them (a wasi-http guest's response
	// larger than the node holds): Body is empty.
	Streamed bool
}

// hopByHop are the response headers of a connection rather than of the
// answer (RFC 9110, 7.6.1), plus the framing the node owns.
var hopByHop = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Connection": true, "Te": true, "Trailer": true,
	"Transfer-Encoding": true, "Upgrade": true, "Content-Length": true, "Http2-Settings": true,
}

// GuestHeaderAllowed says whether a wasi-http guest's response header
// named name (any case) reaches the caller: not a hop-by-hop or framing
// header, not one of the node's own (Latent-*, Server-Timing), no
// Set-Cookie (a guest sets no cookies on the node's origin, which serves
// the operator's page too), and a valid token.
func GuestHeaderAllowed(name string) bool {
	if !ValidToken(name) {
		return false
	}
	c := http.CanonicalHeaderKey(name)
	return !hopByHop[c] && c != "Server-Timing" && c != "Set-Cookie" && c != "Set-Cookie2" &&
		!strings.HasPrefix(c, "Latent-") && !strings.HasPrefix(c, "Proxy-")
}

// GuestHeaderValueValid says whether a header value can be sent as is: no
// control character but horizontal tab, and no leading or trailing space.
func GuestHeaderValueValid(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return strings.TrimSpace(v) == v
}

// ValidToken reports whether s is an HTTP token (RFC 9110, 5.6.2): a
// valid header field name.
func ValidToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
