package peerurl

import "testing"

func TestCheck(t *testing.T) {
	tests := []struct {
		name  string
		raw   string
		https bool
		ok    bool
	}{
		{"http", "http://10.0.0.5:8080", false, true},
		{"https", "https://node-1.internal:8443/", false, true},
		{"ipv6", "http://[::1]:8080", false, true},
		{"http refused with tls", "http://10.0.0.5:8080", true, false},
		{"https with tls", "https://10.0.0.5:8443", true, true},
		{"no port", "http://10.0.0.5", false, false},
		{"port 0", "http://10.0.0.5:0", false, false},
		{"port too large", "http://10.0.0.5:65536", false, false},
		{"empty port", "http://10.0.0.5:", false, false},
		{"userinfo", "http://user:pw@10.0.0.5:8080", false, false},
		{"path", "http://10.0.0.5:8080/api", false, false},
		{"escaped slash path", "http://10.0.0.5:8080/%2F", false, false},
		{"query", "http://169.254.169.254:80/latest/meta-data?", false, false},
		{"empty query", "http://10.0.0.5:8080/?", false, false},
		{"query only", "http://10.0.0.5:8080?x=1", false, false},
		{"fragment", "http://10.0.0.5:8080#x", false, false},
		{"other scheme", "ftp://10.0.0.5:21", false, false},
		{"no host", "http://:8080", false, false},
		{"opaque", "http:10.0.0.5:8080", false, false},
		{"garbage", "::", false, false},
		{"empty", "", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Check(tt.raw, tt.https)
			if have := err == nil; have != tt.ok {
				t.Fatalf("Check(%q, %v) = %v, want ok=%v", tt.raw, tt.https, err, tt.ok)
			}
		})
	}
}
