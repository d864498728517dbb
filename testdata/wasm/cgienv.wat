;; cgienv: a WAGI guest. Writes a CGI header block, then its environment,
;; one "NAME=value" per line, then stdin as read.
;;
;; Build: wat2wasm cgienv.wat -o cgienv.wasm
;;
;; Output:
;;   Content-Type: text/plain
;;   Status: 201 Created
;;   X-Guest: cgienv
;;   Server: dropped            (not on the allow-list: the host drops it)
;;   <empty line>
;;   one line per environment entry, in environ_get order
;;   stdin, copied until end of input
;;
;; Memory layout:
;;   0..7        iovec {buf, len} handed to fd_read/fd_write
;;   8..11       nread / nwritten result
;;   16..19      environ count, 20..23 environ buffer size
;;   64..        the header block
;;   65536..     128 KiB: the environ pointers, then the strings; reused as
;;               the stdin transfer buffer afterwards
;;
;; Exit: returns normally; proc_exit(1) if a WASI call fails or the
;; environment does not fit.
(module
  (import "wasi_snapshot_preview1" "fd_read"
    (func $fd_read (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write"
    (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "environ_sizes_get"
    (func $environ_sizes_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "environ_get"
    (func $environ_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit"
    (func $proc_exit (param i32)))

  (memory (export "memory") 3)

  (data (i32.const 64) "Content-Type: text/plain\nStatus: 201 Created\nX-Guest: cgienv\nServer: dropped\n\n")
  (global $head_len i32 (i32.const 78))
  (global $buf i32 (i32.const 65536))
  (global $buf_cap i32 (i32.const 131072))

  (func $write_all (param $ptr i32) (param $len i32)
    (local $n i32)
    (block $done
      (loop $more
        (br_if $done (i32.eqz (local.get $len)))
        (i32.store (i32.const 0) (local.get $ptr))
        (i32.store (i32.const 4) (local.get $len))
        (if (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8))
          (then (call $proc_exit (i32.const 1)) (unreachable)))
        (local.set $n (i32.load (i32.const 8)))
        (if (i32.eqz (local.get $n)) (then (call $proc_exit (i32.const 1)) (unreachable)))
        (local.set $ptr (i32.add (local.get $ptr) (local.get $n)))
        (local.set $len (i32.sub (local.get $len) (local.get $n)))
        (br $more))))

  (func (export "_start")
    (local $count i32)
    (local $strings i32)
    (local $end i32)
    (local $p i32)
    (local $n i32)
    (call $write_all (i32.const 64) (global.get $head_len))
    (if (call $environ_sizes_get (i32.const 16) (i32.const 20))
      (then (call $proc_exit (i32.const 1)) (unreachable)))
    (local.set $count (i32.load (i32.const 16)))
    (local.set $strings (i32.add (global.get $buf) (i32.mul (local.get $count) (i32.const 4))))
    (local.set $end (i32.add (local.get $strings) (i32.load (i32.const 20))))
    (if (i32.gt_u (local.get $end) (i32.add (global.get $buf) (global.get $buf_cap)))
      (then (call $proc_exit (i32.const 1)) (unreachable)))
    (if (call $environ_get (global.get $buf) (local.get $strings))
      (then (call $proc_exit (i32.const 1)) (unreachable)))
    ;; Every NUL terminator becomes a newline; the strings are contiguous.
    (local.set $p (local.get $strings))
    (block $done
      (loop $scan
        (br_if $done (i32.ge_u (local.get $p) (local.get $end)))
        (if (i32.eqz (i32.load8_u (local.get $p)))
          (then (i32.store8 (local.get $p) (i32.const 10))))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (br $scan)))
    (call $write_all (local.get $strings) (i32.sub (local.get $end) (local.get $strings)))
    (loop $chunk
      (i32.store (i32.const 0) (global.get $buf))
      (i32.store (i32.const 4) (global.get $buf_cap))
      (if (call $fd_read (i32.const 0) (i32.const 0) (i32.const 1) (i32.const 8))
        (then (call $proc_exit (i32.const 1)) (unreachable)))
      (local.set $n (i32.load (i32.const 8)))
      (if (local.get $n)
        (then
          (call $write_all (global.get $buf) (local.get $n))
          (br $chunk)))))
)
