package canon

// Value types, their layout in linear memory and their flattening.

import (
	"github.com/cockroachdb/errors"
	"github.com/tetratelabs/wazero/api"
	"strings"
)

// Kind is a component value type's kind.
type Kind uint8

// The kinds.
const (
	Bool Kind = iota + 1
	S8
	U8
	S16
	U16
	S32
	U32
	S64
	U64
	F32
	F64
	Char
	String
	List
	Record
	Tuple
	Variant
	Enum
	Option
	Result
	Flags
	Own
	Borrow
)

// Type is a component value type; build it with the constructors. Types
// are immutable once built and may be shared.
type Type struct {
	Kind     Kind
	Elem     *Type    // List, Option
	Fields   []*Type  // Record, Tuple
	Names    []string // Record fields; Variant, Enum and Flags cases
	Cases    []*Type  // Variant payloads (nil: none); Result [ok, err]
	Resource uint32   // Own, Borrow
}

// Case is the value of a variant, an option (0 none, 1 some) or a result
// (0 ok, 1 error); Value is nil for a case without payload.
type Case struct {
	Index uint32
	Value any
}

// ErrTrap marks every error a guest's values cause: the activation traps.
var ErrTrap = errors.New("canon: trap")

func trap(format string, args ...any) error { return errors.Wrapf(ErrTrap, format, args...) }

// maxTrapMessage bounds TrapMessage.
const maxTrapMessage = 256

// TrapMessage is the rule a guest broke, from the outermost single-line
// error in err's chain that wraps ErrTrap ("string of 9 bytes out of
// bounds"), without the ErrTrap suffix and at most 256 bytes; "" when err
// is not a trap. The messages are the host's words about the guest's own
// values, so they may be shown to whoever called that guest.
func TrapMessage(err error) string {
	suffix := ": " + ErrTrap.Error()
	for e := err; e != nil; e = errors.UnwrapOnce(e) {
		m := e.Error()
		if !strings.HasSuffix(m, suffix) || strings.Contains(m, "\n") {
			continue
		}
		m = strings.TrimSuffix(m, suffix)
		if len(m) > maxTrapMessage {
			m = strings.ToValidUTF8(m[:maxTrapMessage], "") + "…"
		}
		return m
	}
	return ""
}

var prims = map[Kind]*Type{}

func init() {
	for k := Bool; k <= String; k++ {
		prims[k] = &Type{Kind: k}
	}
}

// Prim is the primitive type of kind k (Bool to String).
func Prim(k Kind) *Type { return prims[k] }

// ListOf is list<t>.
func ListOf(t *Type) *Type { return &Type{Kind: List, Elem: t} }

// RecordOf is a record of the named fields.
func RecordOf(names []string, fields ...*Type) *Type {
	return &Type{Kind: Record, Names: names, Fields: fields}
}

// TupleOf is a tuple.
func TupleOf(fields ...*Type) *Type { return &Type{Kind: Tuple, Fields: fields} }

// VariantOf is a variant of the named cases (a nil payload: none).
func VariantOf(names []string, cases ...*Type) *Type {
	return &Type{Kind: Variant, Names: names, Cases: cases}
}

// EnumOf is an enum.
func EnumOf(names ...string) *Type { return &Type{Kind: Enum, Names: names} }

// OptionOf is option<t>.
func OptionOf(t *Type) *Type { return &Type{Kind: Option, Elem: t} }

// ResultOf is result<ok, err> (either may be nil).
func ResultOf(ok, err *Type) *Type { return &Type{Kind: Result, Cases: []*Type{ok, err}} }

// FlagsOf is a flags type of at most 32 flags.
func FlagsOf(names ...string) *Type { return &Type{Kind: Flags, Names: names} }

// OwnOf and BorrowOf are handles to a resource of the host's type id.
func OwnOf(resource uint32) *Type    { return &Type{Kind: Own, Resource: resource} }
func BorrowOf(resource uint32) *Type { return &Type{Kind: Borrow, Resource: resource} }

// cases is a variant-like type's payload types: Variant's, Option's
// [nil, elem], Result's [ok, err], Enum's n nils.
func (t *Type) cases() []*Type {
	switch t.Kind {
	case Option:
		return []*Type{nil, t.Elem}
	case Enum:
		return make([]*Type, len(t.Names))
	}
	return t.Cases
}

func (t *Type) variantLike() bool {
	return t.Kind == Variant || t.Kind == Option || t.Kind == Result || t.Kind == Enum
}

func discSize(n int) uint32 {
	switch {
	case n <= 1<<8:
		return 1
	case n <= 1<<16:
		return 2
	}
	return 4
}

func alignTo(p, a uint32) uint32 { return (p + a - 1) / a * a }

// Align is the type's alignment in linear memory.
func (t *Type) Align() uint32 {
	switch t.Kind {
	case Bool, S8, U8:
		return 1
	case S16, U16:
		return 2
	case S32, U32, F32, Char, String, List, Own, Borrow:
		return 4
	case S64, U64, F64:
		return 8
	case Record, Tuple:
		a := uint32(1)
		for _, f := range t.Fields {
			a = max(a, f.Align())
		}
		return a
	case Flags:
		return flagsSize(len(t.Names))
	}
	a := discSize(len(t.cases()))
	for _, c := range t.cases() {
		if c != nil {
			a = max(a, c.Align())
		}
	}
	return a
}

func flagsSize(n int) uint32 {
	switch {
	case n == 0:
		return 1
	case n <= 8:
		return 1
	case n <= 16:
		return 2
	}
	return 4
}

// payloadOffset is where a variant-like type's payload starts.
func (t *Type) payloadOffset() uint32 {
	a := uint32(1)
	for _, c := range t.cases() {
		if c != nil {
			a = max(a, c.Align())
		}
	}
	return alignTo(discSize(len(t.cases())), a)
}

// Size is the type's size in linear memory (elem_size).
func (t *Type) Size() uint32 {
	switch t.Kind {
	case Bool, S8, U8:
		return 1
	case S16, U16:
		return 2
	case S32, U32, F32, Char, Own, Borrow:
		return 4
	case S64, U64, F64, String, List:
		return 8
	case Record, Tuple:
		s := uint32(0)
		for _, f := range t.Fields {
			s = alignTo(s, f.Align()) + f.Size()
		}
		return alignTo(s, t.Align())
	case Flags:
		if len(t.Names) == 0 {
			return 0
		}
		return flagsSize(len(t.Names))
	}
	s := uint32(0)
	for _, c := range t.cases() {
		if c != nil {
			s = max(s, c.Size())
		}
	}
	return alignTo(t.payloadOffset()+s, t.Align())
}

// Flat is the type's flattening into core value types.
func (t *Type) Flat() []api.ValueType {
	switch t.Kind {
	case S64, U64:
		return []api.ValueType{api.ValueTypeI64}
	case F32:
		return []api.ValueType{api.ValueTypeF32}
	case F64:
		return []api.ValueType{api.ValueTypeF64}
	case String, List:
		return []api.ValueType{api.ValueTypeI32, api.ValueTypeI32}
	case Record, Tuple:
		var out []api.ValueType
		for _, f := range t.Fields {
			out = append(out, f.Flat()...)
		}
		return out
	case Flags:
		if len(t.Names) == 0 {
			return nil
		}
		return []api.ValueType{api.ValueTypeI32}
	}
	if !t.variantLike() {
		return []api.ValueType{api.ValueTypeI32}
	}
	var payload []api.ValueType
	for _, c := range t.cases() {
		if c == nil {
			continue
		}
		for i, ft := range c.Flat() {
			if i < len(payload) {
				payload[i] = join(payload[i], ft)
			} else {
				payload = append(payload, ft)
			}
		}
	}
	return append([]api.ValueType{api.ValueTypeI32}, payload...)
}

func join(a, b api.ValueType) api.ValueType {
	switch {
	case a == b:
		return a
	case a == api.ValueTypeI32 && b == api.ValueTypeF32, a == api.ValueTypeF32 && b == api.ValueTypeI32:
		return api.ValueTypeI32
	}
	return api.ValueTypeI64
}

// The flattening limits of the canonical ABI.
const (
	MaxFlatParams  = 16
	MaxFlatResults = 1
)

func flatAll(ts []*Type) []api.ValueType {
	var out []api.ValueType
	for _, t := range ts {
		out = append(out, t.Flat()...)
	}
	return out
}

// Signature is the core type of a function with these parameters and
// results: lowered (a host function the guest calls: results over one
// flat value come back through a return pointer, its last parameter) or
// lifted (a guest export the host calls: results over one flat value are
// one pointer result). Parameters over 16 flat values are one pointer.
func Signature(params, results []*Type, lower bool) (core, coreResults []api.ValueType) {
	core = flatAll(params)
	if len(core) > MaxFlatParams {
		core = []api.ValueType{api.ValueTypeI32}
	}
	coreResults = flatAll(results)
	if len(coreResults) > MaxFlatResults {
		if lower {
			core = append(core, api.ValueTypeI32)
			coreResults = nil
		} else {
			coreResults = []api.ValueType{api.ValueTypeI32}
		}
	}
	return core, coreResults
}
