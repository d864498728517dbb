;; trivial: _start does nothing and returns. No imports. Used to measure
;; activation overhead.
;;
;; Build: wat2wasm trivial.wat -o trivial.wasm
(module
  (memory (export "memory") 1)

  (func (export "_start"))
)
