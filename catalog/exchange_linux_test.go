package catalog

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestWriteAtomic_swapsWithTheSpare: replacing a record swaps it with the
// directory's spare file, so after the second write the record and the
// spare keep trading the same two inodes (no inode is allocated or freed
// per write), and the record always holds the last data.
func TestWriteAtomic_swapsWithTheSpare(t *testing.T) {
	s := diskStore{root: t.TempDir()}
	if err := s.init(); err != nil {
		t.Fatal(err)
	}
	rel := ServicesDir + "/x.rec"
	ino := func(name string) uint64 {
		fi, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Ino
	}
	spare := filepath.Join(s.path(ServicesDir), spareName)
	seen := map[uint64]bool{}
	for i, data := range []string{"one", "two", "three", "four", "five"} {
		if err := s.writeAtomic(rel, []byte(data)); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(s.path(rel)); string(got) != data {
			t.Fatalf("write %d: the record holds %q", i, got)
		}
		if i == 0 {
			continue // the spare became the record: no spare yet
		}
		seen[ino(s.path(rel))], seen[ino(spare)] = true, true
	}
	if len(seen) != 2 {
		t.Fatalf("the record and the spare used %d inodes over four replacements, want 2", len(seen))
	}
	entries, err := os.ReadDir(s.path(ServicesDir))
	var names []string
	for _, e := range entries {
		if !IsTemp(e.Name()) {
			names = append(names, e.Name())
		}
	}
	if err != nil || len(names) != 1 || names[0] != "x.rec" {
		t.Fatalf("listing %v %v: the spare must not be listed", names, err)
	}
}
