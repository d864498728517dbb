;; The core module of loop.wasm (build.sh makes the component): its handler loops forever.
(module
  (import "wasi:http/types@0.2.10" "[constructor]fields" (func $fields_new (result i32)))
  (import "wasi:http/types@0.2.10" "[method]fields.append" (func $fields_append (param i32 i32 i32 i32 i32 i32)))
  (memory (export "memory") 1)
  (func (export "cabi_realloc") (param i32 i32 i32 i32) (result i32) (i32.const 8192))
  (func (export "wasi:http/incoming-handler@0.2.10#handle") (param $req i32) (param $out i32)
    (loop $l (br $l)))
)
