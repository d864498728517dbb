//go:build reactor

// The reactor build of router: the same handler, exported as "web" from a
// module the node initialises once (instance = "snapshot" or "reuse" in the
// manifest) and calls per activation:
//
//	GOOS=wasip1 GOARCH=wasm go build -tags reactor -buildmode=c-shared -o router-reactor.wasm ./router
//
// _initialize runs the Go runtime's and the packages' initialisation, not
// main; the node then calls web once per request with that request's body
// on stdin and its CGI variables in the environment.

package main

import (
	"io"
	"os"
	"strings"

	"github.com/latent-node/latent-node/examples/go/wasienv"
)

// web is the reactor's entry: returning is exit status 0, a failure exits
// through os.Exit (WASI proc_exit), which also ends this instance.
//
//go:wasmexport web
//lint:ignore U1000 called by the host, through the export
func web() {
	// The CGI variables are this request's only if read now: os.Getenv
	// answers from the environment _initialize saw.
	if code := serve(wasienv.Lookup(), os.Stdin, os.Stdout); code != 0 {
		os.Exit(code)
	}
}

// init runs in _initialize, so in the snapshot the node takes after it: one
// request served to nowhere builds what the first request would otherwise
// build lazily (encoding/json's encoder for the answer, ...), once for all
// activations instead of in each. Measured with plain wazero: the first
// call after _initialize took 380-480 µs without it, 80-100 µs with it
// (later calls on the same instance 20-60 µs).
func init() {
	req := map[string]string{"REQUEST_METHOD": "GET", "PATH_INFO": "/hello", "QUERY_STRING": "name=Ada"}
	serve(func(k string) string { return req[k] }, strings.NewReader(""), io.Discard)
}
