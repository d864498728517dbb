package main

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/client"
)

func TestTerminalSafe(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"plain", "complaint: bad input", "complaint: bad input"},
		{"tab and unicode kept", "a\tb héllo 世界", "a\tb héllo 世界"},
		{"CSI sequence", "\x1b[2J\x1b]0;owned\x07", `\x1b[2J\x1b]0;owned\a`},
		{"carriage return", "ok\rfake", `ok\rfake`},
		{"DEL and C1 CSI", "a\x7fb\u009b31m", `a\x7fb\u009b31m`},
		{"bidi override", "abc\u202edcba", `abc\u202edcba`},
		{"invalid UTF-8", "a\xffb\xc2", `a\xffb\xc2`},
		{"NUL", "a\x00b", `a\x00b`},
		{"replacement character itself", "a\ufffdb", `a\ufffdb`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if have := terminalSafe(tt.in); have != tt.want {
				t.Fatalf("terminalSafe(%q) = %q, want %q", tt.in, have, tt.want)
			}
		})
	}
}

// TestPrintVerbose_guestText: what a guest controls reaches the terminal
// escaped (before, printVerbose and invoke -v wrote it raw).
func TestPrintVerbose_guestText(t *testing.T) {
	var w bytes.Buffer
	h := http.Header{"Latent-Outcome": {"declared-error"}}
	p := &client.Problem{Status: 502, Code: "guest-failed", Detail: "bad\x1b]8;;http://evil\x07",
		Stderr: "line one\n\x1b[2J\x1b[31mfake prompt $ \rrm -rf\n"}
	printVerbose(&w, 502, h, p)
	printError(&w, p)
	out := w.String()
	if strings.ContainsAny(out, "\x1b\x07\r") {
		t.Fatalf("raw control characters printed: %q", out)
	}
	for _, want := range []string{"| line one\n", `| \x1b[2J\x1b[31mfake prompt $ \rrm -rf` + "\n", `detail: bad\x1b]8;;http://evil\a`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	var plain bytes.Buffer
	printError(&plain, errors.New("latent-node: 404 service-not-found"))
	if plain.String() != "latent-node: 404 service-not-found\n" {
		t.Errorf("plain error printed as %q", plain.String())
	}
}
