package vocab

import (
	"net/netip"
	"strings"
	"testing"
)

// TestParseOutboundHost: Spin's syntax, its canonical form, and a refusal
// that says what is wrong for every malformed entry.
func TestParseOutboundHost(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{in: "https://api.example.com", want: "https://api.example.com"},
		{in: "HTTPS://API.Example.COM.", want: "https://api.example.com"},
		{in: "https://*.example.com:443", want: "https://*.example.com:443"},
		{in: "http://10.0.0.5:8080", want: "http://10.0.0.5:8080"},
		{in: "http://[::1]:8080", want: "http://[::1]:8080"},
		{in: "*://example.com:*", want: "*://example.com:*"},
		{in: "https://*", want: "https://*"},
		{in: "ftp://example.com", err: "scheme"},
		{in: "example.com", err: "SCHEME://HOST"},
		{in: "https://example.com/path", err: "no path"},
		{in: "https://user@example.com", err: "no path"},
		{in: "https://example.com:0", err: "port"},
		{in: "https://example.com:65536", err: "port"},
		{in: "https://example.com:08", err: "port"},
		{in: "https://example.com:", err: "empty port"},
		{in: "https://exa_mple.com", err: "not a DNS name"},
		{in: "https://a.*.example.com", err: "not a DNS name"},
		{in: "https://-a.example.com", err: "not a DNS name"},
		{in: "https://::1", err: "not a DNS name"},
		{in: "https://[::1", err: "closing ]"},
		{in: "https://[10.0.0.1]", err: "not an IPv6"},
		{in: "https://[::1]x", err: "only a port"},
		{in: "https://" + strings.Repeat("a", 250) + ".com", err: "longer than"},
	} {
		h, err := ParseOutboundHost(tc.in)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: error %v, want one about %q", tc.in, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v", tc.in, err)
		case tc.err == "" && h.String() != tc.want:
			t.Errorf("%q: %q, want %q", tc.in, h.String(), tc.want)
		}
	}
}

// TestOutboundHosts_matching: which requests each entry lets through, and
// which addresses count as listed literally.
func TestOutboundHosts_matching(t *testing.T) {
	parse := func(s string) OutboundHost {
		h, err := ParseOutboundHost(s)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	for _, tc := range []struct {
		entry, scheme, host string
		port                int
		want                bool
	}{
		{"https://api.example.com", "https", "api.example.com", 443, true},
		{"https://api.example.com", "http", "api.example.com", 80, false},
		{"https://api.example.com", "https", "api.example.com", 8443, false},
		{"https://api.example.com", "https", "evil.api.example.com", 443, false},
		{"https://*.example.com:443", "https", "a.b.example.com", 443, true},
		{"https://*.example.com:443", "https", "example.com", 443, false},
		{"https://*.example.com:443", "https", "badexample.com", 443, false},
		{"*://example.com", "http", "example.com", 80, true},
		{"*://example.com", "https", "example.com", 443, true},
		{"*://example.com", "https", "example.com", 80, false},
		{"http://example.com:*", "http", "example.com", 9999, true},
		{"http://10.0.0.5:8080", "http", "10.0.0.5", 8080, true},
		{"http://10.0.0.5:8080", "http", "10.0.0.6", 8080, false},
		{"https://*", "https", "anything.example", 443, true},
		{"https://*", "https", "127.0.0.1", 443, false}, // a wildcard never matches an IP literal
		{"http://[::1]:8080", "http", "::1", 8080, true},
	} {
		if got := (OutboundHosts{parse(tc.entry)}).Allows(tc.scheme, tc.host, tc.port); got != tc.want {
			t.Errorf("%s allows %s://%s:%d: %v, want %v", tc.entry, tc.scheme, tc.host, tc.port, got, tc.want)
		}
	}
	hs := OutboundHosts{parse("http://127.0.0.1:8080"), parse("https://10.0.0.5"), parse("https://*.example.com")}
	for _, tc := range []struct {
		addr string
		port int
		want bool
	}{
		{"127.0.0.1", 8080, true}, {"127.0.0.1", 8081, false}, {"10.0.0.5", 443, true}, {"10.0.0.5", 80, false},
		{"::ffff:127.0.0.1", 8080, true}, {"192.168.1.1", 443, false},
	} {
		if got := hs.ListsAddr(netip.MustParseAddr(tc.addr), tc.port); got != tc.want {
			t.Errorf("ListsAddr(%s, %d) = %v, want %v", tc.addr, tc.port, got, tc.want)
		}
	}
}

// TestDecodeManifest_outbound: allowed_outbound_hosts is parsed into the
// revision's spec, refused on a revision that is not wasi-http and past
// its bound, and part of the revision's identity.
func TestDecodeManifest_outbound(t *testing.T) {
	doc := func(abi, hosts string) string {
		return `{"tenant":"acme","service":"svc","revisions":[{"name":"v1","artifact":"sha256:` + strings.Repeat("ab", 32) +
			`","trust_class":"untrusted","abi":"` + abi + `","allowed_outbound_hosts":[` + hosts + `],
			"ceiling":{"cpu_fuel":1,"memory_bytes":"1MiB","wall_time":"1s"}}],
			"routes":[{"name":"r","targets":[{"revision":"v1","weight":1}]}]}`
	}
	spec := func(d string) (Spec, error) {
		m, err := DecodeManifest(strings.NewReader(d))
		if err != nil {
			return Spec{}, err
		}
		return NewSpec(m)
	}
	s, err := spec(doc("wasi-http", `"https://api.example.com","http://10.0.0.5:8080"`))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Revisions[0].Outbound.Strings(); len(got) != 2 || got[1] != "http://10.0.0.5:8080" {
		t.Fatalf("outbound %q", got)
	}
	other, err := spec(doc("wasi-http", `"https://api.example.com"`))
	if err != nil {
		t.Fatal(err)
	}
	none, err := spec(doc("wasi-http", ``))
	if err != nil {
		t.Fatal(err)
	}
	if s.RevisionID(0) == other.RevisionID(0) || other.RevisionID(0) == none.RevisionID(0) {
		t.Fatal("the allowed hosts are not part of the revision's identity")
	}
	for _, tc := range []struct{ abi, hosts, want string }{
		{"wagi", `"https://api.example.com"`, `only a revision with abi = "wasi-http"`},
		{"wasi-http", `"https://api.example.com/x"`, "allowed_outbound_hosts[0]"},
		{"wasi-http", strings.Repeat(`"https://a.example.com",`, MaxOutboundHosts) + `"https://b.example.com"`, "at most 32"},
	} {
		if _, err := spec(doc(tc.abi, tc.hosts)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s: %v, want %q", tc.abi, tc.hosts, err, tc.want)
		}
	}
}

// FuzzParseOutboundHost: an entry a tenant writes never panics the
// parser, and one it accepts has a canonical form that parses to the same
// entry and matches what the entry matches.
func FuzzParseOutboundHost(f *testing.F) {
	for _, s := range []string{"https://api.example.com", "https://*.example.com:443", "http://10.0.0.5:8080",
		"http://[::1]:8080", "*://example.com:*", "https://*", "ftp://x", "https://[::1", "https://a:0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, err := ParseOutboundHost(s)
		if err != nil {
			return
		}
		again, err := ParseOutboundHost(h.String())
		if err != nil || again != h {
			t.Fatalf("%q → %q → %+v, %v; want %+v", s, h.String(), again, err, h)
		}
		for _, scheme := range []string{"http", "https"} {
			for _, port := range []int{80, 443, 8080} {
				host := strings.TrimPrefix(h.Host, "*.")
				if h.Addr.IsValid() {
					host = h.Addr.String()
				}
				if h.Matches(scheme, host, port) != again.Matches(scheme, host, port) {
					t.Fatalf("%q and its canonical form disagree on %s://%s:%d", s, scheme, host, port)
				}
			}
		}
	})
}
