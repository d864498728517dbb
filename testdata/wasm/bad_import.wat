;; bad_import: an otherwise ordinary WASI command that also imports a
;; non-WASI host function, env.host_log(ptr, len), and calls it before
;; writing the same message to stdout. A deploy-time inspector must reject it,
;; naming env.host_log; a runtime without an "env" module fails to
;; instantiate it.
;;
;; Build: wat2wasm bad_import.wat -o bad_import.wasm
;;
;; Memory layout: 0..11 WASI iovec + result slot, 256.. message.
(module
  (import "env" "host_log" (func $host_log (param i32 i32)))
  (import "wasi_snapshot_preview1" "fd_write"
    (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit"
    (func $proc_exit (param i32)))

  (memory (export "memory") 1)

  (data (i32.const 256) "hello from bad_import\n")

  ;; write_all writes len bytes at ptr to fd, retrying on partial writes.
  ;; Returns 0 or the WASI errno of the failed write (EIO=29 if the host
  ;; reports a zero-byte write for a non-empty buffer, to avoid spinning).
  ;; Uses the iovec at 0..7 and the result slot at 8..11.
  (func $write_all (param $fd i32) (param $ptr i32) (param $len i32) (result i32)
    (local $errno i32)
    (local $n i32)
    (block $done
      (loop $more
        (br_if $done (i32.eqz (local.get $len)))
        (i32.store (i32.const 0) (local.get $ptr))
        (i32.store (i32.const 4) (local.get $len))
        (local.set $errno
          (call $fd_write (local.get $fd) (i32.const 0) (i32.const 1) (i32.const 8)))
        (if (local.get $errno) (then (return (local.get $errno))))
        (local.set $n (i32.load (i32.const 8)))
        (if (i32.eqz (local.get $n)) (then (return (i32.const 29))))
        (local.set $ptr (i32.add (local.get $ptr) (local.get $n)))
        (local.set $len (i32.sub (local.get $len) (local.get $n)))
        (br $more)))
    (i32.const 0))

  (func (export "_start")
    (call $host_log (i32.const 256) (i32.const 22))
    (if (call $write_all (i32.const 1) (i32.const 256) (i32.const 22))
      (then (call $proc_exit (i32.const 1)) (unreachable))))
)
