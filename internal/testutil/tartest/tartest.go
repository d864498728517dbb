// Package tartest builds and reads tar streams for the backup and restore
// tests (test support): plain entries, entries of any typeflag, and PAX GNU
// sparse entries that archive/tar's writer refuses to write.
package tartest

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"path"
	"strconv"
	"testing"
)

// Entry is one regular file of a tar stream.
type Entry struct {
	Name string
	Data []byte
}

// Read returns the entries of stream in order.
func Read(t testing.TB, stream []byte) []Entry {
	t.Helper()
	var out []Entry
	tr := tar.NewReader(bytes.NewReader(stream))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, Entry{hdr.Name, data})
	}
}

// Write returns a tar stream of entries as regular files (mode 0600).
func Write(t testing.TB, entries []Entry) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: e.Name, Size: int64(len(e.Data)), Mode: 0o600}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(e.Data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// Raw is one tar entry of any typeflag, its data padded to a block, without
// the stream's end.
func Raw(name string, flag byte, data []byte) []byte {
	var hb bytes.Buffer
	if err := tar.NewWriter(&hb).WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: int64(len(data)),
		Mode: 0o600, Format: tar.FormatUSTAR}); err != nil {
		panic(err) // a fixed, valid header
	}
	h := hb.Bytes()[:512]
	h[156] = flag
	copy(h[148:156], "        ")
	sum := 0
	for _, b := range h {
		sum += int(b)
	}
	copy(h[148:156], fmt.Sprintf("%06o\x00 ", sum))
	out := append(append([]byte(nil), h...), data...)
	if pad := len(data) % 512; pad != 0 {
		out = append(out, make([]byte, 512-pad)...)
	}
	return out
}

// Sparse is a PAX GNU sparse 1.0 entry name of realSize bytes of zeros
// that takes 2 KiB of the stream (archive/tar's reader expands it).
func Sparse(name string, realSize int64) []byte {
	pax := paxRecord("GNU.sparse.major", "1") + paxRecord("GNU.sparse.minor", "0") +
		paxRecord("GNU.sparse.name", name) + paxRecord("GNU.sparse.realsize", strconv.FormatInt(realSize, 10))
	sparseMap := make([]byte, 512)
	copy(sparseMap, "0\n") // no data segments: all zeros
	return append(Raw("PaxHeaders/"+path.Base(name), 'x', []byte(pax)), Raw(name, '0', sparseMap)...)
}

// paxRecord is one "LEN key=value\n" record of a PAX extended header.
func paxRecord(k, v string) string {
	rec := " " + k + "=" + v + "\n"
	n := len(rec)
	for {
		full := strconv.Itoa(n) + rec
		if len(full) == n {
			return full
		}
		n = len(full)
	}
}
