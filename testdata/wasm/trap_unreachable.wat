;; trap_unreachable: _start calls a function that executes `unreachable`.
;; No imports.
;;
;; Build: wat2wasm trap_unreachable.wat -o trap_unreachable.wasm
(module
  (memory (export "memory") 1)

  (func $boom
    (unreachable))

  (func (export "_start")
    (call $boom))
)
