;; elem_oob: an active element segment that does not fit its table (one
;; element at offset 5 of a 1-element table). Valid WebAssembly;
;; instantiation fails, which is a trap of the guest, never a platform
;; failure.
;;
;; Build: wat2wasm elem_oob.wat -o elem_oob.wasm
(module
  (memory (export "memory") 1)
  (table 1 funcref)
  (func $f)
  (elem (i32.const 5) $f)
  (func (export "_start")))
