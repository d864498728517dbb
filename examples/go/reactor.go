//go:build reactor

// The reactor build of greet: the same function, exported as "greet" from a
// module the node initialises once (instance = "snapshot" or "reuse" in the
// manifest) and calls per activation:
//
//	GOOS=wasip1 GOARCH=wasm go build -tags reactor -buildmode=c-shared -o greet-reactor.wasm .
//
// _initialize runs the Go runtime's and the packages' initialisation, not
// main; the node then calls greet once per activation with that activation's
// stdin, stdout, stderr and environment.

package main

import (
	"io"
	"os"
	"strings"

	"github.com/latent-node/latent-node/examples/go/wasienv"
)

// greet is the reactor's entry: returning is exit status 0, a failure exits
// with run's status through os.Exit (WASI proc_exit), which also ends this
// instance.
//
//go:wasmexport greet
//lint:ignore U1000 called by the host, through the export
func greet() {
	// os.Stdin, os.Stdout and os.Stderr are unbuffered WASI descriptors:
	// each call reads and writes its own activation's streams. The
	// environment is read now (os.Getenv would answer from _initialize's).
	if code := run(os.Stdin, os.Stdout, os.Stderr, wasienv.Lookup()); code != 0 {
		os.Exit(code)
	}
}

// init runs in _initialize, so in the snapshot the node takes after it: one
// request answered to nowhere builds what the first request would otherwise
// build lazily (encoding/json's decoder and encoder for these types), once
// for all activations instead of in each (see router/reactor.go).
func init() {
	run(strings.NewReader(`{"name":"Ada"}`), io.Discard, io.Discard, func(string) string { return "" })
}
