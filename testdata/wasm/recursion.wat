;; recursion: _start calls a function that calls itself with no base case.
;; Each frame keeps several live i64 locals across the call (so the frame is
;; not trivially small and the call is not in tail position). Only the
;; engine's call-stack limit stops it. No imports.
;;
;; Build: wat2wasm recursion.wat -o recursion.wasm
(module
  (memory (export "memory") 1)

  (func $recurse (param $depth i64) (result i64)
    (local $a i64)
    (local $b i64)
    (local $c i64)
    (local $d i64)
    (local.set $a (i64.mul (local.get $depth) (i64.const 3)))
    (local.set $b (i64.xor (local.get $depth) (i64.const 0x5555)))
    (local.set $c (i64.add (local.get $a) (local.get $b)))
    (local.set $d (i64.rotl (local.get $c) (i64.const 7)))
    (i64.add
      (call $recurse (i64.add (local.get $depth) (i64.const 1)))
      (i64.add
        (i64.add (local.get $a) (local.get $b))
        (i64.add (local.get $c) (local.get $d)))))

  (func (export "_start")
    (i64.store (i32.const 64) (call $recurse (i64.const 0))))
)
