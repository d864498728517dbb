package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestInvoke(t *testing.T) {
	var seen http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r.Header.Clone()
		if r.URL.EscapedPath() != "/v1/invoke/acme/images/thumb%20nail" {
			t.Errorf("path %q", r.URL.EscapedPath())
		}
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Latent-Activation-Id", "a1")
		w.Header().Set("Latent-Outcome", "success")
		w.Header().Set("Latent-Fuel-Used", "42")
		w.Header().Set("Latent-Queue-Wait-Ms", "3")
		w.Header().Set("Latent-Execution-Ms", "7")
		_, _ = w.Write(append([]byte("echo:"), body...))
	}))
	defer srv.Close()
	c, err := New(srv.URL, "lk_test")
	if err != nil {
		t.Fatal(err)
	}
	prio := 5
	res, err := c.Invoke(context.Background(), "acme", "images", "thumb nail", []byte("in"), InvokeOptions{
		RoutingKey: "user-1", Priority: &prio, Timeout: 2 * time.Second, Fuel: 1000, MemoryBytes: 65536, WallTime: time.Second,
		Metadata: map[string]string{"Team": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Output) != "echo:in" || res.FuelUsed != 42 || res.QueueWait != 3*time.Millisecond || res.ActivationID != "a1" {
		t.Fatalf("result %+v", res)
	}
	for k, want := range map[string]string{"Authorization": "Bearer lk_test", "Latent-Routing-Key": "user-1",
		"Latent-Priority": "5", "Latent-Timeout-Ms": "2000", "Latent-Budget": "fuel=1000, memory=65536, wall-ms=1000",
		"Latent-Meta-Team": "x"} {
		if seen.Get(k) != want {
			t.Errorf("%s: want %q, have %q", k, want, seen.Get(k))
		}
	}
}

func TestRetryAfter(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 2 {
			w.Header().Set("Content-Type", "application/problem+json")
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"status":429,"code":"resource-exhausted","reason":"capacity-exhausted","retryable":true}`))
			return
		}
		_, _ = w.Write([]byte("ok"))
	}))
	defer srv.Close()
	c, _ := New(srv.URL, "k")
	var waits []time.Duration
	c.sleep = func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }
	res, err := c.Invoke(context.Background(), "t", "s", "r", nil, InvokeOptions{})
	if err != nil || string(res.Output) != "ok" || len(waits) != 2 {
		t.Fatalf("res %v err %v waits %v", res, err, waits)
	}
	for _, w := range waits {
		if w < time.Second || w > 1200*time.Millisecond {
			t.Fatalf("wait %v outside Retry-After plus 20%% jitter", w)
		}
	}
	// The budget is bounded: a third refusal is returned.
	calls.Store(-10)
	waits = nil
	_, err = c.Invoke(context.Background(), "t", "s", "r", nil, InvokeOptions{})
	var p *Problem
	if !errors.As(err, &p) || p.Reason != "capacity-exhausted" || !p.Retryable || p.RetryAfter != time.Second || len(waits) != 2 {
		t.Fatalf("want the refusal after 2 retries, have %v (waits %v)", err, waits)
	}
}

func TestProblems(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/admission":
			_, _ = w.Write([]byte(`{"name":"acme"}`))
		case "/v1/deployments/acme/images":
			_, _ = w.Write([]byte(`{"release":"rel1-x","generation":3,"revisions":[{"name":"v1","id":"rev1-y"}]}`))
		default:
			if strings.HasPrefix(r.URL.Path, "/v1/artifacts/sha256:") {
				w.WriteHeader(http.StatusCreated)
				return
			}
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusBadGateway)
			_, _ = w.Write([]byte(`{"status":502,"outcome":"declared-error","exit_code":3,"retryable":false}`))
		}
	}))
	defer srv.Close()
	c, _ := New(srv.URL+"/", "k")
	_, err := c.Invoke(context.Background(), "t", "s", "r", nil, InvokeOptions{})
	var p *Problem
	if !errors.As(err, &p) || p.Status != 502 || *p.ExitCode != 3 || !strings.Contains(p.Error(), "exit=3") {
		t.Fatalf("problem: %v", err)
	}
	if raw, err := c.Admission(context.Background()); err != nil || string(raw) != `{"name":"acme"}` {
		t.Fatalf("admission: %s %v", raw, err)
	}
	d, err := c.UploadArtifact(context.Background(), []byte("wasm"))
	if err != nil || d != Digest([]byte("wasm")) {
		t.Fatalf("upload: %s %v", d, err)
	}
	dep, err := c.Deploy(context.Background(), "acme", "images", map[string]string{"tenant": "acme"})
	if err != nil || dep.Generation != 3 || dep.Revisions[0].ID != "rev1-y" {
		t.Fatalf("deploy: %+v %v", dep, err)
	}
	if _, err := New("ftp://x", "k"); err == nil {
		t.Fatal("non-http URL accepted")
	}
}

// TestErrors pins the messages of the client's own errors and that they keep
// their cause for errors.Is and errors.As.
func TestErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("not json"))
	}))
	defer srv.Close()
	c, err := New(srv.URL, "k")
	if err != nil {
		t.Fatal(err)
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	_, invokeErr := c.Invoke(canceled, "t", "s", "r", nil, InvokeOptions{})
	_, deployErr := c.Deploy(context.Background(), "t", "s", map[string]string{})
	_, encodeErr := c.Deploy(context.Background(), "t", "s", func() {})
	_, urlErr := New("ftp://x", "k")
	var syntax *json.SyntaxError
	var unsupported *json.UnsupportedTypeError
	tests := []struct {
		name   string
		err    error
		prefix string
		cause  func(error) bool
	}{
		{"transport", invokeErr, "client: POST /v1/invoke/t/s/r: ", func(e error) bool { return errors.Is(e, context.Canceled) }},
		{"decode", deployErr, "client: decode deployment: ", func(e error) bool { return errors.As(e, &syntax) }},
		{"encode", encodeErr, "client: encode manifest: ", func(e error) bool { return errors.As(e, &unsupported) }},
		{"url", urlErr, `client: "ftp://x" is not an http(s) URL`, func(e error) bool { return e != nil }},
		// Negative control: a refusal is a *Problem, not a wrapped cause.
		{"problem is not canceled", &Problem{Status: 503}, "latent-node: 503", func(e error) bool { return !errors.Is(e, context.Canceled) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err == nil || !strings.HasPrefix(tc.err.Error(), tc.prefix) {
				t.Fatalf("want an error starting %q, have %v", tc.prefix, tc.err)
			}
			if !tc.cause(tc.err) {
				t.Fatalf("cause lost: %v", tc.err)
			}
		})
	}
}
