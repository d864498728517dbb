;; infinite: _start spins forever in a tight loop with no calls and no
;; imports. Only fuel metering or a deadline can stop it.
;;
;; Build: wat2wasm infinite.wat -o infinite.wasm
(module
  (memory (export "memory") 1)

  (func (export "_start")
    (loop $spin
      (br $spin)))
)
