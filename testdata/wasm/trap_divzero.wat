;; trap_divzero: _start evaluates i32.div_s with a zero divisor. Both operands
;; are loaded from memory (initialised by a data segment) so the division
;; cannot be constant-folded away, and the result is stored so it is not dead.
;; No imports.
;;
;; Build: wat2wasm trap_divzero.wat -o trap_divzero.wasm
(module
  (memory (export "memory") 1)

  ;; 16: dividend = 7, 20: divisor = 0 (little-endian i32s)
  (data (i32.const 16) "\07\00\00\00\00\00\00\00")

  (func $divide (param $a i32) (param $b i32) (result i32)
    (i32.div_s (local.get $a) (local.get $b)))

  (func (export "_start")
    (i32.store (i32.const 24)
      (call $divide (i32.load (i32.const 16)) (i32.load (i32.const 20)))))
)
