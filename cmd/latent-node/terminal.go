package main

// Text from a guest or a node, made safe to print on a terminal.

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// terminalSafe returns s with every byte or rune a terminal could act on
// written as a visible Go escape: control characters (C0 but tab, DEL, C1,
// so no escape sequence reaches the terminal), other non-printable runes
// (bidirectional overrides, zero-width characters) and invalid UTF-8
// ("\x1b", "\u202e", "\xff"). Printable text, spaces and tabs are kept as
// they are. A guest's stderr is printed this way, one line at a time.
func terminalSafe(s string) string {
	i := strings.IndexFunc(s, func(r rune) bool { return !safeRune(r) })
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.WriteString(s[:i])
	for s = s[i:]; s != ""; {
		r, size := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\x` + strconv.FormatUint(uint64(s[0])|0x100, 16)[1:])
		case safeRune(r):
			b.WriteString(s[:size])
		default:
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		}
		s = s[size:]
	}
	return b.String()
}

// safeRune: r prints as itself and moves the cursor only forward.
func safeRune(r rune) bool {
	return r == '\t' || r != utf8.RuneError && unicode.IsPrint(r)
}
