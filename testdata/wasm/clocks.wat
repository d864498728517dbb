;; clocks: reads the monotonic clock and its resolution and writes them as
;; two unsigned decimal numbers of nanoseconds, "<time> <resolution>\n".
;; Stdin is not read. Tests use it to check what a guest learns from the
;; monotonic clock.
;;
;; Build: wat2wasm clocks.wat -o clocks.wasm
;;
;; Exit: returns normally; proc_exit(1) if a clock call or the write fails.
;;
;; Memory layout: 0..7 iovec, 8..11 nwritten, 16..23 time, 24..31
;; resolution, 64..127 digits being formatted, 128..191 output line.
(module
  (import "wasi_snapshot_preview1" "clock_time_get"
    (func $clock_time_get (param i32 i64 i32) (result i32)))
  (import "wasi_snapshot_preview1" "clock_res_get"
    (func $clock_res_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write"
    (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit"
    (func $proc_exit (param i32)))

  (memory (export "memory") 1)

  ;; put writes v in decimal at out and returns the address after it.
  (func $put (param $v i64) (param $out i32) (result i32)
    (local $p i32)
    ;; digits right to left, ending at 128
    (local.set $p (i32.const 128))
    (loop $digit
      (local.set $p (i32.sub (local.get $p) (i32.const 1)))
      (i32.store8 (local.get $p)
        (i32.add (i32.const 48) (i32.wrap_i64 (i64.rem_u (local.get $v) (i64.const 10)))))
      (local.set $v (i64.div_u (local.get $v) (i64.const 10)))
      (br_if $digit (i64.ne (local.get $v) (i64.const 0))))
    ;; copy them to out, left to right
    (loop $copy
      (i32.store8 (local.get $out) (i32.load8_u (local.get $p)))
      (local.set $out (i32.add (local.get $out) (i32.const 1)))
      (local.set $p (i32.add (local.get $p) (i32.const 1)))
      (br_if $copy (i32.lt_u (local.get $p) (i32.const 128))))
    (local.get $out))

  (func (export "_start")
    (local $end i32)
    ;; clock id 1: monotonic
    (if (call $clock_time_get (i32.const 1) (i64.const 1) (i32.const 16))
      (then (call $proc_exit (i32.const 1)) (unreachable)))
    (if (call $clock_res_get (i32.const 1) (i32.const 24))
      (then (call $proc_exit (i32.const 1)) (unreachable)))
    (local.set $end (call $put (i64.load (i32.const 16)) (i32.const 128)))
    (i32.store8 (local.get $end) (i32.const 32))
    (local.set $end (call $put (i64.load (i32.const 24)) (i32.add (local.get $end) (i32.const 1))))
    (i32.store8 (local.get $end) (i32.const 10))
    (local.set $end (i32.add (local.get $end) (i32.const 1)))
    (i32.store (i32.const 0) (i32.const 128))
    (i32.store (i32.const 4) (i32.sub (local.get $end) (i32.const 128)))
    (if (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8))
      (then (call $proc_exit (i32.const 1)) (unreachable))))
)
