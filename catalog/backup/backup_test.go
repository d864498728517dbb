package backup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/internal/testutil/catalogtest"
	"github.com/latent-node/latent-node/internal/testutil/tartest"
	"github.com/latent-node/latent-node/vocab"
)

// backupFixture is a catalog with acme/images (two artifacts), beta/tools
// (an artifact acme owns too) and one artifact acme uploaded and never used.
func backupFixture(t *testing.T) *fixture {
	t.Helper()
	fx := newFixture(t)
	a, b := fx.module("module a"), fx.module("module b")
	fx.module("unused")
	fx.deploy(twoRevisions(a, b))
	shared := fx.moduleFor("beta", "module a")
	m := vocab.Manifest{Tenant: "beta", Service: "tools", Revisions: []vocab.ManifestRevision{revision("v1", shared)},
		Routes: []vocab.ManifestRoute{mroute("run", target("v1", 1))}}
	fx.deploy(m)
	return fx
}

// tarEntry is one file of a backup stream.
type tarEntry = tartest.Entry

func backupTar(t *testing.T, dir string) ([]byte, Stats) {
	t.Helper()
	var buf bytes.Buffer
	sink := NewTarSink(&buf)
	st, err := Write(context.Background(), dir, sink, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), st
}

// relist rewrites the manifest's line of name with data's sha256 and size
// (a tamperer who also edits the manifest), or drops it if data is nil.
func relist(entries []tarEntry, name string, data []byte) []tarEntry {
	for i, e := range entries {
		if e.Name != ManifestName {
			continue
		}
		var out []string
		for _, l := range strings.Split(strings.TrimSuffix(string(e.Data), "\n"), "\n") {
			if strings.HasSuffix(l, " "+name) {
				if data == nil {
					continue
				}
				sum := sha256.Sum256(data)
				l = "sha256:" + hex.EncodeToString(sum[:]) + " " + strconv.Itoa(len(data)) + " " + name
			}
			out = append(out, l)
		}
		entries[i].Data = []byte(strings.Join(out, "\n") + "\n")
	}
	return entries
}

func firstOf(entries []tarEntry, prefix string) int {
	for i, e := range entries {
		if strings.HasPrefix(e.Name, prefix) {
			return i
		}
	}
	return -1
}

// openVerify opens the catalog in the staged directory, as the CLI does.
func openVerify(insp catalog.ModuleInspector) func(context.Context, string) error {
	return func(ctx context.Context, dir string) error {
		_, err := catalog.Open(ctx, catalog.Config{Dir: dir, Inspector: insp})
		return err
	}
}

func TestBackup_restoreRoundTrip(t *testing.T) {
	fx := backupFixture(t)
	ctx := context.Background()
	for _, form := range []string{"tar", "dir"} {
		t.Run(form, func(t *testing.T) {
			target := filepath.Join(t.TempDir(), "restored")
			var src Source
			var st Stats
			switch form {
			case "tar":
				var data []byte
				data, st = backupTar(t, fx.dir)
				src = NewTarSource(bytes.NewReader(data))
			case "dir":
				out := filepath.Join(t.TempDir(), "backup")
				sink, err := NewDirSink(out)
				if err != nil {
					t.Fatal(err)
				}
				if st, err = Write(ctx, fx.dir, sink, Options{}); err != nil {
					t.Fatal(err)
				}
				if err := sink.Commit(); err != nil {
					t.Fatal(err)
				}
				ds, err := NewDirSource(out)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = ds.Close() }()
				src = ds
			}
			if st.Generation != 2 || st.Services != 2 || st.Owners != 4 || st.Artifacts != 3 {
				t.Fatalf("backup stats %+v", st)
			}
			rst, err := Restore(ctx, src, target, RestoreOptions{Verify: openVerify(catalogtest.Inspector{})})
			if err != nil {
				t.Fatal(err)
			}
			if rst.Generation != 2 || rst.Services != 2 || rst.Owners != 4 || rst.Artifacts != 3 || rst.Bytes != st.Bytes {
				t.Fatalf("restore stats %+v, backup %+v", rst, st)
			}
			c, err := catalog.Open(ctx, catalog.Config{Dir: target, Inspector: catalogtest.Inspector{}, Clock: fx.clock})
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range []struct {
				tenant  vocab.TenantID
				service vocab.ServiceName
			}{{"acme", "images"}, {"beta", "tools"}} {
				want, _ := fx.cat.Pin().Deployment(k.tenant, k.service)
				got, ok := c.Pin().Deployment(k.tenant, k.service)
				if !ok || got.Release != want.Release || got.Generation != want.Generation {
					t.Fatalf("%v: restored %+v (%v), want %+v", k, got, ok, want)
				}
			}
			// Ownership and upload times came along: the unused artifact
			// expires at the same time in both.
			later := fx.clock.Now().Add(2 * catalog.DefaultArtifactGrace)
			if got, want := c.Artifacts().PlanGarbage(later), fx.cat.Artifacts().PlanGarbage(later); !reflect.DeepEqual(got, want) || want.Deleted != 1 {
				t.Fatalf("restored garbage %+v, original %+v", got, want)
			}
			if got := c.Artifacts().PlanGarbage(fx.clock.Now()); got.Released != 0 {
				t.Fatalf("restored catalog would collect %+v before the grace", got)
			}
		})
	}
}

func TestRestore_refuses(t *testing.T) {
	fx := backupFixture(t)
	data, _ := backupTar(t, fx.dir)
	tests := []struct {
		name   string
		tamper func([]tarEntry) []tarEntry
		target func(t *testing.T, dir string) // prepares the target
		verify func(context.Context, string) error
		want   error // nil: the restore succeeds (the control)
		says   string
	}{
		{name: "untouched", tamper: func(e []tarEntry) []tarEntry { return e }},
		{name: "into an existing empty directory", tamper: func(e []tarEntry) []tarEntry { return e },
			target: func(t *testing.T, dir string) {
				if err := os.MkdirAll(dir, 0o750); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "corrupted artifact entry", want: ErrInvalid, says: "does not match its sha256",
			tamper: func(e []tarEntry) []tarEntry {
				i := firstOf(e, catalog.ArtifactsDir)
				e[i].Data = append([]byte(nil), e[i].Data...)
				e[i].Data[0] ^= 1
				return e
			}},
		{name: "corrupted record entry", want: ErrInvalid, says: "does not match its sha256",
			tamper: func(e []tarEntry) []tarEntry {
				i := firstOf(e, catalog.ServicesDir)
				e[i].Data = bytes.Replace(e[i].Data, []byte("images"), []byte("imagez"), 1)
				return e
			}},
		{name: "record and manifest rewritten", want: ErrInvalid, says: "checksum",
			tamper: func(e []tarEntry) []tarEntry {
				i := firstOf(e, catalog.ServicesDir)
				e[i].Data = bytes.Replace(e[i].Data, []byte("images"), []byte("imagez"), 1)
				return relist(e, e[i].Name, e[i].Data)
			}},
		{name: "wrong digest", want: ErrInvalid, says: "does not match its digest",
			tamper: func(e []tarEntry) []tarEntry {
				i := firstOf(e, catalog.ArtifactsDir)
				e[i].Data = []byte("other bytes of the same size?")[:len(e[i].Data)]
				return relist(e, e[i].Name, e[i].Data)
			}},
		{name: "missing artifact", want: ErrInvalid, says: "listed in the manifest but missing",
			tamper: func(e []tarEntry) []tarEntry {
				i := firstOf(e, catalog.ArtifactsDir)
				return append(e[:i:i], e[i+1:]...)
			}},
		{name: "missing artifact and its manifest line", want: ErrInvalid, says: "missing",
			tamper: func(e []tarEntry) []tarEntry {
				i := firstOf(e, catalog.ArtifactsDir)
				name := e[i].Name
				return relist(append(e[:i:i], e[i+1:]...), name, nil)
			}},
		{name: "entry outside the layout", want: ErrInvalid, says: "unexpected entry",
			tamper: func(e []tarEntry) []tarEntry {
				return append([]tarEntry{e[0], {Name: "../escape", Data: []byte("x")}}, e[1:]...)
			}},
		{name: "manifest missing", want: ErrInvalid, says: ManifestName,
			tamper: func(e []tarEntry) []tarEntry { return e[1:] }},
		{name: "manifest last (older backups)", want: ErrInvalid, says: "the first entry must be " + ManifestName,
			tamper: func(e []tarEntry) []tarEntry { return append(e[1:], e[0]) }},
		{name: "non-empty target", want: ErrRestoreTarget, tamper: func(e []tarEntry) []tarEntry { return e },
			target: func(t *testing.T, dir string) {
				if err := os.MkdirAll(dir, 0o750); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "keep"), []byte("x"), 0o600); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "does not open", want: catalog.ErrCorruptRecord, tamper: func(e []tarEntry) []tarEntry { return e },
			verify: func(context.Context, string) error { return catalog.ErrCorruptRecord }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent := t.TempDir()
			target := filepath.Join(parent, "data")
			if tt.target != nil {
				tt.target(t, target)
			}
			src := NewTarSource(bytes.NewReader(tartest.Write(t, tt.tamper(tartest.Read(t, data)))))
			verify := tt.verify
			if verify == nil {
				verify = openVerify(catalogtest.Inspector{})
			}
			_, err := Restore(context.Background(), src, target, RestoreOptions{Verify: verify})
			if tt.want == nil {
				if err != nil {
					t.Fatalf("control: %v", err)
				}
				return
			}
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("got %v, want %v saying %q", err, tt.want, tt.says)
			}
			left, _ := os.ReadDir(parent)
			if tt.target == nil && len(left) != 0 {
				t.Fatalf("a refused restore left %v", left)
			}
			if tt.target != nil && len(left) != 1 {
				t.Fatalf("a refused restore left %v next to the target", left)
			}
		})
	}
}

func TestBackup_corruptArtifactRefused(t *testing.T) {
	fx := backupFixture(t)
	name := filepath.Join(fx.dir, filepath.FromSlash(catalog.ArtifactsDir), digestOf("unused").Hex())
	if err := os.WriteFile(name, []byte("unusex"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Write(context.Background(), fx.dir, NewTarSink(io.Discard), Options{})
	if !errors.Is(err, catalog.ErrCorruptRecord) {
		t.Fatalf("backup of a corrupt artifact: %v", err)
	}
}

// TestBackup_whileDeploying takes backups while another goroutine deploys,
// deletes and collects garbage: every backup restores and opens.
func TestBackup_whileDeploying(t *testing.T) {
	fx := backupFixture(t)
	ctx := context.Background()
	a, b := digestOf("module a"), digestOf("module b")
	done := make(chan error, 1)
	stopc := make(chan struct{})
	go func() {
		var err error
		defer func() { done <- err }()
		for i := 0; ; i++ {
			select {
			case <-stopc:
				return
			default:
			}
			m := twoRevisions(a, b)
			if i%2 == 1 {
				m = twoRevisions(b, a)
			}
			if _, err = fx.cat.Deploy(ctx, m); err != nil {
				return
			}
			extra := vocab.Manifest{Tenant: "acme", Service: "extra", Revisions: []vocab.ManifestRevision{revision("v1", a)},
				Routes: []vocab.ManifestRoute{mroute("run", target("v1", 1))}}
			if _, err = fx.cat.Deploy(ctx, extra); err != nil {
				return
			}
			if _, err = fx.cat.Delete(ctx, "acme", "extra"); err != nil {
				return
			}
			if _, err = fx.cat.Artifacts().CollectGarbage(ctx, fx.clock.Now()); err != nil {
				return
			}
		}
	}()
	var gens []vocab.Generation
	for i := 0; i < 10; i++ {
		var buf bytes.Buffer
		sink := NewTarSink(&buf)
		st, err := Write(ctx, fx.dir, sink, Options{})
		if errors.Is(err, ErrRace) {
			continue // the deploys outran every attempt: allowed, not silent
		}
		if err != nil {
			close(stopc)
			<-done
			t.Fatal(err)
		}
		if err := sink.Close(); err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(t.TempDir(), "data")
		if _, err := Restore(ctx, NewTarSource(&buf), target, RestoreOptions{Verify: openVerify(catalogtest.Inspector{})}); err != nil {
			close(stopc)
			<-done
			t.Fatalf("backup at generation %d does not restore: %v", st.Generation, err)
		}
		gens = append(gens, st.Generation)
	}
	close(stopc)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(gens) == 0 {
		t.Fatal("no backup succeeded while deploying")
	}
	t.Logf("restored backups at generations %v", gens)
}

// TestBackup_recordsChanged: a backup's last check sees a deploy (a new
// file renamed over a record), a new service and a deletion, and nothing
// when nothing changed. Deploys no longer touch the state record, so this
// check is what makes a backup start over after one.
func TestBackup_recordsChanged(t *testing.T) {
	fx := newFixture(t)
	a, b := fx.module("a"), fx.module("b")
	fx.deploy(oneRevision("acme", "one", a))
	fx.deploy(oneRevision("acme", "two", a))
	ctx := context.Background()
	read := func() map[string]fileID {
		names, err := readDirNames(layoutRoot(fx.dir).path(catalog.ServicesDir))
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string]fileID{}
		for _, n := range names {
			_, id, err := readFile(layoutRoot(fx.dir).path(catalog.ServicesDir+"/"+n), catalog.MaxRecordBytes)
			if err != nil {
				t.Fatal(err)
			}
			ids[n] = id
		}
		return ids
	}
	for _, tc := range []struct {
		name    string
		change  func()
		changed bool
	}{
		{"nothing (control)", func() {}, false},
		{"replaced", func() { fx.deploy(oneRevision("acme", "one", b)) }, true},
		{"redeployed the same release", func() { fx.deploy(oneRevision("acme", "one", b)) }, true},
		{"added", func() { fx.deploy(oneRevision("acme", "three", a)) }, true},
		{"deleted", func() {
			if _, err := fx.cat.Delete(ctx, "acme", "two"); err != nil {
				t.Fatal(err)
			}
		}, true},
	} {
		ids := read()
		tc.change()
		changed, err := recordsChanged(layoutRoot(fx.dir), ids)
		if err != nil || changed != tc.changed {
			t.Fatalf("%s: changed %v (%v), want %v", tc.name, changed, err, tc.changed)
		}
	}
}

// TestBackup_recordRewrittenWhileRead: the catalog reuses a replaced
// record's file as its next write's spare, so a backup can read a record
// while a write truncates and rewrites that very file. Simulated here for
// each kind of record (state, service, ownership) with a test hook: once
// the file is open it is cut to half and written whole again just after
// the read; or (services and ownerships) it is replaced whole by another
// record of its kind while its name moves to a new file holding its own
// record, as the catalog's swap does, so that nothing changes during the
// read and only the record's name inside tells. The backup must take it for a race and read again,
// not report a corrupt catalog nor keep the other record's bytes under
// this name; a record left that way on disk is still reported corrupt
// (the control).
func TestBackup_recordRewrittenWhileRead(t *testing.T) {
	t.Cleanup(func() { readHook = nil })
	for _, tc := range []struct {
		prefix string
		other  bool // replaced by another record instead of cut to half
	}{
		{catalog.StateFile, false},
		{catalog.ServicesDir + "/", false},
		{catalog.OwnersDir + "/", false},
		{catalog.ServicesDir + "/", true},
		{catalog.OwnersDir + "/", true},
	} {
		t.Run(fmt.Sprintf("%s other=%t", tc.prefix, tc.other), func(t *testing.T) {
			fx := backupFixture(t)
			var victim string // the first record of the kind read
			// rewrite gives the bytes the victim holds while it is read.
			rewrite := func(data []byte) []byte { return data[:len(data)/2] }
			if tc.other {
				rewrite = func(data []byte) []byte {
					for _, f := range recordFiles(t, fx.dir, tc.prefix) {
						if f != victim {
							other, err := os.ReadFile(f)
							if err != nil {
								t.Fatal(err)
							}
							return other
						}
					}
					t.Fatalf("no second record under %s", tc.prefix)
					return nil
				}
			}
			var whole, original []byte
			rewrites := 0
			readHook = func(name string, before bool) {
				rel, err := filepath.Rel(fx.dir, name)
				if err != nil {
					t.Fatal(err)
				}
				if victim == "" && strings.HasPrefix(filepath.ToSlash(rel), tc.prefix) {
					victim = name
				}
				if name != victim || rewrites > 0 && before {
					return
				}
				if before {
					data, err := os.ReadFile(name)
					if err != nil {
						t.Fatal(err)
					}
					whole, original = data, data
					if err := os.WriteFile(name, rewrite(data), 0o600); err != nil { // in place: the file being read
						t.Fatal(err)
					}
					if tc.other {
						// The catalog's swap: the name gets a new file
						// with its own record, while the file being read
						// keeps the other record, with no change during
						// the read.
						tmp := name + ".swap"
						if err := os.WriteFile(tmp, data, 0o600); err != nil {
							t.Fatal(err)
						}
						if err := os.Rename(tmp, name); err != nil {
							t.Fatal(err)
						}
						whole = nil
						rewrites++
					}
					return
				}
				if whole != nil {
					if err := os.WriteFile(name, whole, 0o600); err != nil {
						t.Fatal(err)
					}
					whole = nil
					rewrites++
				}
			}
			tarball, st := backupTar(t, fx.dir)
			readHook = nil
			if rewrites != 1 || st.Services != 2 {
				t.Fatalf("%d rewrites of %s, backed up %d services: want one, then a whole backup", rewrites, victim, st.Services)
			}
			rel, err := filepath.Rel(fx.dir, victim)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, e := range tartest.Read(t, tarball) {
				if e.Name == filepath.ToSlash(rel) {
					found = true
					if !bytes.Equal(e.Data, original) {
						t.Fatalf("the backup holds %q under %s, want its own record", e.Data, rel)
					}
				}
			}
			if !found {
				t.Fatalf("%s is not in the backup", rel)
			}
			target := filepath.Join(t.TempDir(), "data")
			if _, err := Restore(context.Background(), NewTarSource(bytes.NewReader(tarball)), target,
				RestoreOptions{Verify: openVerify(catalogtest.Inspector{})}); err != nil {
				t.Fatalf("the backup does not restore: %v", err)
			}
			// The control: left that way on disk.
			data, err := os.ReadFile(victim)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(victim, rewrite(data), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := Write(context.Background(), fx.dir, NewTarSink(io.Discard), Options{}); !errors.Is(err, catalog.ErrCorruptRecord) {
				t.Fatalf("a record rewritten on disk for good: %v, want ErrCorruptRecord", err)
			}
		})
	}
}

// recordFiles lists the record files under prefix (a directory of the
// layout, searched recursively) of the data directory dir.
func recordFiles(t *testing.T, dir, prefix string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(filepath.Join(dir, filepath.FromSlash(prefix)), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".rec") && !catalog.IsTemp(d.Name()) {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}
