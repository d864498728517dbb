;; random: two random_get calls of 16 bytes each, then writes the 32 bytes
;; as 64 lowercase hex digits and "\n" to stdout. Stdin is not read. Tests
;; use it to check where random_get's bytes come from.
;;
;; Build: wat2wasm random.wat -o random.wasm
;;
;; Exit: returns normally; proc_exit(1) if random_get or the write fails.
;;
;; Memory layout: 0..7 iovec, 8..11 nwritten, 512..527 hex digits,
;; 1024..1055 random bytes, 2048..2112 output line.
(module
  (import "wasi_snapshot_preview1" "random_get"
    (func $random_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write"
    (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit"
    (func $proc_exit (param i32)))

  (memory (export "memory") 1)

  (data (i32.const 512) "0123456789abcdef")

  (func (export "_start")
    (local $i i32)
    (local $b i32)
    (if (call $random_get (i32.const 1024) (i32.const 16))
      (then (call $proc_exit (i32.const 1)) (unreachable)))
    (if (call $random_get (i32.const 1040) (i32.const 16))
      (then (call $proc_exit (i32.const 1)) (unreachable)))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (i32.const 32)))
        (local.set $b (i32.load8_u (i32.add (i32.const 1024) (local.get $i))))
        (i32.store8 (i32.add (i32.const 2048) (i32.shl (local.get $i) (i32.const 1)))
          (i32.load8_u (i32.add (i32.const 512) (i32.shr_u (local.get $b) (i32.const 4)))))
        (i32.store8 (i32.add (i32.const 2049) (i32.shl (local.get $i) (i32.const 1)))
          (i32.load8_u (i32.add (i32.const 512) (i32.and (local.get $b) (i32.const 15)))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (i32.store8 (i32.const 2112) (i32.const 10))
    (i32.store (i32.const 0) (i32.const 2048))
    (i32.store (i32.const 4) (i32.const 65))
    (if (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8))
      (then (call $proc_exit (i32.const 1)) (unreachable)))
    (if (i32.ne (i32.load (i32.const 8)) (i32.const 65))
      (then (call $proc_exit (i32.const 1)) (unreachable))))
)
