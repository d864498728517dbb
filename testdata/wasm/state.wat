;; state: a reactor that shows what an activation inherits from the ones
;; before it, for the instance-mode tests.
;;
;; Build: wat2wasm state.wat -o state.wasm
;;
;; _initialize sets the global $inited to 1 and writes "INIT" at 32.
;; handle writes one line "<counter> <inited> <secret>\n", where <counter>
;; is the global $counter (mod 10) as a digit and <secret> the 8 bytes at
;; 128 with each zero byte shown as '.'; then it adds 1 to $counter and
;; copies the first 8 bytes of stdin to 128. So a fresh instance of the
;; initialised module always answers "0 1 ........", and an instance that
;; kept an earlier activation's state shows its counter and input.
;;
;; Memory layout:
;;   0..7      iovec {buf, len}
;;   8..11     nread / nwritten
;;   32..35    "INIT"
;;   128..135  the secret
;;   256..271  the output line
;;   512..575  stdin buffer
(module
  (import "wasi_snapshot_preview1" "fd_read"
    (func $fd_read (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write"
    (func $fd_write (param i32 i32 i32 i32) (result i32)))

  (memory (export "memory") 1)
  (global $counter (mut i32) (i32.const 0))
  (global $inited (mut i32) (i32.const 0))

  (func (export "_initialize")
    (global.set $inited (i32.const 1))
    (i32.store (i32.const 32) (i32.const 0x54494e49))) ;; "INIT"

  (func (export "handle")
    (local $i i32)
    (local $c i32)
    ;; "<counter> <inited> "
    (i32.store8 (i32.const 256) (i32.add (i32.const 48) (i32.rem_u (global.get $counter) (i32.const 10))))
    (i32.store8 (i32.const 257) (i32.const 32))
    (i32.store8 (i32.const 258) (i32.add (i32.const 48) (global.get $inited)))
    (i32.store8 (i32.const 259) (i32.const 32))
    (local.set $i (i32.const 0))
    (loop $secret
      (local.set $c (i32.load8_u (i32.add (i32.const 128) (local.get $i))))
      (if (i32.eqz (local.get $c)) (then (local.set $c (i32.const 46))))
      (i32.store8 (i32.add (i32.const 260) (local.get $i)) (local.get $c))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $secret (i32.lt_u (local.get $i) (i32.const 8))))
    (i32.store8 (i32.const 268) (i32.const 10))
    (i32.store (i32.const 0) (i32.const 256))
    (i32.store (i32.const 4) (i32.const 13))
    (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8)))
    (global.set $counter (i32.add (global.get $counter) (i32.const 1)))
    ;; the first 8 bytes of stdin become the secret
    (i32.store (i32.const 0) (i32.const 512))
    (i32.store (i32.const 4) (i32.const 8))
    (drop (call $fd_read (i32.const 0) (i32.const 0) (i32.const 1) (i32.const 8)))
    (if (i32.load (i32.const 8))
      (then (i64.store (i32.const 128) (i64.load (i32.const 512))))))
)
