// Package browsertest drives the status page in headless Chromium for the
// node's and e2e's tests: it opens a page, records what the console and
// the browser's log say and every request that leaves the page's origin,
// and polls, evaluates and signs in. A test without a browser on PATH is
// skipped.
package browsertest

import (
	"context"
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// Page is one tab on a page of origin.
type Page struct {
	// Ctx is the tab's context, bounded by Open's timeout, for chromedp
	// calls of the test's own.
	Ctx context.Context

	mu       sync.Mutex
	messages []string // the console, exceptions and the browser's log
	foreign  []string // requests outside origin
	seen     chan struct{}
}

// Open starts a headless Chromium (skipping t when there is none), opens
// url in a tab of width×height and returns it; everything ends when the
// test does or after timeout.
func Open(t *testing.T, origin, url string, width, height int, timeout time.Duration) *Page {
	t.Helper()
	exe := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			exe = p
			break
		}
	}
	if exe == "" {
		t.Skip("no chromium, chromium-browser or google-chrome on PATH")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(width, height))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	p := &Page{seen: make(chan struct{}, 64)}
	// The listener runs in the tab's read loop: it only records.
	if err := chromedp.Listen(ctx, func(ev any) {
		p.mu.Lock()
		defer p.mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			var parts []string
			for _, a := range e.Args {
				parts = append(parts, string(a.Value))
			}
			p.messages = append(p.messages, string(e.Type)+": "+strings.Join(parts, " "))
			select {
			case p.seen <- struct{}{}:
			default:
			}
		case *runtime.EventExceptionThrown:
			p.messages = append(p.messages, "exception: "+e.ExceptionDetails.Text)
		case *cdplog.EventEntryAdded: // the browser's log: failed requests among them
			p.messages = append(p.messages, "log: "+e.Entry.Text)
		case *network.EventRequestWillBeSent:
			if !strings.HasPrefix(e.Request.URL, origin+"/") {
				p.foreign = append(p.foreign, e.Request.URL)
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	deadline, stop := context.WithTimeout(ctx, timeout)
	t.Cleanup(stop)
	p.Ctx = deadline
	if _, err := chromedp.Call(deadline, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(deadline, cdplog.Enable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(deadline, chromedp.Navigate(url)); err != nil {
		t.Fatal(err)
	}
	return p
}

// Poll waits until the JavaScript expression expr is true, failing t
// with what and the console so far when it never is.
func (p *Page) Poll(t *testing.T, what, expr string) {
	t.Helper()
	if _, err := chromedp.Run(p.Ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(20*time.Millisecond))); err != nil {
		t.Fatalf("%s: %v (console %q)", what, err, p.Messages())
	}
}

// Eval is the value of the JavaScript expression expr on p.
func Eval[T any](t *testing.T, p *Page, expr string) T {
	t.Helper()
	v, err := chromedp.Run(p.Ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// SignIn submits key in the status page's sign-in form.
func (p *Page) SignIn(t *testing.T, key string) {
	t.Helper()
	k, _ := json.Marshal(key)
	Eval[bool](t, p, `(() => { document.getElementById("key").value = `+string(k)+
		`; document.getElementById("signin").requestSubmit(); return true; })()`)
}

// Messages is what the console and the browser's log said so far.
func (p *Page) Messages() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.messages)
}

// Foreign is the requests so far to anywhere but the page's origin.
func (p *Page) Foreign() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.foreign)
}

// Seen receives (without blocking the browser) after each console call.
func (p *Page) Seen() <-chan struct{} { return p.seen }
