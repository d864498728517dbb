;; hello: reads an optional name from stdin, trims trailing ASCII whitespace
;; (so a trailing "\n" or "\r\n" is dropped), and writes "hello, <name>\n";
;; with an empty name it writes "hello, world\n". Names longer than 4096 bytes
;; are truncated to 4096 bytes. This is the embedded demo guest.
;;
;; Build: wat2wasm hello.wat -o hello.wasm
;;
;; Exit: returns normally; proc_exit(1) if reading or writing fails.
;;
;; Memory layout: 0..11 WASI iovec + result slot, 256.. "hello, world\n",
;; 1024..1030 "hello, " followed directly by the name (up to 4096 bytes)
;; and the final "\n".
(module
  (import "wasi_snapshot_preview1" "fd_read"
    (func $fd_read (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write"
    (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit"
    (func $proc_exit (param i32)))

  (memory (export "memory") 1)

  (data (i32.const 256) "hello, world\n")
  (data (i32.const 1024) "hello, ")

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

  (func (export "_start")
    (local $len i32)
    (local.set $len (call $read_all (i32.const 1031) (i32.const 4096)))
    (if (i32.lt_s (local.get $len) (i32.const 0))
      (then (call $proc_exit (i32.const 1)) (unreachable)))
    ;; trim trailing whitespace
    (block $trimmed
      (loop $trim
        (br_if $trimmed (i32.eqz (local.get $len)))
        (br_if $trimmed
          (i32.eqz (call $is_space
            (i32.load8_u (i32.add (i32.const 1030) (local.get $len))))))
        (local.set $len (i32.sub (local.get $len) (i32.const 1)))
        (br $trim)))
    (if (i32.eqz (local.get $len))
      (then
        (if (call $write_all (i32.const 1) (i32.const 256) (i32.const 13))
          (then (call $proc_exit (i32.const 1)) (unreachable)))
        (return)))
    (i32.store8 (i32.add (i32.const 1031) (local.get $len)) (i32.const 10))
    (if (call $write_all (i32.const 1) (i32.const 1024)
          (i32.add (local.get $len) (i32.const 8)))
      (then (call $proc_exit (i32.const 1)) (unreachable))))
)
