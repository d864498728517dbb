;; hostcalls: makes one WASI call per byte of stdin, chosen by the byte:
;;   'c' clock_time_get(monotonic)      'w' clock_time_get(realtime)
;;   'r' random_get of 640 bytes        's' poll_oneoff: sleep 1 ns
;;   'y' sched_yield
;; Any other byte is skipped. Tests use it to check what the host charges
;; for each call.
;;
;; Build: wat2wasm hostcalls.wat -o hostcalls.wasm
;;
;; Input: at most 64 bytes (more are ignored).
;; Exit: returns normally; proc_exit(1) if reading stdin or a call fails.
;;
;; Memory layout: 0..7 iovec, 8..11 nread, 16..23 clock result,
;; 32..79 poll_oneoff subscription, 96..127 its event, 128..131 nevents,
;; 256..319 input, 1024..1663 random bytes.
(module
  (import "wasi_snapshot_preview1" "fd_read"
    (func $fd_read (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "clock_time_get"
    (func $clock_time_get (param i32 i64 i32) (result i32)))
  (import "wasi_snapshot_preview1" "random_get"
    (func $random_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "poll_oneoff"
    (func $poll_oneoff (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "sched_yield"
    (func $sched_yield (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit"
    (func $proc_exit (param i32)))

  (memory (export "memory") 1)

  ;; call makes the call for byte b and returns its errno (0 if skipped).
  (func $call (param $b i32) (result i32)
    (if (i32.eq (local.get $b) (i32.const 99)) ;; 'c'
      (then (return (call $clock_time_get (i32.const 1) (i64.const 1) (i32.const 16)))))
    (if (i32.eq (local.get $b) (i32.const 119)) ;; 'w'
      (then (return (call $clock_time_get (i32.const 0) (i64.const 1) (i32.const 16)))))
    (if (i32.eq (local.get $b) (i32.const 114)) ;; 'r'
      (then (return (call $random_get (i32.const 1024) (i32.const 640)))))
    (if (i32.eq (local.get $b) (i32.const 115)) ;; 's'
      (then
        ;; subscription: userdata 0, tag clock (0), clock id monotonic (1),
        ;; timeout 1 ns, precision 0, flags 0 (relative)
        (i64.store (i32.const 32) (i64.const 0))
        (i32.store8 (i32.const 40) (i32.const 0))
        (i32.store (i32.const 48) (i32.const 1))
        (i64.store (i32.const 56) (i64.const 1))
        (i64.store (i32.const 64) (i64.const 0))
        (i32.store16 (i32.const 72) (i32.const 0))
        (return (call $poll_oneoff (i32.const 32) (i32.const 96) (i32.const 1) (i32.const 128)))))
    (if (i32.eq (local.get $b) (i32.const 121)) ;; 'y'
      (then (return (call $sched_yield))))
    (i32.const 0))

  (func (export "_start")
    (local $n i32)
    (local $i i32)
    (i32.store (i32.const 0) (i32.const 256))
    (i32.store (i32.const 4) (i32.const 64))
    (if (call $fd_read (i32.const 0) (i32.const 0) (i32.const 1) (i32.const 8))
      (then (call $proc_exit (i32.const 1)) (unreachable)))
    (local.set $n (i32.load (i32.const 8)))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (if (call $call (i32.load8_u (i32.add (i32.const 256) (local.get $i))))
          (then (call $proc_exit (i32.const 1)) (unreachable)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next))))
)
