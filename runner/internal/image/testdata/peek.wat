;; peek: a reactor-shaped module for the image tests. Its memory starts at
;; one page and has a data segment, so a test can tell the image from what
;; wazero writes at instantiation; it exports byte-level access to memory.
;; Built with: wat2wasm peek.wat -o peek.wasm
(module
  (memory (export "memory") 1)
  (data (i32.const 0) "fresh")
  ;; load returns the byte at addr.
  (func (export "load") (param $addr i32) (result i32)
    (i32.load8_u (local.get $addr)))
  ;; store writes the low byte of v at addr.
  (func (export "store") (param $addr i32) (param $v i32)
    (i32.store8 (local.get $addr) (local.get $v)))
  ;; grow grows the memory by n pages and returns memory.grow's result.
  (func (export "grow") (param $n i32) (result i32)
    (memory.grow (local.get $n)))
  ;; pages returns the memory size in pages.
  (func (export "pages") (result i32)
    (memory.size)))
