// Package testwasm gives tests access to the WebAssembly guest fixtures in
// testdata/wasm at the module root.
//
// Every fixture is a WASI preview1 command module (it exports "memory" and
// "_start" and imports only from "wasi_snapshot_preview1", except
// bad_import, which deliberately also imports env.host_log). The committed
// .wasm files are built from the .wat sources next to them with plain
// `wat2wasm X.wat -o X.wasm` (`make wasm`); see testdata/wasm/README.md for
// what each guest does and what an activation of it should report.
//
// The package is an ordinary (non-test) package so that tests in other
// packages can import it; it depends on package testing only for the
// testing.TB parameters of its helpers.
//
// BuildGoGuest additionally compiles a realistic Go program
// (testdata/wasm/goguest) for GOOS=wasip1 GOARCH=wasm, once per test
// process.
package testwasm
