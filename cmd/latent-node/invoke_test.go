package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/latent-node/latent-node/internal/testwasm"
)

// TestInvoke_http invokes a WAGI revision (the cgienv guest, which answers
// 201 with its CGI environment and body) with a method, a path suffix, a
// query, headers and a body from -d or stdin; -v prints the guest's status
// and headers.
func TestInvoke_http(t *testing.T) {
	url, key := startDemoNode(t)
	t.Setenv(keyEnv, key)
	manifest := filepath.Join(t.TempDir(), "release.toml")
	if err := os.WriteFile(manifest, []byte(`tenant = "demo"
service = "cgi"

[[revisions]]
name = "v1"
module = "`+testwasm.Path("cgienv")+`"
abi = "wagi"
trust_class = "untrusted"
ceiling = { cpu_fuel = 10000000, memory_bytes = "4MiB", wall_time = "2s" }

[[routes]]
name = "run"
targets = [{ revision = "v1", weight = 1 }]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	runCLI("", "deploy", "--node", url, manifest).want(t, 0, nil, nil)

	tests := []struct {
		name, stdin    string
		args           []string
		code           int
		stdout, stderr []string
	}{
		{"method, suffix, query, headers, -d", "ignored",
			[]string{"-v", "-X", "put", "-H", "X-Trace-Me: yes", "-H", "Content-Type: text/csv", "-d", "a,b", "demo/cgi/run/items/7?color=red"}, 0,
			[]string{`(?m)^REQUEST_METHOD=PUT$`, `(?m)^PATH_INFO=/items/7$`, `(?m)^QUERY_STRING=color=red$`,
				`(?m)^HTTP_X_TRACE_ME=yes$`, `(?m)^CONTENT_TYPE=text/csv$`, `(?m)^CONTENT_LENGTH=3$`, `\na,b$`},
			[]string{`^< 201 Created\n`, `\n< Latent-Activation-Id: [0-9a-f]{32}\n`, `\n< Latent-Outcome: success\n`,
				`\n< Latent-Fuel-Used: [1-9]\d*\n`, `\n< Content-Type: text/plain\n`, `\n< X-Guest: cgienv\n`}},
		{"default POST, body from stdin", "from stdin", []string{"demo/cgi/run"}, 0,
			[]string{`(?m)^REQUEST_METHOD=POST$`, `(?m)^PATH_INFO=$`, `\nfrom stdin$`}, []string{`^$`}},
		{"GET reads no stdin", "not read", []string{"-X", "GET", "demo/cgi/run/"}, 0,
			[]string{`(?m)^REQUEST_METHOD=GET$`, `(?m)^CONTENT_LENGTH=0$`}, []string{`^$`}},
		// Negative control: a stdio revision refuses another method.
		{"stdio revision refuses PUT", "ada", []string{"-v", "-X", "PUT", "demo/hello/greet"}, 1,
			[]string{`^$`}, []string{`^< 405 Method Not Allowed\n`, `\nlatent-node: 405 `}},
		{"bad header flag", "", []string{"-H", "no colon", "demo/cgi/run"}, 2, nil, []string{`want 'Name: value'`}},
		{"bad target", "", []string{"demo/cgi"}, 2, nil, []string{`TENANT/SERVICE/ROUTE\[/PATH\]`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			runCLI(tc.stdin, append([]string{"invoke", "--node", url}, tc.args...)...).want(t, tc.code, tc.stdout, tc.stderr)
		})
	}
}
