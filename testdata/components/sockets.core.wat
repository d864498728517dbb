;; The core module of sockets.wasm (build.sh makes the component): it also
;; imports wasi:sockets/tcp, which the node does not provide.
(module
  (import "wasi:sockets/tcp@0.2.12" "[resource-drop]tcp-socket" (func $drop (param i32)))
  (memory (export "memory") 1)
  (func (export "cabi_realloc") (param i32 i32 i32 i32) (result i32) (i32.const 8192))
  (func (export "wasi:http/incoming-handler@0.2.10#handle") (param i32 i32) (call $drop (i32.const 1))))
