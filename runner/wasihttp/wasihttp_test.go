package wasihttp

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/tetratelabs/wazero"

	"github.com/latent-node/latent-node/runner/internal/canon"
	"github.com/latent-node/latent-node/runner/internal/outbound"
)

// TestProvides: every 0.2.x release of an interface the host has links
// to it; another major or minor version, or an interface it lacks, does
// not.
func TestProvides(t *testing.T) {
	for instance, want := range map[string]bool{
		"wasi:http/types@0.2.0":             true,
		"wasi:http/types@0.2.10":            true,
		"wasi:io/streams@0.2.12":            true,
		"wasi:cli/terminal-stdout@0.2.3":    true,
		"wasi:filesystem/preopens@0.2.6":    true,
		"wasi:http/outgoing-handler@0.2.99": true,
		"wasi:http/types@0.3.0":             false,
		"wasi:http/types@1.0.0":             false,
		"wasi:http/types":                   false,
		"wasi:sockets/tcp@0.2.0":            false,
		"wasi:http/handler@0.2.0":           false,
		"example:other/types@0.2.0":         false,
	} {
		if got := Provides(instance); got != want {
			t.Errorf("Provides(%q) = %v, want %v", instance, got, want)
		}
	}
}

// TestCheckField: the header rules of fields.set and fields.append.
func TestCheckField(t *testing.T) {
	a := NewActivation(Request{}, nil, Limits{MaxFieldsBytes: 64})
	full := &fields{}
	for range maxFieldsEntries {
		full.entries = append(full.entries, field{name: "x"})
	}
	for _, tc := range []struct {
		name   string
		f      *fields
		header string
		value  string
		want   *string // nil: allowed
	}{
		{"ordinary", &fields{}, "x-a", "b", nil},
		{"tab in a value", &fields{}, "x-a", "b\tc", nil},
		{"immutable", &fields{immutable: true}, "x-a", "b", ptr("immutable")},
		{"not a token", &fields{}, "x a", "b", ptr("invalid-syntax")},
		{"empty name", &fields{}, "", "b", ptr("invalid-syntax")},
		{"newline in a value", &fields{}, "x-a", "b\r\nx-evil: 1", ptr("invalid-syntax")},
		{"DEL in a value", &fields{}, "x-a", "b\x7f", ptr("invalid-syntax")},
		{"hop-by-hop", &fields{}, "Connection", "close", ptr("forbidden")},
		{"over the byte bound", &fields{bytes: 60}, "x-a", "bcdef", ptr("invalid-syntax")},
		{"over the entry bound", full, "x-a", "b", ptr("invalid-syntax")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.f.checkField(a, tc.header, []byte(tc.value), len(tc.header)+len(tc.value))
			switch {
			case tc.want == nil && got != nil:
				t.Fatalf("refused: case %d", got.Index)
			case tc.want != nil && (got == nil || headerErrors[got.Index] != *tc.want):
				t.Fatalf("want %s, have %v", *tc.want, got)
			}
		})
	}
	// A clone is mutable and its own.
	f := &fields{entries: []field{{name: "a", value: []byte("1")}}, immutable: true, bytes: 2}
	c := f.clone()
	c.remove("A")
	if c.immutable || len(c.entries) != 0 || c.bytes != 0 || len(f.entries) != 1 || f.bytes != 2 {
		t.Fatalf("clone %+v of %+v", c, f)
	}
}

func ptr(s string) *string { return &s }

// headerErrors are the cases of header-error, by index.
var headerErrors = []string{"invalid-syntax", "forbidden", "immutable"}

// TestAnswer: what a set response becomes for the caller.
func TestAnswer(t *testing.T) {
	resp := func(status int, headers ...string) *outResponse {
		f := &fields{}
		for i := 0; i+1 < len(headers); i += 2 {
			f.entries = append(f.entries, field{name: headers[i], value: []byte(headers[i+1])})
		}
		return &outResponse{status: status, headers: f, body: []byte("body")}
	}
	for _, tc := range []struct {
		name      string
		set       bool
		setErr    error
		response  *outResponse
		malformed string   // "" answered
		headers   []string // the answer's header names
	}{
		{"no response", false, nil, nil, "without setting a response", nil},
		{"an error-code", true, errors.Wrap(ErrGuestError, "HTTP-internal-error"), nil, "answered with an error", nil},
		{"status 99", true, nil, resp(99), "not a final status", nil},
		{"status 600", true, nil, resp(600), "not a final status", nil},
		{"status 418 with headers", true, nil, resp(418, "x-a", "1", "Set-Cookie", "s=1", "Latent-Outcome", "success",
			"Server-Timing", "x", "Transfer-Encoding", "chunked", "x-b", " padded "), "", []string{"x-a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := NewActivation(Request{}, nil, Limits{})
			a.set, a.setErr, a.response = tc.set, tc.setErr, tc.response
			r, malformed, err := a.Answer()
			if tc.malformed != "" {
				if err == nil || !strings.Contains(malformed, tc.malformed) {
					t.Fatalf("want malformed %q, have %q, %v", tc.malformed, malformed, err)
				}
				return
			}
			if err != nil || r.Status != tc.response.status || string(r.Body) != "body" || !r.Raw {
				t.Fatalf("%+v %q %v", r, malformed, err)
			}
			var names []string
			for _, kv := range r.Header {
				names = append(names, kv[0])
			}
			if !slices.Equal(names, tc.headers) {
				t.Fatalf("headers %q, want %q", names, tc.headers)
			}
		})
	}
}

// TestFlatten_fixtures: every fixture component flattens into a core
// module whose imports are all host functions of exactly their types
// (with examples/js/app.wasm, componentize-js's output, when it was
// built); the one importing sockets and a core module are refused.
func TestFlatten_fixtures(t *testing.T) {
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer func() { _ = rt.Close(ctx) }()
	host, err := DefineHost(ctx, rt)
	if err != nil {
		t.Fatal(err)
	}
	paths, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "components", "*.wasm"))
	if len(paths) < 10 {
		t.Fatalf("%d fixtures", len(paths))
	}
	if _, err := os.Stat(filepath.Join("..", "..", "examples", "js", "app.wasm")); err == nil {
		paths = append(paths, filepath.Join("..", "..", "examples", "js", "app.wasm"))
	}
	for _, p := range paths {
		t.Run(filepath.Base(p), func(t *testing.T) {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			merged, err := Flatten(b)
			if filepath.Base(p) == "sockets.wasm" {
				if err == nil || !strings.Contains(err.Error(), "unsupported-import wasi:sockets/tcp@0.2.12") {
					t.Fatalf("want unsupported-import, have %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			cm, err := rt.CompileModule(ctx, merged)
			if err != nil {
				t.Fatalf("the merged module does not validate: %v", err)
			}
			for _, imp := range cm.ImportedFunctions() {
				module, name, _ := imp.Import()
				def, err := host.Func(module, name)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(def.ParamTypes(), imp.ParamTypes()) || !slices.Equal(def.ResultTypes(), imp.ResultTypes()) {
					t.Fatalf("%s#%s: types differ from the host's", module, name)
				}
			}
			if _, ok := cm.ExportedFunctions()[HandlerExport]; !ok {
				t.Fatalf("no %s", HandlerExport)
			}
		})
	}
	if _, err := Flatten([]byte("\x00asm\x01\x00\x00\x00")); err == nil {
		t.Fatal("a core module flattened")
	}
}

// countEnv is an Env that counts the fuel charged.
type countEnv struct{ charged uint64 }

func (e *countEnv) Charge(n uint64)      { e.charged += n }
func (e *countEnv) Log([]byte)           {}
func (e *countEnv) Random(p []byte)      {}
func (e *countEnv) Monotonic() uint64    { return 0 }
func (e *countEnv) Wall() time.Time      { return time.Time{} }
func (e *countEnv) SleepUntil(uint64)    {}
func (e *countEnv) Environ() [][2]string { return nil }
func (e *countEnv) Deadline() time.Time  { return time.Time{} }

// hostFunc is the implementation of module's function name.
func hostFunc(t *testing.T, module, name string) func(a *Activation, args []any) []any {
	t.Helper()
	for _, f := range registry[module] {
		if f.name == name {
			return f.impl
		}
	}
	t.Fatalf("no %s %s", module, name)
	return nil
}

// TestOutputStream_writes: write keeps to what check-write allowed;
// blocking-write-and-flush takes contents of any length (Rust handlers
// pass a whole response), bounded by the output limit; both charge fuel
// for the bytes; what a body keeps is charged to the budget, what the
// log takes costs nothing (the list is a view of guest memory).
func TestOutputStream_writes(t *testing.T) {
	write := hostFunc(t, modStreams, "[method]output-stream.write")
	blocking := hostFunc(t, modStreams, "[method]output-stream.blocking-write-and-flush")
	for _, tc := range []struct {
		name  string
		impl  func(a *Activation, args []any) []any
		n     int
		limit int
		want  error // nil: written
	}{
		{"write within check-write", write, maxWrite, 1 << 20, nil},
		{"write past check-write", write, maxWrite + 1, 1 << 20, canon.ErrTrap},
		{"blocking write of a whole response", blocking, 3*maxWrite + 17, 1 << 20, nil},
		{"blocking write past the output limit", blocking, 1<<20 + 1, 1 << 20, ErrOutputExceeded},
		{"blocking write to the log", blocking, 3*maxWrite + 17, -1, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := &countEnv{}
			a := NewActivation(Request{}, env, Limits{})
			resp := &outResponse{limit: tc.limit}
			stream := &outputStream{body: &outgoingBody{resp: resp}}
			if tc.limit < 0 {
				stream = &outputStream{} // stdout or stderr
			}
			h := a.add(resOutputStream, stream)
			start := a.budget
			var got error
			func() {
				defer func() {
					if r := recover(); r != nil {
						got = r.(error)
					}
				}()
				tc.impl(a, []any{h, bytes.Repeat([]byte{'x'}, tc.n)})
			}()
			if tc.want != nil {
				if !errors.Is(got, tc.want) {
					t.Fatalf("stopped with %v, want %v", got, tc.want)
				}
				return
			}
			if tc.limit < 0 {
				// The log keeps a tail: its bytes cost the budget nothing.
				if got != nil || a.budget != start {
					t.Fatalf("err %v, budget %d after a log write, want %d", got, a.budget, start)
				}
				return
			}
			if got != nil || len(resp.body) != tc.n || env.charged == 0 {
				t.Fatalf("err %v, %d bytes kept, %d charged", got, len(resp.body), env.charged)
			}
			// What a body keeps stays counted: many bodies cannot hold
			// more than the budget.
			if a.budget != start-int64(tc.n) {
				t.Fatalf("budget %d after the write, want %d", a.budget, start-int64(tc.n))
			}
		})
	}
}

// TestHandle_maxCalls: an activation gets at most MaxCalls futures, even
// when it asks for them all before waiting for any; the next requests are
// denied, and what is recorded stays bounded.
func TestHandle_maxCalls(t *testing.T) {
	handle := hostFunc(t, modOutgoing, "handle")
	sent := 0
	a := NewActivation(Request{}, &countEnv{}, Limits{MaxBodyBytes: 1 << 10, Outbound: func(*outbound.Request) (*outbound.Response, error) {
		sent++
		return &outbound.Response{Status: 200}, nil
	}})
	var got []*futureResponse
	for range 3 * MaxCalls {
		h := a.add(resOutgoingRequest, &outgoingRequest{headers: &fields{}})
		if res := handle(a, []any{h, none})[0].(canon.Case); res.Index == 0 {
			got = append(got, get[*futureResponse](a, res.Value, resFutureIncomingResponse))
		}
	}
	for _, f := range got { // waited for only now
		a.send(f)
	}
	if futures := len(got); futures != MaxCalls || sent != MaxCalls || len(a.Calls()) > 2*MaxCalls {
		t.Fatalf("%d futures, %d sent, %d recorded; want %d, %d, at most %d", futures, sent, len(a.Calls()), MaxCalls, MaxCalls, 2*MaxCalls)
	}
}
