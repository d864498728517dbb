//go:build wasip1

// Package wasienv reads the WASI environment at the moment it is called.
//
// A Go command reads its environment once, when it starts, and so does a Go
// reactor (GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared): os.Getenv
// and os.Environ answer from the copy made by _initialize. The node hands
// every activation of a reactor its own environment (LATENT_ACTIVATION_ID,
// and for the WAGI ABI the CGI variables REQUEST_METHOD, PATH_INFO, ...),
// which only environ_get called during the activation sees: an exported
// function calls Environ or Getenv instead of os.Getenv.
package wasienv

import (
	"strings"
	"unsafe"
)

//go:wasmimport wasi_snapshot_preview1 environ_sizes_get
//go:noescape
func environSizesGet(count, size unsafe.Pointer) uint32

//go:wasmimport wasi_snapshot_preview1 environ_get
//go:noescape
func environGet(environ, buf unsafe.Pointer) uint32

// Environ returns the environment as "KEY=value" strings, read from the
// host now. It returns nil if the host refuses.
func Environ() []string {
	var count, size uint32
	if environSizesGet(unsafe.Pointer(&count), unsafe.Pointer(&size)) != 0 || count == 0 {
		return nil
	}
	// environ_get writes count 32-bit pointers into the first array and the
	// NUL-terminated strings they point to into buf, one after the other.
	ptrs := make([]uint32, count)
	buf := make([]byte, size)
	if environGet(unsafe.Pointer(&ptrs[0]), unsafe.Pointer(&buf[0])) != 0 {
		return nil
	}
	vars := strings.Split(strings.TrimSuffix(string(buf), "\x00"), "\x00")
	if uint32(len(vars)) > count {
		vars = vars[:count]
	}
	return vars
}

// Lookup returns a snapshot of the environment now, as a function like
// os.Getenv: one call to the host, then lookups in the copy.
func Lookup() func(string) string {
	env := map[string]string{}
	for _, kv := range Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if _, seen := env[k]; !seen {
			env[k] = v
		}
	}
	return func(key string) string { return env[key] }
}
