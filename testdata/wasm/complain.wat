;; complain: writes "complaint: bad input\n" to stderr and exits with code 3
;; (a declared error with a stderr tail for the node to return).
;;
;; Build: wat2wasm complain.wat -o complain.wasm
(module
  (import "wasi_snapshot_preview1" "fd_write"
    (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit"
    (func $proc_exit (param i32)))

  (memory (export "memory") 1)
  (data (i32.const 64) "complaint: bad input\n")

  (func (export "_start")
    ;; iovec {ptr 64, len 21} at 0; bytes written at 8
    (i32.store (i32.const 0) (i32.const 64))
    (i32.store (i32.const 4) (i32.const 21))
    (drop (call $fd_write (i32.const 2) (i32.const 0) (i32.const 1) (i32.const 8)))
    (call $proc_exit (i32.const 3))))
