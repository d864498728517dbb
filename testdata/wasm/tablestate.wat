;; tablestate: a reactor whose activations change its table, for the
;; instance-mode tests.
;;
;; Build: wat2wasm tablestate.wat -o tablestate.wasm
;;
;; The table holds $a (answers "A") at 0 and $b (answers "B") at 1. handle
;; writes the answer of the function at 0 and a newline, then copies the
;; entry at 1 to 0. So an activation on a fresh instance or on the snapshot
;; answers "A\n", and one that kept the table of the activation before it
;; answers "B\n".
(module
  (import "wasi_snapshot_preview1" "fd_write"
    (func $fd_write (param i32 i32 i32 i32) (result i32)))

  (type $letter (func (result i32)))
  (memory (export "memory") 1)
  (table $t 2 2 funcref)
  (elem (table $t) (i32.const 0) func $a $b)

  (func $a (type $letter) (i32.const 65))
  (func $b (type $letter) (i32.const 66))

  (func (export "_initialize"))

  (func (export "handle")
    (i32.store8 (i32.const 256) (call_indirect $t (type $letter) (i32.const 0)))
    (i32.store8 (i32.const 257) (i32.const 10))
    (i32.store (i32.const 0) (i32.const 256))
    (i32.store (i32.const 4) (i32.const 2))
    (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8)))
    (table.set $t (i32.const 0) (table.get $t (i32.const 1))))
)
