package outbound

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/vocab"
)

func hostsOf(t *testing.T, entries ...string) vocab.OutboundHosts {
	t.Helper()
	var hs vocab.OutboundHosts
	for _, e := range entries {
		h, err := vocab.ParseOutboundHost(e)
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	return hs
}

// TestDo: what is listed answers; what is not, a loopback address reached
// by a name, the node's own port (even listed) and a redirect's target
// are not reached; bounds and deadlines end a request with their error.
func TestDo(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/big":
			_, _ = w.Write(make([]byte, 2048))
		case "/redirect":
			http.Redirect(w, r, "http://169.254.169.254/latest", http.StatusFound)
		case "/stall":
			<-release
		default:
			w.Header().Set("X-Seen", r.Method+" "+r.URL.RequestURI()+" "+r.Header.Get("X-Guest"))
			_, _ = w.Write([]byte("hello"))
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // before srv.Close: it waits for the stalled handler
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	authority := "127.0.0.1:" + strconv.Itoa(port)
	rebind := "rebind.test:" + strconv.Itoa(port)
	c := New(nil).WithLookup(func(_ context.Context, host string) ([]netip.Addr, error) {
		if host == "rebind.test" {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		}
		return nil, errors.New("no such host")
	})
	listed := hostsOf(t, "http://"+authority, "http://rebind.test:*", "http://nowhere.test")
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		c         *Client
		hosts     vocab.OutboundHosts
		authority string
		path      string
		maxBody   int
		want      error // nil: answered
	}{
		{"listed literally", c, listed, authority, "/x?q=1", 1 << 10, nil},
		{"not listed", c, hostsOf(t, "http://127.0.0.2:1"), authority, "/", 1 << 10, ErrDenied},
		{"no list", c, nil, authority, "/", 1 << 10, ErrDenied},
		{"a name that resolves to loopback", c, hostsOf(t, "http://rebind.test:*"), rebind, "/", 1 << 10, ErrDenied},
		{"a name that does not resolve", c, listed, "nowhere.test", "/", 1 << 10, ErrDNS},
		{"the node's own port, listed", New([]netip.AddrPort{netip.MustParseAddrPort(authority)}), listed, authority, "/", 1 << 10, ErrDenied},
		{"the node on every address", New([]netip.AddrPort{netip.AddrPortFrom(netip.IPv4Unspecified(), uint16(port))}), listed, authority, "/", 1 << 10, ErrDenied},
		{"a body past the bound", c, listed, authority, "/big", 1 << 10, ErrTooLarge},
		{"0.0.0.0, listed (it is this host's loopback)", c, hostsOf(t, "http://0.0.0.0:*", "http://[::]:*"), "0.0.0.0:" + strconv.Itoa(port), "/", 1 << 10, ErrDenied},
		{"::ffff:0.0.0.0, listed", c, hostsOf(t, "http://0.0.0.0:*"), "[::ffff:0.0.0.0]:" + strconv.Itoa(port), "/", 1 << 10, ErrDenied},
		{"a scheme not allowed", c, listed, authority, "/", 1 << 10, ErrDenied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scheme := "http"
			if tc.name == "a scheme not allowed" {
				scheme = "https"
			}
			resp, err := tc.c.Do(ctx, tc.hosts, &Request{Method: "POST", Scheme: scheme, Authority: tc.authority, PathWithQuery: tc.path,
				Header: [][2]string{{"x-guest", "g"}}, Body: []byte("b")}, tc.maxBody)
			if tc.want != nil {
				if !errors.Is(err, tc.want) {
					t.Fatalf("err %v, want %v", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			seen := ""
			for _, kv := range resp.Header {
				if kv[0] == "x-seen" {
					seen = kv[1]
				}
			}
			if resp.Status != 200 || string(resp.Body) != "hello" || seen != "POST /x?q=1 g" {
				t.Fatalf("%d %q, seen %q", resp.Status, resp.Body, seen)
			}
		})
	}
	// A redirect is the guest's to follow (or not): the client does not.
	resp, err := c.Do(ctx, listed, &Request{Method: "GET", Scheme: "http", Authority: authority, PathWithQuery: "/redirect"}, 1<<10)
	if err != nil || resp.Status != http.StatusFound {
		t.Fatalf("redirect: %v %+v", err, resp)
	}
	// The activation's deadline bounds a request that does not answer.
	dctx, cancel := context.WithDeadline(ctx, time.Now().Add(50*time.Millisecond))
	defer cancel()
	if _, err := c.Do(dctx, listed, &Request{Method: "GET", Scheme: "http", Authority: authority, PathWithQuery: "/stall"}, 1<<10); !errors.Is(err, ErrTimeout) {
		t.Fatalf("stall: %v, want ErrTimeout", err)
	}
}

// TestDo_dialDeadline: net/http dials without the request's deadline;
// the client gives its lookup and connect the activation's deadline
// anyway, so neither outlives the activation.
func TestDo_dialDeadline(t *testing.T) {
	// net/http's dial runs on its own goroutine, which may still be
	// unwinding when Do returns: the lookup reports through a channel.
	deadline := make(chan bool, 1)
	c := New(nil).WithLookup(func(ctx context.Context, host string) ([]netip.Addr, error) {
		_, ok := ctx.Deadline()
		deadline <- ok
		<-ctx.Done() // a resolver that never answers
		return nil, ctx.Err()
	})
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(50*time.Millisecond))
	defer cancel()
	_, err := c.Do(ctx, hostsOf(t, "http://slow.test"), &Request{Method: "GET", Scheme: "http", Authority: "slow.test"}, 1<<10)
	var sawDeadline bool
	select {
	case sawDeadline = <-deadline:
	case <-time.After(10 * time.Second):
		t.Fatal("the lookup was never called")
	}
	if err == nil || !sawDeadline {
		t.Fatalf("err %v, the lookup saw a deadline: %v", err, sawDeadline)
	}
}

// TestPublic: the addresses only a literal entry reaches.
func TestPublic(t *testing.T) {
	for addr, want := range map[string]bool{
		"8.8.8.8": true, "2606:4700::1111": true, "127.0.0.1": false, "10.1.2.3": false, "172.16.0.1": false,
		"192.168.0.1": false, "169.254.169.254": false, "100.64.0.1": false, "0.0.0.0": false, "::1": false,
		"fe80::1": false, "fc00::1": false, "::ffff:127.0.0.1": false, "224.0.0.1": false, "255.255.255.255": false,
		"198.18.0.1": false, "64:ff9b::7f00:1": false,
	} {
		if got := Public(netip.MustParseAddr(addr)); got != want {
			t.Errorf("Public(%s) = %v, want %v", addr, got, want)
		}
	}
	if !strings.Contains(ErrDenied.Error(), "denied") {
		t.Fatal(ErrDenied)
	}
}
