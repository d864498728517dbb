// Package wazcache checks the entries of wazero's on-disk compilation
// cache (layout and checksum) and discards corrupt ones, which the runner
// does when it opens the cache; and collects the entries of modules no
// longer held (collect.go: Collect, the entry names it learns with Layout).
package wazcache

import (
	"bufio"
	"encoding/binary"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// wazero keeps its on-disk compilation cache in a subdirectory of
// the runner's cache directory named "wazero-<version>-<arch>-<os>", one file per
// compiled module, named by a hash that includes CPU features the runner
// cannot read. So a corrupt entry is found by checking every file's layout,
// which for wazero v1.12.0 is: "WAZEVO", the version's length (1 byte) and
// the version, the number of functions (u32), one u64 offset per function,
// the code's length (u64), the code, and the code's CRC-32C (u32), followed
// by the source map and exception tables (not checked).

// Magic starts every wazero cache entry.
const Magic = "WAZEVO"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// DiscardCorrupt removes the entries of wazero's cache directories
// under dir whose layout or checksum is wrong, and reports whether it found
// any. If it found none, it removes every entry: the cache is disposable
// (a restart recompiles), and an entry wazero refused that passes these
// checks cannot be told apart from the others.
func DiscardCorrupt(dir string) bool {
	subdirs, _ := filepath.Glob(filepath.Join(dir, "wazero-*"))
	var entries []string
	found := false
	for _, sub := range subdirs {
		files, err := os.ReadDir(sub)
		if err != nil {
			continue
		}
		for _, f := range files {
			if f.IsDir() || strings.HasSuffix(f.Name(), ".tmp") {
				continue
			}
			path := filepath.Join(sub, f.Name())
			entries = append(entries, path)
			if !EntryIntact(path) {
				found = true
				_ = os.Remove(path)
			}
		}
	}
	if !found {
		for _, path := range entries {
			_ = os.Remove(path)
		}
	}
	return found
}

// EntryIntact reports whether the file at path has the layout of a
// wazero cache entry and its code matches its checksum.
func EntryIntact(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return false
	}
	size := uint64(st.Size())
	r := bufio.NewReader(f)
	var head [len(Magic) + 1]byte
	if _, err := io.ReadFull(r, head[:]); err != nil || string(head[:len(Magic)]) != Magic {
		return false
	}
	if _, err := r.Discard(int(head[len(Magic)])); err != nil {
		return false
	}
	var n [8]byte
	if _, err := io.ReadFull(r, n[:4]); err != nil {
		return false
	}
	at := uint64(len(head)) + uint64(head[len(Magic)]) + 4
	functions := uint64(binary.LittleEndian.Uint32(n[:4]))
	if functions*8 > size-at {
		return false
	}
	if _, err := r.Discard(int(functions * 8)); err != nil {
		return false
	}
	at += functions * 8
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return false
	}
	at += 8
	codeLen := binary.LittleEndian.Uint64(n[:])
	if codeLen > size-at || size-at-codeLen < 4 {
		return false
	}
	h := crc32.New(castagnoli)
	if _, err := io.CopyN(h, r, int64(codeLen)); err != nil {
		return false
	}
	if _, err := io.ReadFull(r, n[:4]); err != nil {
		return false
	}
	return binary.LittleEndian.Uint32(n[:4]) == h.Sum32()
}
