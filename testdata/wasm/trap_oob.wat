;; trap_oob: _start does an i32.load at address memory.size*65536, i.e. the
;; first byte past the end of linear memory, whatever its size. The loaded
;; value is stored so the load is not dead. No imports.
;;
;; Build: wat2wasm trap_oob.wat -o trap_oob.wasm
(module
  (memory (export "memory") 1)

  (func (export "_start")
    (i32.store (i32.const 32)
      (i32.load (i32.mul (memory.size) (i32.const 65536)))))
)
