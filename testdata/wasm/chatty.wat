;; chatty: writes "chatty: one\nchatty: two\n" to stderr and "ok\n" to
;; stdout, then returns from _start (success with a stderr tail).
;;
;; Build: wat2wasm chatty.wat -o chatty.wasm
(module
  (import "wasi_snapshot_preview1" "fd_write"
    (func $fd_write (param i32 i32 i32 i32) (result i32)))

  (memory (export "memory") 1)
  (data (i32.const 64) "chatty: one\nchatty: two\n")
  (data (i32.const 128) "ok\n")

  (func (export "_start")
    ;; iovec {ptr 64, len 24} at 0; bytes written at 8
    (i32.store (i32.const 0) (i32.const 64))
    (i32.store (i32.const 4) (i32.const 24))
    (drop (call $fd_write (i32.const 2) (i32.const 0) (i32.const 1) (i32.const 8)))
    ;; iovec {ptr 128, len 3} at 16
    (i32.store (i32.const 16) (i32.const 128))
    (i32.store (i32.const 20) (i32.const 3))
    (drop (call $fd_write (i32.const 1) (i32.const 16) (i32.const 1) (i32.const 8)))))
