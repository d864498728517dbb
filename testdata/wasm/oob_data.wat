;; oob_data: an active data segment that does not fit the initial memory.
;; Valid WebAssembly; instantiation traps (out of bounds memory access), so
;; every activation is a trap of the guest, never a platform failure.
;;
;; Build: wat2wasm oob_data.wat -o oob_data.wasm
(module
  (memory (export "memory") 1)
  (data (i32.const 65535) "xy")
  (func (export "_start")))
