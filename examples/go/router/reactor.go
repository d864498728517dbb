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
	"os"

	"github.com/latent-node/latent-node/examples/go/wasienv"
)

// web is the reactor's entry: returning is exit status 0, a failure exits
// through os.Exit (WASI proc_exit), which also ends this instance.
//
//go:wasmexport web
func web() {
	// The CGI variables are this request's only if read now: os.Getenv
	// answers from the environment _initialize saw.
	if code := serve(wasienv.Lookup(), os.Stdin, os.Stdout); code != 0 {
		os.Exit(code)
	}
}
