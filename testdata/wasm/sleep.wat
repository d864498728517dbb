;; sleep: calls poll_oneoff with a single relative CLOCK_MONOTONIC
;; subscription of 30 s (30_000_000_000 ns), then writes "woke\n" and returns.
;;
;; Build: wat2wasm sleep.wat -o sleep.wasm
;;
;; Exit: returns normally after the sleep; proc_exit(1) if poll_oneoff fails,
;; reports an error in the event, or writing fails.
;;
;; Memory layout: 0..11 WASI iovec + result slot, 16..19 nevents,
;; 256.. "woke\n", 1024..1071 subscription, 1088..1119 event.
(module
  (import "wasi_snapshot_preview1" "poll_oneoff"
    (func $poll_oneoff (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write"
    (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit"
    (func $proc_exit (param i32)))

  (memory (export "memory") 1)

  (data (i32.const 256) "woke\n")

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
    ;; subscription_t (48 bytes) at 1024; every field is stored explicitly
    ;; even where the value is zero, to keep the layout readable.
    ;;   +0  userdata  u64
    ;;   +8  tag       u8   0 = eventtype::clock
    ;;   +16 clock id  u32  1 = CLOCK_MONOTONIC
    ;;   +24 timeout   u64  ns
    ;;   +32 precision u64
    ;;   +40 flags     u16  0 = relative
    (i64.store (i32.const 1024) (i64.const 0x7065656c73)) ;; "sleep"
    (i32.store8 (i32.const 1032) (i32.const 0))
    (i32.store (i32.const 1040) (i32.const 1))
    (i64.store (i32.const 1048) (i64.const 30000000000))
    (i64.store (i32.const 1056) (i64.const 0))
    (i32.store16 (i32.const 1064) (i32.const 0))
    (if (call $poll_oneoff (i32.const 1024) (i32.const 1088) (i32.const 1) (i32.const 16))
      (then (call $proc_exit (i32.const 1)) (unreachable)))
    ;; event_t at 1088: +8 error u16
    (if (i32.load16_u (i32.const 1096))
      (then (call $proc_exit (i32.const 1)) (unreachable)))
    (if (call $write_all (i32.const 1) (i32.const 256) (i32.const 5))
      (then (call $proc_exit (i32.const 1)) (unreachable))))
)
