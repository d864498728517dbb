;; exit: reads a decimal exit code from stdin and calls proc_exit with it.
;; Empty (or all-whitespace) input means exit code 0.
;;
;; Build: wat2wasm exit.wat -o exit.wasm
;;
;; Input: digits, optionally surrounded by ASCII whitespace (at most 63 bytes),
;; value 0..4294967295.
;; Exit: always via proc_exit, never by returning from _start. Malformed,
;; too-long or out-of-range input exits with code 2; a failed read with 1.
;;
;; Memory layout: 0..11 WASI iovec + result slot, 1024..1087 input buffer.
(module
  (import "wasi_snapshot_preview1" "fd_read"
    (func $fd_read (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit"
    (func $proc_exit (param i32)))

  (memory (export "memory") 1)

  ;; read_all reads stdin into [ptr, ptr+cap) until end of input or until the
  ;; buffer is full. Returns the number of bytes read, or -1 if fd_read fails.
  ;; Callers treat a full buffer as "input too long" where that matters.
  ;; Uses the iovec at 0..7 and the result slot at 8..11.
  (func $read_all (param $ptr i32) (param $cap i32) (result i32)
    (local $total i32)
    (local $n i32)
    (block $done
      (loop $more
        (br_if $done (i32.ge_u (local.get $total) (local.get $cap)))
        (i32.store (i32.const 0) (i32.add (local.get $ptr) (local.get $total)))
        (i32.store (i32.const 4) (i32.sub (local.get $cap) (local.get $total)))
        (if (call $fd_read (i32.const 0) (i32.const 0) (i32.const 1) (i32.const 8))
          (then (return (i32.const -1))))
        (local.set $n (i32.load (i32.const 8)))
        (br_if $done (i32.eqz (local.get $n)))
        (local.set $total (i32.add (local.get $total) (local.get $n)))
        (br $more)))
    (local.get $total))

  ;; is_space reports whether c is ASCII whitespace (space, \t, \n, \v, \f, \r).
  (func $is_space (param $c i32) (result i32)
    (i32.or
      (i32.eq (local.get $c) (i32.const 32))
      (i32.lt_u (i32.sub (local.get $c) (i32.const 9)) (i32.const 5))))

  ;; parse_u63 parses an unsigned decimal integer from [ptr, ptr+len), ignoring
  ;; leading and trailing ASCII whitespace. Returns the value (0..2^63-1),
  ;; -2 if the input is empty or all whitespace, or -1 if it contains anything
  ;; other than digits or does not fit in 63 bits.
  (func $parse_u63 (param $ptr i32) (param $len i32) (result i64)
    (local $end i32)
    (local $d i64)
    (local $v i64)
    (local.set $end (i32.add (local.get $ptr) (local.get $len)))
    ;; trim leading whitespace
    (block $lead_done
      (loop $lead
        (br_if $lead_done (i32.ge_u (local.get $ptr) (local.get $end)))
        (br_if $lead_done (i32.eqz (call $is_space (i32.load8_u (local.get $ptr)))))
        (local.set $ptr (i32.add (local.get $ptr) (i32.const 1)))
        (br $lead)))
    ;; trim trailing whitespace
    (block $trail_done
      (loop $trail
        (br_if $trail_done (i32.ge_u (local.get $ptr) (local.get $end)))
        (br_if $trail_done
          (i32.eqz (call $is_space (i32.load8_u (i32.sub (local.get $end) (i32.const 1))))))
        (local.set $end (i32.sub (local.get $end) (i32.const 1)))
        (br $trail)))
    (if (i32.ge_u (local.get $ptr) (local.get $end)) (then (return (i64.const -2))))
    (block $digits_done
      (loop $digit
        (br_if $digits_done (i32.ge_u (local.get $ptr) (local.get $end)))
        (local.set $d
          (i64.sub (i64.load8_u (local.get $ptr)) (i64.const 48)))
        (if (i64.gt_u (local.get $d) (i64.const 9)) (then (return (i64.const -1))))
        ;; v*10 + d must stay <= 2^63-1
        (if (i64.gt_u (local.get $v)
              (i64.div_u (i64.sub (i64.const 0x7fffffffffffffff) (local.get $d))
                         (i64.const 10)))
          (then (return (i64.const -1))))
        (local.set $v
          (i64.add (i64.mul (local.get $v) (i64.const 10)) (local.get $d)))
        (local.set $ptr (i32.add (local.get $ptr) (i32.const 1)))
        (br $digit)))
    (local.get $v))

  (func (export "_start")
    (local $len i32)
    (local $code i64)
    (local.set $len (call $read_all (i32.const 1024) (i32.const 64)))
    (if (i32.lt_s (local.get $len) (i32.const 0))
      (then (call $proc_exit (i32.const 1)) (unreachable)))
    (if (i32.ge_u (local.get $len) (i32.const 64))
      (then (call $proc_exit (i32.const 2)) (unreachable)))
    (local.set $code (call $parse_u63 (i32.const 1024) (local.get $len)))
    ;; -2: empty input -> exit 0
    (if (i64.eq (local.get $code) (i64.const -2))
      (then (call $proc_exit (i32.const 0)) (unreachable)))
    ;; -1 (malformed) or wider than 32 bits -> exit 2
    (if (i64.gt_u (local.get $code) (i64.const 0xffffffff))
      (then (call $proc_exit (i32.const 2)) (unreachable)))
    (call $proc_exit (i32.wrap_i64 (local.get $code)))
    (unreachable))
)
