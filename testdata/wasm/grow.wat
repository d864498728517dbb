;; grow: calls memory.grow by one page until it fails (returns -1), then
;; prints the number of successful grows as decimal + "\n" and returns.
;; The memory has min 1 page and NO maximum, so the host's memory cap is what
;; stops it: with a 16-page cap it prints 15. Do not run it uncapped (it would
;; try to grow to 4 GiB).
;;
;; Build: wat2wasm grow.wat -o grow.wasm
;;
;; Exit: returns normally; proc_exit(1) if writing the result fails.
;;
;; Memory layout: 0..11 WASI iovec + result slot, 64..95 number formatting.
(module
  (import "wasi_snapshot_preview1" "fd_write"
    (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit"
    (func $proc_exit (param i32)))

  (memory (export "memory") 1)

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

  ;; print_u64 writes v as unsigned decimal followed by "\n" to stdout, using
  ;; the scratch buffer at 64..95. Returns 0 or the errno from write_all.
  (func $print_u64 (param $v i64) (result i32)
    (local $p i32)
    (i32.store8 (i32.const 94) (i32.const 10))
    (local.set $p (i32.const 94))
    (loop $digit
      (local.set $p (i32.sub (local.get $p) (i32.const 1)))
      (i64.store8 (local.get $p)
        (i64.add (i64.const 48) (i64.rem_u (local.get $v) (i64.const 10))))
      (local.set $v (i64.div_u (local.get $v) (i64.const 10)))
      (br_if $digit (i64.ne (local.get $v) (i64.const 0))))
    (call $write_all (i32.const 1) (local.get $p) (i32.sub (i32.const 95) (local.get $p))))

  (func (export "_start")
    (local $grows i32)
    (block $full
      (loop $grow
        (br_if $full (i32.eq (memory.grow (i32.const 1)) (i32.const -1)))
        (local.set $grows (i32.add (local.get $grows) (i32.const 1)))
        (br $grow)))
    (if (call $print_u64 (i64.extend_i32_u (local.get $grows)))
      (then (call $proc_exit (i32.const 1)) (unreachable))))
)
