;; Module a of the merge tests: it owns the memory, a mutable global, a
;; table, and functions b imports; its start function sets the global.
(module
  (import "env" "log" (func $log (param i32)))
  (memory (export "memory") 1)
  (global $g (export "g") (mut i32) (i32.const 1))
  (global (export "base") i32 (i32.const 1000))
  (table (export "table") 4 funcref)
  (elem (i32.const 1) $double $add)
  (data (i32.const 0) "hi")
  (func $add (export "add") (param i32 i32) (result i32)
    (i32.add (local.get 0) (local.get 1)))
  (func $double (param i32 i32) (result i32)
    (i32.mul (local.get 0) (i32.const 2)))
  (func $start
    (global.set $g (i32.add (global.get $g) (i32.const 41)))
    (call $log (global.get $g)))
  (start $start))
