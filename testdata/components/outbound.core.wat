;; The core module of outbound.wasm (build.sh makes the component): it sends
;; an outbound request through wasi:http/outgoing-handler and answers 403
;; when the host refuses it with error-code.HTTP-request-denied (case 15),
;; 409 for any other error, and 200 if the request was let through.
(module
  (import "wasi:http/types@0.2.10" "[constructor]fields" (func $fields_new (result i32)))
  (import "wasi:http/types@0.2.10" "[constructor]outgoing-request" (func $req_new (param i32) (result i32)))
  (import "wasi:http/types@0.2.10" "[constructor]outgoing-response" (func $resp_new (param i32) (result i32)))
  (import "wasi:http/types@0.2.10" "[method]outgoing-response.set-status-code" (func $set_status (param i32 i32) (result i32)))
  (import "wasi:http/types@0.2.10" "[method]outgoing-response.body" (func $resp_body (param i32 i32)))
  (import "wasi:http/types@0.2.10" "[static]outgoing-body.finish" (func $body_finish (param i32 i32 i32 i32)))
  (import "wasi:http/types@0.2.10" "[static]response-outparam.set" (func $set (param i32 i32 i32 i32 i64 i32 i32 i32 i32)))
  (import "wasi:http/outgoing-handler@0.2.10" "handle" (func $handle (param i32 i32 i32 i32)))
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 4096))
  (func (export "cabi_realloc") (param i32 i32 i32 i32) (result i32)
    (local $p i32)
    (local.set $p (i32.and (i32.add (global.get $heap) (i32.sub (local.get 2) (i32.const 1)))
                           (i32.sub (i32.const 0) (local.get 2))))
    (global.set $heap (i32.add (local.get $p) (local.get 3)))
    (local.get $p))
  (func (export "wasi:http/incoming-handler@0.2.10#handle") (param $req i32) (param $out i32)
    (local $resp i32) (local $body i32) (local $status i32)
    ;; result<own<future-incoming-response>, error-code> at 512: the
    ;; discriminant at 512, the error-code's own discriminant at 520.
    (call $handle (call $req_new (call $fields_new)) (i32.const 0) (i32.const 0) (i32.const 512))
    (local.set $status (i32.const 200))
    (if (i32.load8_u (i32.const 512))
      (then (local.set $status
        (select (i32.const 403) (i32.const 409) (i32.eq (i32.load8_u (i32.const 520)) (i32.const 15))))))
    (local.set $resp (call $resp_new (call $fields_new)))
    (drop (call $set_status (local.get $resp) (local.get $status)))
    (call $resp_body (local.get $resp) (i32.const 256))
    (local.set $body (i32.load (i32.const 260)))
    (call $set (local.get $out) (i32.const 0) (local.get $resp) (i32.const 0) (i64.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0))
    (call $body_finish (local.get $body) (i32.const 0) (i32.const 0) (i32.const 256)))
)
