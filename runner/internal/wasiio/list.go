package wasiio

// The WASI string lists: args_get, environ_get and their sizes.

import (
	"strings"

	"github.com/tetratelabs/wazero/api"
)

// List is a WASI string list (the arguments or the environment): at
// most two entries, each the concatenation of a fixed prefix and a value, so
// an activation states its list without building strings, then the entries
// of extra as they are (a WAGI revision's CGI environment, "NAME=value"
// each).
type List struct {
	N     int
	Parts [2][2]string // prefix, value
	Extra []string
}

// Size is the length of the list's NUL-terminated strings together.
func (l *List) Size() uint32 {
	var n uint32
	for _, p := range l.Parts[:l.N] {
		n += uint32(len(p[0])+len(p[1])) + 1
	}
	for _, e := range l.Extra {
		n += uint32(len(e)) + 1
	}
	return n
}

// Count is the number of strings in the list.
func (l *List) Count() uint32 { return uint32(l.N + len(l.Extra)) }

// WriteSizes is args_sizes_get / environ_sizes_get: the count at countAt,
// the size at sizeAt.
func (l *List) WriteSizes(mem api.Memory, countAt, sizeAt uint32) uint32 {
	if mem == nil || !mem.WriteUint32Le(countAt, l.Count()) || !mem.WriteUint32Le(sizeAt, l.Size()) {
		return errnoFault
	}
	return 0
}

// Write is args_get / environ_get: the strings' addresses at offsets, the
// NUL-terminated strings themselves from buf on. Nothing is written unless
// both ranges are in memory.
func (l *List) Write(mem api.Memory, offsets, buf uint32) uint32 {
	if mem == nil {
		return errnoFault
	}
	ptrs, ok := mem.Read(offsets, l.Count()*4)
	if !ok {
		return errnoFault
	}
	bytes, ok := mem.Read(buf, l.Size())
	if !ok {
		return errnoFault
	}
	at, i := 0, 0
	put := func(s ...string) {
		addr := buf + uint32(at)
		ptrs[4*i], ptrs[4*i+1], ptrs[4*i+2], ptrs[4*i+3] = byte(addr), byte(addr>>8), byte(addr>>16), byte(addr>>24)
		for _, p := range s {
			at += copy(bytes[at:], p)
		}
		bytes[at] = 0
		at++
		i++
	}
	for _, p := range l.Parts[:l.N] {
		put(p[0], p[1])
	}
	for _, e := range l.Extra {
		put(e)
	}
	return 0
}

// Pairs is the list's entries as name and value, split at the first "=".
func (l *List) Pairs() [][2]string {
	out := make([][2]string, 0, l.N+len(l.Extra))
	for _, p := range l.Parts[:l.N] {
		name, value, _ := strings.Cut(p[0]+p[1], "=")
		out = append(out, [2]string{name, value})
	}
	for _, e := range l.Extra {
		name, value, _ := strings.Cut(e, "=")
		out = append(out, [2]string{name, value})
	}
	return out
}
