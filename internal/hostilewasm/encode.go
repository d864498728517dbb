package hostilewasm

// Module and its parts (types, imports, functions, tables, memories,
// exports, data), and their encoding in the WebAssembly binary format.

// ValType is a WebAssembly value type code (the same codes as wazero's
// api.ValueType).
type ValType byte

// The value types the generators use.
const (
	I32     ValType = 0x7f
	I64     ValType = 0x7e
	FuncRef ValType = 0x70
)

// Export kinds.
const (
	ExportFunc   byte = 0x00
	ExportTable  byte = 0x01
	ExportMemory byte = 0x02
)

// FuncType is a function signature.
type FuncType struct {
	Params, Results []ValType
}

// Import is a function import of type index Type.
type Import struct {
	Module, Name string
	Type         uint32
}

// Local declares Count locals of type Type.
type Local struct {
	Count uint32
	Type  ValType
}

// Func is a defined function. Body holds its instructions without the
// final end opcode, which Encode appends.
type Func struct {
	Type   uint32
	Locals []Local
	Body   []byte
}

// Limits are a table's or memory's minimum and optional maximum.
type Limits struct {
	Min    uint32
	Max    uint32
	HasMax bool
}

// Export names a function, table or memory.
type Export struct {
	Name  string
	Kind  byte
	Index uint32
}

// Data is an active data segment of memory 0 at a constant offset.
type Data struct {
	Offset uint32
	Bytes  []byte
}

// Module is a module to encode. Function indexes count the imports first.
type Module struct {
	Types    []FuncType
	Imports  []Import
	Funcs    []Func
	Tables   []Limits // funcref tables
	Memories []Limits
	Exports  []Export
	Start    *uint32
	Data     []Data
}

// Section ids of the binary format.
const (
	secType     = 1
	secImport   = 2
	secFunction = 3
	secTable    = 4
	secMemory   = 5
	secExport   = 7
	secStart    = 8
	secCode     = 10
	secData     = 11
	secDataCnt  = 12
	opEnd       = 0x0b
	opI32Const  = 0x41
	importFunc  = 0x00
	funcTypeTag = 0x60
)

// Encode returns the module's binary encoding.
func (m *Module) Encode() []byte {
	out := []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}
	if len(m.Types) > 0 {
		var s []byte
		s = AppendU32(s, uint32(len(m.Types)))
		for _, t := range m.Types {
			s = append(s, funcTypeTag)
			s = appendValTypes(s, t.Params)
			s = appendValTypes(s, t.Results)
		}
		out = appendSection(out, secType, s)
	}
	if len(m.Imports) > 0 {
		var s []byte
		s = AppendU32(s, uint32(len(m.Imports)))
		for _, im := range m.Imports {
			s = appendName(s, im.Module)
			s = appendName(s, im.Name)
			s = append(s, importFunc)
			s = AppendU32(s, im.Type)
		}
		out = appendSection(out, secImport, s)
	}
	if len(m.Funcs) > 0 {
		var s []byte
		s = AppendU32(s, uint32(len(m.Funcs)))
		for _, f := range m.Funcs {
			s = AppendU32(s, f.Type)
		}
		out = appendSection(out, secFunction, s)
	}
	if len(m.Tables) > 0 {
		var s []byte
		s = AppendU32(s, uint32(len(m.Tables)))
		for _, t := range m.Tables {
			s = append(s, byte(FuncRef))
			s = appendLimits(s, t)
		}
		out = appendSection(out, secTable, s)
	}
	if len(m.Memories) > 0 {
		var s []byte
		s = AppendU32(s, uint32(len(m.Memories)))
		for _, l := range m.Memories {
			s = appendLimits(s, l)
		}
		out = appendSection(out, secMemory, s)
	}
	if len(m.Exports) > 0 {
		var s []byte
		s = AppendU32(s, uint32(len(m.Exports)))
		for _, e := range m.Exports {
			s = appendName(s, e.Name)
			s = append(s, e.Kind)
			s = AppendU32(s, e.Index)
		}
		out = appendSection(out, secExport, s)
	}
	if m.Start != nil {
		out = appendSection(out, secStart, AppendU32(nil, *m.Start))
	}
	if len(m.Data) > 0 {
		// The data count section lets bulk-memory instructions validate.
		out = appendSection(out, secDataCnt, AppendU32(nil, uint32(len(m.Data))))
	}
	if len(m.Funcs) > 0 {
		size := 0
		for _, f := range m.Funcs {
			size += len(f.Body) + 16 + 6*len(f.Locals)
		}
		s := make([]byte, 0, size+5)
		s = AppendU32(s, uint32(len(m.Funcs)))
		for _, f := range m.Funcs {
			var head []byte
			head = AppendU32(head, uint32(len(f.Locals)))
			for _, l := range f.Locals {
				head = AppendU32(head, l.Count)
				head = append(head, byte(l.Type))
			}
			s = AppendU32(s, uint32(len(head)+len(f.Body)+1))
			s = append(s, head...)
			s = append(s, f.Body...)
			s = append(s, opEnd)
		}
		out = appendSection(out, secCode, s)
	}
	if len(m.Data) > 0 {
		var s []byte
		s = AppendU32(s, uint32(len(m.Data)))
		for _, d := range m.Data {
			s = append(s, 0x00, opI32Const) // active, memory 0
			s = AppendI32(s, int32(d.Offset))
			s = append(s, opEnd)
			s = AppendU32(s, uint32(len(d.Bytes)))
			s = append(s, d.Bytes...)
		}
		out = appendSection(out, secData, s)
	}
	return out
}

// AppendU32 appends v in unsigned LEB128.
func AppendU32(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// AppendI32 appends v in signed LEB128.
func AppendI32(b []byte, v int32) []byte { return AppendI64(b, int64(v)) }

// AppendI64 appends v in signed LEB128.
func AppendI64(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func appendValTypes(b []byte, ts []ValType) []byte {
	b = AppendU32(b, uint32(len(ts)))
	for _, t := range ts {
		b = append(b, byte(t))
	}
	return b
}

func appendName(b []byte, s string) []byte {
	b = AppendU32(b, uint32(len(s)))
	return append(b, s...)
}

func appendLimits(b []byte, l Limits) []byte {
	if l.HasMax {
		b = append(b, 0x01)
		b = AppendU32(b, l.Min)
		return AppendU32(b, l.Max)
	}
	b = append(b, 0x00)
	return AppendU32(b, l.Min)
}

func appendSection(b []byte, id byte, payload []byte) []byte {
	b = append(b, id)
	b = AppendU32(b, uint32(len(payload)))
	return append(b, payload...)
}
