;; start_trap: a start function that runs unreachable. The trap happens
;; before _start (the runner calls the start function itself, after
;; instantiating), and is a trap of the guest, never a platform failure.
;;
;; Build: wat2wasm start_trap.wat -o start_trap.wasm
(module
  (memory (export "memory") 1)
  (func $init unreachable)
  (start $init)
  (func (export "_start")))
