;; flood: fills a 64 KiB buffer with lines of 'x' (63 x's + "\n") and writes
;; it to stdout in an endless loop. When fd_write reports an error it calls
;; proc_exit(1); it never returns from _start on its own.
;;
;; Build: wat2wasm flood.wat -o flood.wasm
;;
;; Memory layout: 0..11 WASI iovec + result slot, 65536..131071 output buffer.
(module
  (import "wasi_snapshot_preview1" "fd_write"
    (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit"
    (func $proc_exit (param i32)))

  (memory (export "memory") 2)

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
    (local $i i32)
    (loop $fill
      (i32.store8 (i32.add (i32.const 65536) (local.get $i))
        (select (i32.const 10) (i32.const 120)
          (i32.eq (i32.and (local.get $i) (i32.const 63)) (i32.const 63))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $fill (i32.lt_u (local.get $i) (i32.const 65536))))
    (loop $forever
      (if (call $write_all (i32.const 1) (i32.const 65536) (i32.const 65536))
        (then (call $proc_exit (i32.const 1)) (unreachable)))
      (br $forever)))
)
