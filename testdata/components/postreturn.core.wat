;; The core module of postreturn.wasm: counter.wat's handler with a
;; post-return function, as componentize-js's bindings have: handle traps
;; (unreachable) when the flag at address 4 says the previous call's
;; post-return never ran, then sets it; the post-return clears it. So on a
;; kept memory (reuse) the second request traps unless the host calls the
;; post-return after each handle. It answers "count <n>\n" as counter.wat.
;; build.sh makes the component (jco embed + jco new).
(module
  (import "wasi:http/types@0.2.10" "[constructor]fields" (func $fields_new (result i32)))
  (import "wasi:http/types@0.2.10" "[method]fields.append" (func $fields_append (param i32 i32 i32 i32 i32 i32)))
  (import "wasi:http/types@0.2.10" "[constructor]outgoing-response" (func $resp_new (param i32) (result i32)))
  (import "wasi:http/types@0.2.10" "[method]outgoing-response.body" (func $resp_body (param i32 i32)))
  (import "wasi:http/types@0.2.10" "[method]outgoing-body.write" (func $body_write (param i32 i32)))
  (import "wasi:http/types@0.2.10" "[static]outgoing-body.finish" (func $body_finish (param i32 i32 i32 i32)))
  (import "wasi:http/types@0.2.10" "[static]response-outparam.set" (func $set (param i32 i32 i32 i32 i64 i32 i32 i32 i32)))
  (import "wasi:io/streams@0.2.12" "[method]output-stream.blocking-write-and-flush" (func $write (param i32 i32 i32 i32)))
  (import "wasi:io/streams@0.2.12" "[resource-drop]output-stream" (func $drop_stream (param i32)))
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 4096))
  (data (i32.const 16) "x-fixture")
  (data (i32.const 32) "hello")
  (data (i32.const 48) "count ")
  (data (i32.const 64) "\n")
  (func (export "cabi_realloc") (param i32 i32 i32 i32) (result i32)
    (local $p i32)
    (local.set $p (i32.and (i32.add (global.get $heap) (i32.sub (local.get 2) (i32.const 1)))
                           (i32.sub (i32.const 0) (local.get 2))))
    (global.set $heap (i32.add (local.get $p) (local.get 3)))
    (local.get $p))
  ;; The post-return the canonical ABI has the host call after every
  ;; handle: it clears the in-call flag at address 4.
  (func (export "cabi_post_wasi:http/incoming-handler@0.2.10#handle")
    (i32.store (i32.const 4) (i32.const 0)))
  (func (export "wasi:http/incoming-handler@0.2.10#handle") (param $req i32) (param $out i32)
    (local $headers i32) (local $resp i32) (local $body i32) (local $stream i32)
    (if (i32.load (i32.const 4)) (then unreachable))
    (i32.store (i32.const 4) (i32.const 1))
    (local.set $headers (call $fields_new))
    (call $fields_append (local.get $headers) (i32.const 16) (i32.const 9) (i32.const 32) (i32.const 5) (i32.const 256))
    (local.set $resp (call $resp_new (local.get $headers)))
    (call $resp_body (local.get $resp) (i32.const 256))
    (local.set $body (i32.load (i32.const 260)))
    (call $body_write (local.get $body) (i32.const 256))
    (local.set $stream (i32.load (i32.const 260)))
    (i32.store (i32.const 8) (i32.add (i32.load (i32.const 8)) (i32.const 1)))
    (i32.store8 (i32.const 12) (i32.add (i32.const 48) (i32.rem_u (i32.load (i32.const 8)) (i32.const 10))))
    (call $set (local.get $out) (i32.const 0) (local.get $resp) (i32.const 0) (i64.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0))
    (call $write (local.get $stream) (i32.const 48) (i32.const 6) (i32.const 256))
    (call $write (local.get $stream) (i32.const 12) (i32.const 1) (i32.const 256))
    (call $write (local.get $stream) (i32.const 64) (i32.const 1) (i32.const 256))
    (call $drop_stream (local.get $stream))
    (call $body_finish (local.get $body) (i32.const 0) (i32.const 0) (i32.const 256)))
)
