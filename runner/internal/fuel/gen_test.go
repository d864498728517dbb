package fuel

import "github.com/tetratelabs/wazero/api"

// genModule builds a valid, terminating module from fuzz bytes: up to four
// functions (i32) -> i32 with nested blocks, loops (bounded by counters),
// if/else, br_if (forward, back edge, to the function label), br_table,
// dispatch loops in the shape Go's compiler emits (forward jumps and
// bounded backward ones), early returns, dead code, direct and indirect calls (only to later
// functions, so the call graph is acyclic), host calls, memory and bulk
// operations, memory.grow and a rare trapping division. Function 1 is
// exported as "run"; global 0 ("cnt") counts executed counter increments,
// one in every function call and loop iteration. It returns the
// module and the argument for run.
func genModule(data []byte) ([]byte, uint64) {
	g := &gen{data: data}
	nf := 1 + g.n(3)
	g.nf = nf
	arg := uint64(g.next()) | uint64(g.next())<<8

	var bodies [][]byte
	for i := 1; i <= nf; i++ {
		g.fn, g.labels, g.loops, g.budget = i, nil, 0, 60
		code := cat(g.counter(), localGet(0), localSet(acc), g.stmts(3), localGet(acc))
		bodies = append(bodies, body([]localGroup{{3 + maxLoops, api.ValueTypeI32}}, code))
	}
	funcIdx := make([]uint32, nf)
	slots := make([][]byte, nf)
	for i := range funcIdx {
		slots[i] = u32(uint32(i + 1))
	}
	return wasmModule(
		types(functype(i32, i32)),
		imports(importFunc("env", "visible", 0)),
		funcs(funcIdx...),
		section(secTable, vec(cat([]byte{valFuncref, 0}, u32(uint32(nf))))),
		memory(1, 3),
		section(secGlobal, vec(cat([]byte{api.ValueTypeI32, 1}, i32c(0), op(opEnd)))),
		exports(exportEntry("run", ExternFunc, 1), exportEntry("cnt", ExternGlobal, 0), exportEntry("mem", ExternMemory, 0)),
		section(secElement, vec(cat(u32(0), i32c(0), op(opEnd), vec(slots...)))),
		section(secDataCount, u32(0)),
		codes(bodies...),
	), arg
}

// genMaxBulkCharge is the largest dynamic charge of a generated module:
// its memory.fill of up to 249 × 8 bytes (memory.copy moves under 100).
const genMaxBulkCharge = (249 * 8) >> BulkShift

const (
	acc      = 1 // local: the accumulator; local 0 is the parameter
	maxLoops = 2 // loop nesting; locals 2.. are the loop counters
	// A dispatch loop's $pc and its budget of backward jumps.
	pcLocal   = 2 + maxLoops
	backLocal = 3 + maxLoops
)

type gen struct {
	data        []byte
	pos         int
	nf          int    // defined functions, indices 1..nf
	fn          int    // the function being generated
	labels      []byte // enclosing labels, innermost last: opBlock, opLoop, opIf, labelValue
	loops       int
	dispatching bool // inside a dispatch loop (they do not nest)
	budget      int  // statements left in this function
}

func (g *gen) next() byte {
	if g.pos >= len(g.data) {
		return 0
	}
	b := g.data[g.pos]
	g.pos++
	return b
}

func (g *gen) n(k int) int { return int(g.next()) % k }

// counter is "cnt++" (4 operators).
func (g *gen) counter() []byte {
	return cat(globalGet(0), i32c(1), op(0x6a), globalSet(0))
}

// cond pushes a condition derived from the accumulator.
func (g *gen) cond() []byte {
	return cat(localGet(acc), i32c(int32(1)<<g.n(5)), op(opI32And))
}

// stmts is a sequence of stack-neutral statements.
func (g *gen) stmts(depth int) []byte {
	var out []byte
	n := g.n(4)
	if depth == 3 {
		n = 3 + g.n(8) // the function body
	}
	for ; n >= 0 && g.budget > 0; n-- {
		g.budget--
		out = append(out, g.stmt(depth)...)
	}
	return out
}

func (g *gen) nested(kind byte, depth int, f func() []byte) []byte {
	g.labels = append(g.labels, kind)
	defer func() { g.labels = g.labels[:len(g.labels)-1] }()
	return f()
}

func (g *gen) stmt(depth int) []byte {
	setAcc := func(code ...[]byte) []byte { return cat(cat(code...), localSet(acc)) }
	k := g.n(21)
	if depth == 0 && (k >= 2 && k <= 8 || k == 19) {
		k = 0
	}
	switch k {
	case 0: // arithmetic
		ops := []byte{0x6a, 0x6b, 0x6c, opI32Xor, 0x77 /* rotl */}
		return setAcc(localGet(acc), i32c(int32(g.next())-64), op(ops[g.n(len(ops))]))
	case 1:
		return g.counter()
	case 2: // block with a forward br_if to one of the enclosing blocks
		return g.nested(opBlock, depth, func() []byte {
			return block(blockEmpty, g.stmts(depth-1), g.cond(), brIf(g.forwardLabel()), g.stmts(depth-1))
		})
	case 3: // do-while loop: the back edge is a br_if at the bottom
		if g.loops >= maxLoops {
			return g.counter()
		}
		c := uint32(2 + g.loops)
		g.loops++
		defer func() { g.loops-- }()
		// The counter at the top or, so that a statement (a loop, an if)
		// can open right at the loop's top, at the bottom.
		top, bottom := g.counter(), []byte(nil)
		switch g.n(3) {
		case 0:
			top, bottom = nil, top
		case 1:
			// A loop right at the top of this one, whose back edge is to
			// this loop: both headers are empty when the inner one opens.
			return cat(i32c(int32(1+g.n(3))), localSet(c), g.nested(opLoop, depth, func() []byte {
				return loop(blockEmpty, g.nested(opLoop, depth, func() []byte {
					return loop(blockEmpty, g.counter(), g.stmts(depth-1),
						localGet(c), i32c(1), op(opI32Sub), localTee(c), brIf(1))
				}))
			}))
		}
		return cat(i32c(int32(1+g.n(3))), localSet(c), g.nested(opLoop, depth, func() []byte {
			return loop(blockEmpty, top, g.stmts(depth-1), bottom,
				localGet(c), i32c(1), op(opI32Sub), localTee(c), brIf(0))
		}))
	case 4: // while loop: br_if out at the top, br back at the bottom
		if g.loops >= maxLoops {
			return g.counter()
		}
		c := uint32(2 + g.loops)
		g.loops++
		defer func() { g.loops-- }()
		return cat(i32c(int32(g.n(4))), localSet(c), g.nested(opBlock, depth, func() []byte {
			return block(blockEmpty, g.nested(opLoop, depth, func() []byte {
				return loop(blockEmpty, g.counter(), localGet(c), op(opI32Eqz), brIf(1),
					g.stmts(depth-1), localGet(c), i32c(1), op(opI32Sub), localSet(c), br(0))
			}))
		}))
	case 5: // if, with or without else
		return cat(g.cond(), g.nested(opIf, depth, func() []byte {
			then := g.stmts(depth - 1)
			if g.n(2) == 0 {
				return ifElse(blockEmpty, then, nil)
			}
			return ifElse(blockEmpty, then, cat(op(opNop), g.stmts(depth-1)))
		}))
	case 6: // if with a result
		return setAcc(g.cond(), g.nested(labelValue, depth, func() []byte {
			return ifElse(api.ValueTypeI32, cat(g.stmts(depth-1), localGet(acc), i32c(3), op(0x6a)),
				cat(g.stmts(depth-1), localGet(acc)))
		}))
	case 7: // br_table over three blocks
		return g.nested(opBlock, depth, func() []byte {
			return block(blockEmpty, g.nested(opBlock, depth, func() []byte {
				return block(blockEmpty, g.nested(opBlock, depth, func() []byte {
					return block(blockEmpty, localGet(acc), i32c(3), op(opI32RemU),
						brTable(uint32(g.n(3)), uint32(g.n(3)), uint32(g.n(3))), g.stmts(depth-1))
				}), setAcc(localGet(acc), i32c(5), op(0x6a)))
			}), setAcc(localGet(acc), i32c(7), op(opI32Xor)))
		})
	case 8: // dead code after br
		return g.nested(opBlock, depth, func() []byte {
			return block(blockEmpty, br(0), g.stmts(depth-1))
		})
	case 9: // early return, when three bits of the accumulator are 0
		return cat(localGet(acc), i32c(7<<g.n(8)), op(opI32And), op(opI32Eqz),
			ifElse(blockEmpty, cat(localGet(acc), op(opReturn)), nil))
	case 10: // br_if to the function's own label
		return cat(localGet(acc), localGet(acc), i32c(7<<g.n(8)), op(opI32And), op(opI32Eqz),
			brIf(uint32(len(g.labels))), op(opDrop))
	case 11: // direct call of a later function or the host
		f := uint32(0)
		if g.fn < g.nf && g.n(4) != 0 {
			f = uint32(g.fn + 1 + g.n(g.nf-g.fn))
		}
		return setAcc(localGet(acc), call(f), localGet(acc), op(opI32Xor))
	case 12: // indirect call of a later function
		if g.fn >= g.nf {
			return g.counter()
		}
		slot := int32(g.fn + g.n(g.nf-g.fn)) // table slot s holds function s+1
		return setAcc(localGet(acc), i32c(slot), op(opCallIndirect), u32(0), u32(0), localGet(acc), op(0x6a))
	case 13: // store and load
		addr := i32c(int32(g.n(1000)) * 4)
		return cat(addr, localGet(acc), op(0x36, 2), u32(0),
			setAcc(addr, op(opI32Load, 2), u32(0), localGet(acc), op(0x6a)))
	case 14: // memory.fill
		return cat(i32c(int32(g.n(4000))), localGet(acc), i32c(int32(g.n(250))*8), misc(miscMemoryFill, 0))
	case 15: // memory.grow
		return setAcc(i32c(int32(g.n(2))), op(opMemoryGrow, 0), localGet(acc), op(opI32Xor))
	case 16: // a division that traps when the accumulator's low bits are 0
		if g.n(8) != 0 {
			return g.counter()
		}
		return setAcc(localGet(acc), localGet(acc), i32c(3), op(opI32And), op(0x6e /* div_u */))
	case 17: // block with a parameter and a result (type 0: i32 -> i32)
		return setAcc(localGet(acc), g.nested(labelValue, depth, func() []byte {
			return cat([]byte{opBlock}, u32(0), i32c(int32(g.next())), op(0x6a), []byte{opEnd})
		}))
	case 18: // select
		return setAcc(localGet(acc), i32c(int32(g.next())), g.cond(), op(opSelect))
	case 19:
		return g.dispatchLoop(depth)
	default: // memory.copy
		return cat(i32c(int32(g.n(4000))), i32c(int32(g.n(4000))), i32c(int32(g.n(100))), misc(miscMemoryCopy, 0, 0))
	}
}

// labelValue marks a label whose block has a result: no statement branches
// to it.
const labelValue = 0xff

// forwardLabel picks a label to branch forward to: an enclosing block or
// if without a result (never a loop, whose back edge could run forever).
func (g *gen) forwardLabel() uint32 {
	var cands []uint32
	for d := range len(g.labels) {
		if l := g.labels[len(g.labels)-1-d]; l != opLoop && l != labelValue {
			cands = append(cands, uint32(d))
		}
	}
	return cands[g.n(len(cands))]
}

// dispatchLoop is a loop in the shape Go's compiler gives functions that
// jump: three blocks and a br_table on $pc, then code blocks 0, 1 and 2.
// Code blocks 0 and 1 may jump forward ("i32.const N; local.set $pc; br"
// to the loop, under a condition); code block 1 jumps back to code block 0
// while $back, 0 to 3, is not spent.
func (g *gen) dispatchLoop(depth int) []byte {
	if g.dispatching {
		return g.counter()
	}
	g.dispatching = true
	defer func() { g.dispatching = false }()
	// inside generates f's code with kinds as the labels around it.
	inside := func(kinds []byte, f func() []byte) []byte {
		n := len(g.labels)
		g.labels = append(g.labels, kinds...)
		defer func() { g.labels = g.labels[:n] }()
		return f()
	}
	// jump sets $pc to target and branches to the loop, whose label is
	// open blocks out, when cond holds (inside an if: one label more).
	jump := func(target int32, open uint32, cond []byte) []byte {
		return cat(cond, ifElse(blockEmpty, cat(i32c(target), localSet(pcLocal), br(open+1)), nil))
	}
	code0 := inside([]byte{opLoop, opBlock, opBlock}, func() []byte {
		c := cat(g.counter(), g.stmts(depth-1))
		if g.n(2) == 0 {
			c = cat(c, jump(int32(1+g.n(2)), 2, g.cond())) // to code block 1 or 2
		}
		return c
	})
	code1 := inside([]byte{opLoop, opBlock}, func() []byte {
		c := cat(g.stmts(depth-1), localGet(backLocal), ifElse(blockEmpty,
			cat(localGet(backLocal), i32c(1), op(opI32Sub), localSet(backLocal), i32c(0), localSet(pcLocal), br(2)), nil))
		if g.n(2) == 0 {
			c = cat(c, jump(2, 1, g.cond()))
		}
		return c
	})
	code2 := inside([]byte{opLoop}, func() []byte { return g.stmts(depth - 1) })
	return cat(i32c(0), localSet(pcLocal), i32c(int32(g.n(4))), localSet(backLocal),
		loop(blockEmpty,
			block(blockEmpty,
				block(blockEmpty,
					block(blockEmpty, localGet(pcLocal), brTable(2, 0, 1, 2)),
					code0),
				code1),
			code2))
}
