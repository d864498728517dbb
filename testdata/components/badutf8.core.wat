;; The core module of badutf8.wasm (build.sh makes the component): its handler passes a header name that is not UTF-8.
(module
  (import "wasi:http/types@0.2.10" "[constructor]fields" (func $fields_new (result i32)))
  (import "wasi:http/types@0.2.10" "[method]fields.append" (func $fields_append (param i32 i32 i32 i32 i32 i32)))
  (memory (export "memory") 1)
  (func (export "cabi_realloc") (param i32 i32 i32 i32) (result i32) (i32.const 8192))
  (func (export "wasi:http/incoming-handler@0.2.10#handle") (param $req i32) (param $out i32)
    (i32.store (i32.const 0) (i32.const 0xfffefdfc)) (call $fields_append (call $fields_new) (i32.const 0) (i32.const 4) (i32.const 0) (i32.const 1) (i32.const 256)))
)
