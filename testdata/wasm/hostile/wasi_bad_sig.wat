;; wasi_bad_sig: imports wasi_snapshot_preview1.fd_write with the wrong type,
;; (i32) -> (i32) instead of (i32, i32, i32, i32) -> (i32). The runner
;; refuses it at deploy, naming the import and both types.
;;
;; Build: wat2wasm wasi_bad_sig.wat -o wasi_bad_sig.wasm
(module
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "_start")
    (drop (call $fd_write (i32.const 0)))))
