package canon

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"
	"github.com/tetratelabs/wazero/api"
)

// memory is a guest memory for the tests, with a bump allocator as its
// realloc.
type memory struct {
	b    []byte
	next uint32
}

func newMemory(size int) *memory { return &memory{b: make([]byte, size), next: 8} }

func (m *memory) Size() uint32 { return uint32(len(m.b)) }

func (m *memory) Read(off, n uint32) ([]byte, bool) {
	if uint64(off)+uint64(n) > uint64(len(m.b)) {
		return nil, false
	}
	return m.b[off : off+n], true
}

func (m *memory) Write(off uint32, v []byte) bool {
	if uint64(off)+uint64(len(v)) > uint64(len(m.b)) {
		return false
	}
	copy(m.b[off:], v)
	return true
}

func (m *memory) realloc(_, _, align, size uint32) (uint32, error) {
	p := alignTo(m.next, align)
	if uint64(p)+uint64(size) > uint64(len(m.b)) {
		return 0, errors.New("test memory full")
	}
	m.next = p + size
	return p, nil
}

func (m *memory) options(enc Encoding) *Options {
	budget := int64(1 << 20)
	return &Options{Memory: m, Realloc: m.realloc, Encoding: enc, Budget: &budget}
}

// TestLayout checks sizes, alignments and flattenings against the
// canonical ABI's definitions, worked out by hand.
func TestLayout(t *testing.T) {
	i32, i64, f32 := api.ValueTypeI32, api.ValueTypeI64, api.ValueTypeF32
	names := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = "c" + string(rune('a'+i%26)) + string(rune('a'+i/26%26))
		}
		return out
	}
	tests := []struct {
		name        string
		t           *Type
		size, align uint32
		flat        []api.ValueType
	}{
		{"bool", Prim(Bool), 1, 1, []api.ValueType{i32}},
		{"u64", Prim(U64), 8, 8, []api.ValueType{i64}},
		{"char", Prim(Char), 4, 4, []api.ValueType{i32}},
		{"string", Prim(String), 8, 4, []api.ValueType{i32, i32}},
		{"list<u8>", ListOf(Prim(U8)), 8, 4, []api.ValueType{i32, i32}},
		{"record{u8,u32,u16}", RecordOf([]string{"a", "b", "c"}, Prim(U8), Prim(U32), Prim(U16)), 12, 4, []api.ValueType{i32, i32, i32}},
		{"tuple<u8,u64>", TupleOf(Prim(U8), Prim(U64)), 16, 8, []api.ValueType{i32, i64}},
		{"option<u64>", OptionOf(Prim(U64)), 16, 8, []api.ValueType{i32, i64}},
		{"option<f32>", OptionOf(Prim(F32)), 8, 4, []api.ValueType{i32, f32}},
		{"result<u32,string>", ResultOf(Prim(U32), Prim(String)), 12, 4, []api.ValueType{i32, i32, i32}},
		{"result<_,_>", ResultOf(nil, nil), 1, 1, []api.ValueType{i32}},
		{"variant{f32,u64}", VariantOf([]string{"a", "b"}, Prim(F32), Prim(U64)), 16, 8, []api.ValueType{i32, i64}},
		{"variant{f32,u32}", VariantOf([]string{"a", "b"}, Prim(F32), Prim(U32)), 8, 4, []api.ValueType{i32, i32}},
		{"variant{u8,_,string}", VariantOf([]string{"a", "b", "c"}, Prim(U8), nil, Prim(String)), 12, 4, []api.ValueType{i32, i32, i32}},
		{"enum of 3", EnumOf("a", "b", "c"), 1, 1, []api.ValueType{i32}},
		{"enum of 300", EnumOf(names(300)...), 2, 2, []api.ValueType{i32}},
		{"flags of 8", FlagsOf(names(8)...), 1, 1, []api.ValueType{i32}},
		{"flags of 9", FlagsOf(names(9)...), 2, 2, []api.ValueType{i32}},
		{"flags of 17", FlagsOf(names(17)...), 4, 4, []api.ValueType{i32}},
		{"own", OwnOf(1), 4, 4, []api.ValueType{i32}},
		{"borrow", BorrowOf(1), 4, 4, []api.ValueType{i32}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.t.Size(); got != tt.size {
				t.Errorf("Size = %d, want %d", got, tt.size)
			}
			if got := tt.t.Align(); got != tt.align {
				t.Errorf("Align = %d, want %d", got, tt.align)
			}
			if got := tt.t.Flat(); !slices.Equal(got, tt.flat) {
				t.Errorf("Flat = %v, want %v", got, tt.flat)
			}
		})
	}
}

// TestSignature checks core signatures of real WASI 0.2 functions, as
// wasm-tools lowers and lifts them.
func TestSignature(t *testing.T) {
	i32, i64 := api.ValueTypeI32, api.ValueTypeI64
	headerError := VariantOf([]string{"invalid-syntax", "forbidden", "immutable"}, nil, nil, nil)
	tests := []struct {
		name            string
		params, results []*Type
		lower           bool
		core, coreRes   []api.ValueType
	}{
		// [method]fields.append: func(self: borrow<fields>, name: string, value: list<u8>) -> result<_, header-error>
		{"fields.append lowered", []*Type{BorrowOf(1), Prim(String), ListOf(Prim(U8))}, []*Type{ResultOf(nil, headerError)}, true,
			[]api.ValueType{i32, i32, i32, i32, i32, i32}, nil},
		// [method]fields.entries: func(self: borrow<fields>) -> list<tuple<string, list<u8>>>
		{"fields.entries lowered", []*Type{BorrowOf(1)}, []*Type{ListOf(TupleOf(Prim(String), ListOf(Prim(U8))))}, true,
			[]api.ValueType{i32, i32}, nil},
		// wasi:clocks/monotonic-clock.now: func() -> u64
		{"now lowered", nil, []*Type{Prim(U64)}, true, nil, []api.ValueType{i64}},
		// incoming-handler.handle: func(request: own<incoming-request>, response-out: own<response-outparam>)
		{"handle lifted", []*Type{OwnOf(1), OwnOf(2)}, nil, false, []api.ValueType{i32, i32}, nil},
		// a lifted function with a string result returns a pointer
		{"string result lifted", nil, []*Type{Prim(String)}, false, nil, []api.ValueType{i32}},
		// over 16 flat parameters: one pointer
		{"17 params lowered", slices.Repeat([]*Type{Prim(U32)}, 17), nil, true, []api.ValueType{i32}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			core, res := Signature(tt.params, tt.results, tt.lower)
			if !slices.Equal(core, tt.core) || !slices.Equal(res, tt.coreRes) {
				t.Errorf("Signature = %v -> %v, want %v -> %v", core, res, tt.core, tt.coreRes)
			}
		})
	}
}

// genType is a random type of at most depth levels; resources are left
// out (their values are handles, which Load does not check).
func genType(r *rand.Rand, depth int) *Type {
	n := 14
	if depth > 0 {
		n = 23
	}
	switch k := r.IntN(n); {
	case k < 13:
		return Prim(Kind(k + 1))
	case k == 13:
		return EnumOf("a", "b", "c", "d", "e")
	case k == 14:
		return ListOf(genType(r, depth-1))
	case k == 15:
		return ListOf(Prim(U8))
	case k == 16:
		fs := make([]*Type, 1+r.IntN(4))
		names := make([]string, len(fs))
		for i := range fs {
			fs[i], names[i] = genType(r, depth-1), "f"+string(rune('a'+i))
		}
		return RecordOf(names, fs...)
	case k == 17:
		return TupleOf(genType(r, depth-1), genType(r, depth-1))
	case k == 18:
		cs := make([]*Type, 1+r.IntN(4))
		names := make([]string, len(cs))
		for i := range cs {
			names[i] = "c" + string(rune('a'+i))
			if r.IntN(3) > 0 {
				cs[i] = genType(r, depth-1)
			}
		}
		return VariantOf(names, cs...)
	case k == 19:
		return OptionOf(genType(r, depth-1))
	case k == 20:
		var ok, bad *Type
		if r.IntN(2) == 0 {
			ok = genType(r, depth-1)
		}
		if r.IntN(2) == 0 {
			bad = genType(r, depth-1)
		}
		return ResultOf(ok, bad)
	case k == 21:
		return FlagsOf("a", "b", "c", "d", "e", "f", "g", "h", "i", "j")
	default:
		return EnumOf("a", "b", "c")
	}
}

// genValue is a random Go value of type t, as Load returns it.
func genValue(r *rand.Rand, t *Type) any {
	switch t.Kind {
	case Bool:
		return r.IntN(2) == 1
	case S8:
		return int64(int8(r.Uint32()))
	case U8:
		return uint64(uint8(r.Uint32()))
	case S16:
		return int64(int16(r.Uint32()))
	case U16:
		return uint64(uint16(r.Uint32()))
	case S32:
		return int64(int32(r.Uint32()))
	case U32:
		return uint64(r.Uint32())
	case S64:
		return int64(r.Uint64())
	case U64:
		return r.Uint64()
	case F32:
		return float32(r.NormFloat64())
	case F64:
		return r.NormFloat64()
	case Char:
		return genRune(r)
	case String:
		var b strings.Builder
		for range r.IntN(12) {
			b.WriteRune(genRune(r))
		}
		return b.String()
	case List:
		n := r.IntN(4)
		if t.Elem.Kind == U8 {
			if n == 0 {
				return []byte(nil) // as Load returns it
			}
			b := make([]byte, n)
			for i := range b {
				b[i] = byte(r.Uint32())
			}
			return b
		}
		out := make([]any, n)
		for i := range out {
			out[i] = genValue(r, t.Elem)
		}
		return out
	case Record, Tuple:
		out := make([]any, len(t.Fields))
		for i, f := range t.Fields {
			out[i] = genValue(r, f)
		}
		return out
	case Enum:
		return uint32(r.IntN(len(t.Names)))
	case Flags:
		return uint32(r.IntN(1 << len(t.Names)))
	}
	cases := t.cases()
	c := Case{Index: uint32(r.IntN(len(cases)))}
	if p := cases[c.Index]; p != nil {
		c.Value = genValue(r, p)
	}
	return c
}

// genRune is a Unicode scalar value: ASCII, Latin-1, the BMP or beyond
// (surrogate pairs in UTF-16).
func genRune(r *rand.Rand) rune {
	switch r.IntN(4) {
	case 0:
		return rune(0x20 + r.IntN(0x5f))
	case 1:
		return rune(0xa0 + r.IntN(0x60))
	case 2:
		return rune(0xe000 + r.IntN(0x1000))
	default:
		return rune(0x10000 + r.IntN(0x10000))
	}
}

// TestStoreLoad_roundTrip is a property test: for random types and
// values, in every string encoding, Load returns what Store wrote, and
// LiftArgs returns what LowerArgs lowered (flat or through memory).
func TestStoreLoad_roundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		typ := genType(r, 3)
		v := genValue(r, typ)
		for _, enc := range []Encoding{UTF8, UTF16, Latin1UTF16} {
			m := newMemory(1 << 16)
			o := m.options(enc)
			ptr, err := o.alloc(typ.Size(), typ.Align())
			if err != nil {
				t.Fatal(err)
			}
			if err := Store(o, typ, ptr, v); err != nil {
				t.Fatalf("case %d: Store(%v): %v", i, v, err)
			}
			got, err := Load(o, typ, ptr)
			if err != nil {
				t.Fatalf("case %d: Load: %v", i, err)
			}
			if !reflect.DeepEqual(got, v) {
				t.Fatalf("case %d, encoding %d: Load = %#v, want %#v", i, enc, got, v)
			}
			params := []*Type{typ, Prim(U32)}
			vals := []any{v, uint64(7)}
			if r.IntN(2) == 0 {
				params = slices.Repeat(params, 9) // over MaxFlatParams: through memory
				vals = slices.Repeat(vals, 9)
			}
			core, err := LowerArgs(o, params, vals)
			if err != nil {
				t.Fatalf("case %d: LowerArgs: %v", i, err)
			}
			back, err := LiftArgs(o, params, core)
			if err != nil {
				t.Fatalf("case %d: LiftArgs: %v", i, err)
			}
			if !reflect.DeepEqual(back, vals) {
				t.Fatalf("case %d: LiftArgs(LowerArgs(v)) = %#v, want %#v", i, back, vals)
			}
		}
	}
}

// TestLoad_guestLies: every lie a guest can tell in its memory is a trap
// (ErrTrap), not a panic or a value.
func TestLoad_guestLies(t *testing.T) {
	le := binary.LittleEndian
	type lie struct {
		name  string
		t     *Type
		enc   Encoding
		setup func(b []byte) // memory at 0..; the value is read at 16
		ptr   uint32
		want  string
	}
	str := func(p, n uint32) func(b []byte) {
		return func(b []byte) { le.PutUint32(b[16:], p); le.PutUint32(b[20:], n) }
	}
	tests := []lie{
		{"pointer past the end", Prim(U32), UTF8, nil, 1 << 16, "out of bounds"},
		{"pointer misaligned", Prim(U32), UTF8, nil, 18, "not aligned"},
		{"string past the end", Prim(String), UTF8, str(1<<16-2, 4), 16, "out of bounds"},
		{"string length wraps", Prim(String), UTF8, str(64, 0xffffffff), 16, "code units"},
		{"string not UTF-8", Prim(String), UTF8, func(b []byte) { str(64, 2)(b); b[64], b[65] = 0xc3, 0x28 }, 16, "UTF-8"},
		{"string lone surrogate", Prim(String), UTF16, func(b []byte) { str(64, 1)(b); le.PutUint16(b[64:], 0xd800) }, 16, "UTF-16"},
		{"string misaligned UTF-16", Prim(String), UTF16, str(65, 1), 16, "not aligned"},
		{"latin1+utf16 tagged past the end", Prim(String), Latin1UTF16, str(1<<16-2, 1<<31|2), 16, "out of bounds"},
		{"list past the end", ListOf(Prim(U64)), UTF8, str(64, 1<<13), 16, "out of bounds"},
		{"list length overflows", ListOf(Prim(U64)), UTF8, str(64, 1<<30), 16, "out of bounds"},
		{"list of empties too long", ListOf(TupleOf()), UTF8, str(64, 1<<20), 16, "out of bounds"},
		{"char surrogate", Prim(Char), UTF8, func(b []byte) { le.PutUint32(b[16:], 0xdfff) }, 16, "scalar"},
		{"char too large", Prim(Char), UTF8, func(b []byte) { le.PutUint32(b[16:], 0x110000) }, 16, "scalar"},
		{"discriminant out of range", ResultOf(nil, nil), UTF8, func(b []byte) { b[16] = 2 }, 16, "discriminant"},
		{"enum out of range", EnumOf("a", "b", "c"), UTF8, func(b []byte) { b[16] = 3 }, 16, "discriminant"},
		{"option garbage", OptionOf(Prim(U32)), UTF8, func(b []byte) { b[16] = 0xff }, 16, "discriminant"},
		{"nested lie", ListOf(Prim(String)), UTF8, func(b []byte) { str(64, 1)(b); le.PutUint32(b[64:], 1<<16); le.PutUint32(b[68:], 1) }, 16, "out of bounds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMemory(1 << 16)
			if tt.setup != nil {
				tt.setup(m.b)
			}
			v, err := Load(m.options(tt.enc), tt.t, tt.ptr)
			if !errors.Is(err, ErrTrap) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Load = %v, %v; want a trap saying %q", v, err, tt.want)
			}
		})
	}
}

// TestLoad_budget: lifting stops at the budget; without one the same value
// lifts (the negative control).
func TestLoad_budget(t *testing.T) {
	le := binary.LittleEndian
	m := newMemory(1 << 16)
	le.PutUint32(m.b[16:], 64)
	le.PutUint32(m.b[20:], 30000)
	typ := ListOf(Prim(U8))
	budget := int64(1000)
	o := &Options{Memory: m, Budget: &budget}
	if _, err := Load(o, typ, 16); !errors.Is(err, ErrTrap) || !strings.Contains(err.Error(), "bound") {
		t.Fatalf("Load over the budget = %v, want a trap", err)
	}
	if v, err := Load(&Options{Memory: m}, typ, 16); err != nil || len(v.([]byte)) != 30000 {
		t.Fatalf("Load without a budget = %v, want 30000 bytes", err)
	}
	// A view is neither copied nor charged: it reads what the memory
	// holds, and cannot be appended to in place.
	budget = 1000
	view := &Options{Memory: m, Budget: &budget, ViewBytes: true}
	v, err := Load(view, typ, 16)
	if err != nil || budget != 1000 {
		t.Fatalf("Load of a view = %v, budget %d; want no charge", err, budget)
	}
	b := v.([]byte)
	m.b[64] = 'z'
	if len(b) != 30000 || cap(b) != 30000 || b[0] != 'z' {
		t.Fatalf("view of %d bytes (cap %d) reads %q, want the memory's", len(b), cap(b), b[0])
	}
	le.PutUint32(m.b[20:], 1<<20) // out of bounds stays a trap
	if _, err := Load(view, typ, 16); !errors.Is(err, ErrTrap) {
		t.Fatalf("Load of a view out of bounds = %v, want a trap", err)
	}
}

// TestStore_badRealloc: a realloc that returns a pointer out of bounds or
// misaligned is the guest's trap.
func TestStore_badRealloc(t *testing.T) {
	for _, p := range []uint32{1 << 16, 1<<16 - 2, 3} {
		m := newMemory(1 << 16)
		o := m.options(UTF8)
		o.Realloc = func(_, _, _, _ uint32) (uint32, error) { return p, nil }
		err := Store(o, ListOf(Prim(U32)), 16, []any{uint64(1), uint64(2)})
		if !errors.Is(err, ErrTrap) {
			t.Errorf("realloc returning %#x: Store = %v, want a trap", p, err)
		}
	}
}

// TestTable walks the handle table through its rules.
func TestTable(t *testing.T) {
	tab := NewTable(3)
	a, _ := tab.Add(1, "a")
	b, _ := tab.Add(2, "b")
	if a == 0 || b == 0 || a == b {
		t.Fatalf("handles %d, %d: want distinct and non-zero", a, b)
	}
	traps := []struct {
		name string
		err  error
	}{
		{"handle 0", func() error { _, err := tab.Get(0, 1); return err }()},
		{"unknown handle", func() error { _, err := tab.Get(99, 1); return err }()},
		{"wrong resource", func() error { _, err := tab.Get(a, 2); return err }()},
	}
	for _, tt := range traps {
		if !errors.Is(tt.err, ErrTrap) {
			t.Errorf("%s: %v, want a trap", tt.name, tt.err)
		}
	}
	if err := tab.Lend(a, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := tab.Remove(a, 1); !errors.Is(err, ErrTrap) {
		t.Errorf("Remove of a lent handle = %v, want a trap", err)
	}
	tab.Unlend(a)
	if rep, err := tab.Remove(a, 1); err != nil || rep != "a" {
		t.Fatalf("Remove = %v, %v", rep, err)
	}
	if _, err := tab.Get(a, 1); !errors.Is(err, ErrTrap) {
		t.Errorf("Get of a removed handle = %v, want a trap", err)
	}
	c, _ := tab.Add(1, "c")
	if c != a {
		t.Errorf("freed handle %d not reused (got %d)", a, c)
	}
	if _, err := tab.Add(1, "d"); err != nil {
		t.Fatal(err)
	}
	if _, err := tab.Add(1, "e"); !errors.Is(err, ErrTrap) || tab.Len() != 3 {
		t.Errorf("Add past the bound = %v with %d live, want a trap at 3", err, tab.Len())
	}
}

// FuzzLift loads a random type from hostile memory: it traps or returns a
// value that stores and loads back unchanged; it never panics.
func FuzzLift(f *testing.F) {
	f.Add(uint64(1), []byte{}, uint32(0), uint8(0))
	f.Add(uint64(7), []byte{16, 0, 0, 0, 3, 0, 0, 0, 'a', 'b', 'c'}, uint32(0), uint8(0))
	f.Add(uint64(9), []byte{16, 0, 0, 0, 2, 0, 0, 0x80, 0, 0xd8, 0, 0xdc}, uint32(0), uint8(2))
	f.Fuzz(func(t *testing.T, seed uint64, mem []byte, ptr uint32, enc uint8) {
		r := rand.New(rand.NewPCG(seed, seed>>7))
		typ := genType(r, 3)
		m := newMemory(4096)
		copy(m.b, mem)
		m.next = 2048
		budget := int64(1 << 16)
		o := &Options{Memory: m, Realloc: m.realloc, Encoding: Encoding(enc % 3), Budget: &budget}
		v, err := Load(o, typ, ptr%4096)
		if err != nil {
			if !errors.Is(err, ErrTrap) {
				t.Fatalf("Load: %v, not a trap", err)
			}
			return
		}
		m2 := newMemory(1 << 20)
		o2 := m2.options(o.Encoding)
		p, err := o2.alloc(typ.Size(), typ.Align())
		if err != nil {
			t.Fatal(err)
		}
		if err := Store(o2, typ, p, v); err != nil {
			t.Fatalf("Store of a loaded value: %v", err)
		}
		back, err := Load(o2, typ, p)
		// %#v, not DeepEqual: a NaN loaded is a NaN stored.
		if err != nil || fmt.Sprintf("%#v", back) != fmt.Sprintf("%#v", v) {
			t.Fatalf("round trip = %#v, %v; want %#v", back, err, v)
		}
	})
}

// recovered wraps err as wazero does a host function's panic.
type recovered struct{ err error }

func (r recovered) Error() string {
	return r.err.Error() + " (recovered by wazero)\nwasm stack trace:\n\tf()"
}
func (r recovered) Unwrap() error { return r.err }

// TestTrapMessage: the rule is found through the wrappings a trap gets on
// its way back (wazero's multi-line "recovered" wrapper, the runner's
// own), bounded, and absent for an error that is not a trap.
func TestTrapMessage(t *testing.T) {
	lie := trap("handle %d is not a live handle", 7)
	long := trap("%s", strings.Repeat("é", 300))
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"direct", lie, "handle 7 is not a live handle"},
		{"through wazero", recovered{lie}, "handle 7 is not a live handle"},
		{"wrapped outside", errors.Wrap(recovered{lie}, "runner: call"), "handle 7 is not a live handle"},
		{"wrapped by the host", errors.Wrapf(lie, "wasihttp: fields.append"), "wasihttp: fields.append: handle 7 is not a live handle"},
		{"not a trap", errors.New("runner: fuel exhausted"), ""},
		{"nil", nil, ""},
		{"bounded", long, strings.Repeat("é", maxTrapMessage/2) + "…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := TrapMessage(tc.err); got != tc.want {
				t.Fatalf("TrapMessage = %q, want %q", got, tc.want)
			}
		})
	}
}
