;; echo: copies stdin to stdout until end of input, then returns from _start.
;;
;; Build: wat2wasm echo.wat -o echo.wasm
;;
;; Memory layout:
;;   0..7        iovec {buf, len} handed to fd_read/fd_write
;;   8..11       nread / nwritten result
;;   65536..     64 KiB transfer buffer (second page)
;;
;; Exit: returns normally on EOF; proc_exit(1) if fd_read or fd_write fails.
(module
  (import "wasi_snapshot_preview1" "fd_read"
    (func $fd_read (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write"
    (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit"
    (func $proc_exit (param i32)))

  (memory (export "memory") 2)

  (global $buf i32 (i32.const 65536))
  (global $buf_cap i32 (i32.const 65536))

  ;; write_all writes len bytes at ptr to fd, retrying on partial writes.
  ;; Returns 0 or the WASI errno of the failed write (EIO=29 if the host
  ;; reports a zero-byte write for a non-empty buffer, to avoid spinning).
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
    (local $n i32)
    (loop $chunk
      (i32.store (i32.const 0) (global.get $buf))
      (i32.store (i32.const 4) (global.get $buf_cap))
      (if (call $fd_read (i32.const 0) (i32.const 0) (i32.const 1) (i32.const 8))
        (then (call $proc_exit (i32.const 1)) (unreachable)))
      (local.set $n (i32.load (i32.const 8)))
      (if (local.get $n)
        (then
          (if (call $write_all (i32.const 1) (global.get $buf) (local.get $n))
            (then (call $proc_exit (i32.const 1)) (unreachable)))
          (br $chunk)))))
)
