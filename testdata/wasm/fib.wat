;; fib: reads a decimal integer N from stdin, computes fib(N) with the naive
;; doubly-recursive definition in i64 (fib(0)=0, fib(1)=1; wraps past N=92),
;; and prints it as decimal + "\n". fib(20) = 6765. Cost grows as ~1.6^N, so
;; N around 40+ is a convenient CPU burner.
;;
;; Build: wat2wasm fib.wat -o fib.wasm
;;
;; Input: digits, optionally surrounded by ASCII whitespace (at most 63 bytes).
;; Exit: returns normally on success; proc_exit(2) on empty, malformed,
;; too-long or out-of-range input; proc_exit(1) if reading or writing fails.
;;
;; Memory layout: 0..11 WASI iovec + result slot, 64..95 number formatting,
;; 1024..1087 input buffer.
(module
  (import "wasi_snapshot_preview1" "fd_read"
    (func $fd_read (param i32 i32 i32 i32) (result i32)))
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

  (func $fib (param $n i64) (result i64)
    (if (result i64) (i64.lt_u (local.get $n) (i64.const 2))
      (then (local.get $n))
      (else
        (i64.add
          (call $fib (i64.sub (local.get $n) (i64.const 1)))
          (call $fib (i64.sub (local.get $n) (i64.const 2)))))))

  (func (export "_start")
    (local $len i32)
    (local $n i64)
    (local.set $len (call $read_all (i32.const 1024) (i32.const 64)))
    (if (i32.lt_s (local.get $len) (i32.const 0))
      (then (call $proc_exit (i32.const 1)) (unreachable)))
    (if (i32.ge_u (local.get $len) (i32.const 64))
      (then (call $proc_exit (i32.const 2)) (unreachable)))
    (local.set $n (call $parse_u63 (i32.const 1024) (local.get $len)))
    (if (i64.lt_s (local.get $n) (i64.const 0))
      (then (call $proc_exit (i32.const 2)) (unreachable)))
    (if (call $print_u64 (call $fib (local.get $n)))
      (then (call $proc_exit (i32.const 1)) (unreachable))))
)
