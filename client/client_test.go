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
	if string(res.Output) != "echo:in" || res.FuelUsed != 42 || res.QueueWait != 3*time.Millisecond || res.ActivationID != "a1" ||
		res.Status != 200 || res.Header.Get("Latent-Execution-Ms") != "7" {
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
			_, _ = w.Write([]byte(`{"status":502,"code":"execution-failed","reason":"declared-error","scope":"activation","outcome":"declared-error","exit_code":3,"retryable":false}`))
		}
	}))
	defer srv.Close()
	c, _ := New(srv.URL+"/", "k")
	_, err := c.Invoke(context.Background(), "t", "s", "r", nil, InvokeOptions{})
	var p *Problem
	if !errors.As(err, &p) || p.Status != 502 || *p.ExitCode != 3 || p.Error() != "latent-node: 502 execution-failed declared-error exit=3" {
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

func TestDeployments(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer k" {
			t.Errorf("authorization %q", r.Header.Get("Authorization"))
		}
		switch r.Method + " " + r.URL.EscapedPath() {
		case "GET /v1/deployments/acme/images":
			_, _ = w.Write([]byte(`{"tenant":"acme","service":"images","release":"rel1-x","generation":3,
				"revisions":[{"name":"v1","id":"rev1-a"},{"name":"v2","id":"rev1-b"}],
				"manifest":{"tenant":"acme","service":"images","revisions":[],
				"routes":[{"name":"thumb","function":"thumb","targets":[{"revision":"v1","weight":9},{"revision":"v2","weight":1}]}]}}`))
		case "GET /v1/deployments/acme":
			_, _ = w.Write([]byte(`{"tenant":"acme","generation":4,"services":[{"name":"images",
				"release":"rel1-x","generation":3,"revisions":[{"name":"v1","id":"rev1-a"}]}]}`))
		case "GET /v1/deployments/paged":
			// Three pages: a, b | c, d | e; a node whose next goes back
			// is refused (tenant "loop").
			page := map[string]string{"": `["a","b"],"next":"b"`, "b": `["c","d"],"next":"d"`, "d": `["e"]`}[r.URL.Query().Get("after")]
			names := strings.SplitN(page, "]", 2)
			var svcs []string
			for _, n := range strings.Split(strings.Trim(names[0], "["), ",") {
				svcs = append(svcs, `{"name":`+n+`,"release":"rel1-x","generation":1,"revisions":[]}`)
			}
			_, _ = w.Write([]byte(`{"tenant":"paged","generation":` + map[bool]string{true: "7", false: "8"}[r.URL.Query().Get("after") == ""] +
				`,"services":[` + strings.Join(svcs, ",") + `]` + names[1] + `}`))
		case "GET /v1/deployments/loop":
			_, _ = w.Write([]byte(`{"tenant":"loop","generation":1,"services":[],"next":"a"}`))
		case "DELETE /v1/deployments/acme/images":
			_, _ = w.Write([]byte(`{"generation":5}`))
		case "GET /v1/deployments/acme/a%2Fb":
			_, _ = w.Write([]byte(`not json`))
		default:
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"status":404,"code":"not-found","reason":"revision-not-available","retryable":false}`))
		}
	}))
	defer srv.Close()
	c, _ := New(srv.URL, "k")
	ctx := context.Background()
	t.Run("get", func(t *testing.T) {
		d, err := c.GetDeployment(ctx, "acme", "images")
		if err != nil || d.Service != "images" || d.Generation != 3 || len(d.Revisions) != 2 || d.Revisions[1].ID != "rev1-b" ||
			len(d.Routes) != 1 || d.Routes[0].Function != "thumb" || d.Routes[0].Targets[0].Weight != 9 ||
			!json.Valid(d.Manifest) {
			t.Fatalf("get: %+v %v", d, err)
		}
	})
	t.Run("list", func(t *testing.T) {
		l, err := c.ListDeployments(ctx, "acme")
		if err != nil || l.Tenant != "acme" || l.Generation != 4 || len(l.Services) != 1 || l.Services[0].Name != "images" ||
			l.Services[0].Release != "rel1-x" {
			t.Fatalf("list: %+v %v", l, err)
		}
	})
	t.Run("list follows pages", func(t *testing.T) {
		l, err := c.ListDeployments(ctx, "paged")
		var names []string
		for _, s := range l.Services {
			names = append(names, s.Name)
		}
		if err != nil || strings.Join(names, ",") != "a,b,c,d,e" || l.Generation != 7 || l.Next != "" {
			t.Fatalf("list: %v %+v %v", names, l, err)
		}
		p, err := c.ListDeploymentsPage(ctx, "paged", "b", 2)
		if err != nil || len(p.Services) != 2 || p.Next != "d" {
			t.Fatalf("page: %+v %v", p, err)
		}
		if _, err := c.ListDeployments(ctx, "loop"); err == nil || !strings.Contains(err.Error(), "does not follow") {
			t.Fatalf("a next that does not advance: %v", err)
		}
	})
	t.Run("delete", func(t *testing.T) {
		if gen, err := c.DeleteDeployment(ctx, "acme", "images"); err != nil || gen != 5 {
			t.Fatalf("delete: %d %v", gen, err)
		}
	})
	t.Run("unknown service is a problem", func(t *testing.T) {
		_, err := c.GetDeployment(ctx, "acme", "nope")
		var p *Problem
		if !errors.As(err, &p) || p.Status != 404 || p.Reason != "revision-not-available" || p.Header == nil {
			t.Fatalf("get unknown: %v", err)
		}
		if _, err := c.DeleteDeployment(ctx, "acme", "nope"); !errors.As(err, &p) || p.Status != 404 {
			t.Fatalf("delete unknown: %v", err)
		}
	})
	t.Run("undecodable answer", func(t *testing.T) {
		var syntax *json.SyntaxError
		if _, err := c.GetDeployment(ctx, "acme", "a/b"); !errors.As(err, &syntax) ||
			!strings.HasPrefix(err.Error(), "client: decode deployment: ") {
			t.Fatalf("want a decode error, have %v", err)
		}
	})
}

func TestNoKey(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		_, _ = w.Write([]byte(`{"generation":1}`))
	}))
	defer srv.Close()
	for _, key := range []string{"", "k"} {
		c, err := New(srv.URL, key)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.DeleteDeployment(context.Background(), "t", "s")
		if key == "" {
			if !errors.Is(err, ErrNoKey) || !strings.Contains(err.Error(), "client.New") || calls.Load() != 0 {
				t.Fatalf("no key: want ErrNoKey without a request, have %v after %d requests", err, calls.Load())
			}
			continue
		}
		// Negative control: with a key the request is sent.
		if err != nil || calls.Load() != 1 {
			t.Fatalf("with a key: %v after %d requests", err, calls.Load())
		}
	}
}

// TestInvoke_http: an invocation of an HTTP function with its method, path
// suffix, query and headers; the guest's own non-2xx answer is a Result, a
// refusal with the same status a *Problem.
func TestInvoke_http(t *testing.T) {
	var seen *http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r.Clone(context.Background())
		if strings.HasSuffix(r.URL.Path, "/refused") {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"status":404,"code":"admission-rejected","reason":"route-not-found"}`))
			return
		}
		w.Header().Set("Latent-Outcome", "success")
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("X-Item", "none")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte("no such item\n"))
	}))
	defer srv.Close()
	c, err := New(srv.URL, "lk_test")
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Invoke(context.Background(), "acme", "shop", "items", nil, InvokeOptions{Method: http.MethodGet,
		PathSuffix: "a b/7", Query: "color=red", Priority: new(int),
		Header: http.Header{"Accept": {"text/plain"}, "Content-Type": {"application/json"}, "Latent-Priority": {"9"}, "Authorization": {"Bearer other"}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != http.StatusNotFound || string(res.Output) != "no such item\n" || res.Header.Get("X-Item") != "none" {
		t.Errorf("result %d %q %v", res.Status, res.Output, res.Header)
	}
	if seen.Method != http.MethodGet || seen.URL.EscapedPath() != "/v1/invoke/acme/shop/items/a%20b/7" || seen.URL.RawQuery != "color=red" {
		t.Errorf("request %s %s ? %s", seen.Method, seen.URL.EscapedPath(), seen.URL.RawQuery)
	}
	for k, want := range map[string]string{"Accept": "text/plain", "Content-Type": "application/json", "Latent-Priority": "0", "Authorization": "Bearer lk_test"} {
		if got := seen.Header.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	// Negative control: a problem document with the same status is a refusal.
	_, err = c.Invoke(context.Background(), "acme", "shop", "refused", nil, InvokeOptions{})
	var p *Problem
	if !errors.As(err, &p) || p.Status != http.StatusNotFound || p.Reason != "route-not-found" {
		t.Errorf("refusal: %v", err)
	}
	if seen.Method != http.MethodPost || seen.Header.Get("Content-Type") != "application/octet-stream" {
		t.Errorf("default request %s %q", seen.Method, seen.Header.Get("Content-Type"))
	}
}

// TestReadyNode: the ready, fresh member with the highest generation is
// picked; none when no member is both.
func TestReadyNode(t *testing.T) {
	nodes := []Node{
		{ID: "a", AdvertiseURL: "http://a", Generation: 9, Fresh: false, Ready: true},
		{ID: "b", AdvertiseURL: "http://b", Generation: 7, Fresh: true, Ready: true},
		{ID: "c", AdvertiseURL: "http://c", Generation: 8, Fresh: true, Ready: true},
		{ID: "d", AdvertiseURL: "http://d", Generation: 10, Fresh: true, Ready: false},
	}
	if got := ReadyNode(nodes); got != "http://c" {
		t.Fatalf("picked %q, want http://c", got)
	}
	if got := ReadyNode(nodes[:1]); got != "" {
		t.Fatalf("picked %q from a stale member only", got)
	}
}
