package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/latent-node/latent-node/internal/testutil/tartest"
	"github.com/latent-node/latent-node/internal/testwasm"
)

// The restore command against crafted backups. Shared setup: a node with
// acme/echo, acme/hello and beta/hello (acme and beta both own the hello
// module), backed up as a tar stream, unsigned and signed.

// withoutEntry drops entry name and its line in BACKUP-MANIFEST (the first
// entry, or the last in backups of the binary before the fix): the
// manifest holds plain sha256 sums, so anyone can keep it consistent.
func withoutEntry(t *testing.T, files []tartest.Entry, name string) []tartest.Entry {
	t.Helper()
	var out []tartest.Entry
	found := false
	for _, f := range files {
		switch {
		case f.Name == name:
			found = true
			continue
		case f.Name == "BACKUP-MANIFEST":
			var lines []string
			for _, l := range strings.SplitAfter(string(f.Data), "\n") {
				if !strings.HasSuffix(l, " "+name+"\n") {
					lines = append(lines, l)
				}
			}
			f.Data = []byte(strings.Join(lines, ""))
		}
		out = append(out, f)
	}
	if !found {
		t.Fatalf("no entry %s in the backup", name)
	}
	return out
}

// sparseArtifacts is a tar stream of n PAX GNU sparse 1.0 artifact
// entries of 16 MiB of zeros each (2 KiB of stream each), then a manifest.
func sparseArtifacts(t *testing.T, n int) []byte {
	t.Helper()
	var out []byte
	for i := range n {
		sum := sha256.Sum256([]byte(strconv.Itoa(i)))
		out = append(out, tartest.Sparse("artifacts/sha256/"+hex.EncodeToString(sum[:]), 16<<20)...)
	}
	manifest := []byte("latent-node backup v1\ngeneration 1\n")
	out = append(out, tartest.Raw("BACKUP-MANIFEST", '0', manifest)...)
	return append(out, make([]byte, 1024)...)
}

// dirBytes is the size of the regular files under dir.
func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// restoreSampled runs restore with stdin and samples the bytes under the
// data directory's parent while it runs: its exit code, stderr and the
// largest sample.
func restoreSampled(t *testing.T, cfg, parent string, stdin []byte) (int, string, int64) {
	t.Helper()
	cmd := exec.Command(binary(t), "restore", "--config", cfg, "--in", "-")
	cmd.Stdin = bytes.NewReader(stdin)
	var errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(2 * time.Minute)
	var most int64
	for {
		select {
		case err := <-done:
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			return code, errb.String(), most
		case <-tick.C:
			most = max(most, dirBytes(parent))
		case <-deadline:
			_ = cmd.Process.Kill()
			t.Fatal("restore did not end within 2 minutes")
		}
	}
}

// sparseEntries is the number of sparse entries of the attack (3.2 GB on
// the binary before the fix: checked there with 5).
const sparseEntries = 200

func TestSecurityRestore(t *testing.T) {
	keys, _ := principalKeys(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	cfg := dataDirConfig(t, dataDir, "")
	n := &node{proc: serve(t, cfg, calm), keys: keys}
	n.deploy(t, "alice", "acme", "echo", rev{guest: "echo"})
	n.deploy(t, "alice", "acme", "hello", rev{guest: "hello"})
	n.deploy(t, "bob", "beta", "hello", rev{guest: "hello"})
	code, stream, stderr := cli(t, nil, "backup", "--config", cfg, "--out", "-")
	if code != 0 {
		t.Fatalf("backup: %d %s", code, stderr)
	}
	keyFile := filepath.Join(t.TempDir(), "backup.key")
	if err := os.WriteFile(keyFile, []byte(strings.Repeat("5a", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, signed, stderr := cli(t, nil, "backup", "--config", cfg, "--out", "-", "--sign-key-file", keyFile)
	if code != 0 {
		// On 611fe67: exit 2, "flag provided but not defined: -sign-key-file".
		t.Fatalf("signed backup: %d %s", code, stderr)
	}
	stop(t, n.proc)

	// restore runs the restore command into a fresh data directory with
	// extra configuration; it reports whether the directory appeared.
	restore := func(t *testing.T, stdin []byte, extra string, args ...string) (int, string, bool) {
		t.Helper()
		fresh := filepath.Join(t.TempDir(), "data")
		code, out, stderr := cli(t, stdin, append([]string{"restore", "--config", dataDirConfig(t, fresh, extra), "--in", "-"}, args...)...)
		_, err := os.Stat(fresh)
		return code, string(out) + stderr, err == nil
	}

	t.Run("genuine backup restores", func(t *testing.T) {
		// The negative control of every refusal below.
		if code, out, made := restore(t, stream, ""); code != 0 || !made || !strings.Contains(out, "3 services") {
			t.Fatalf("restore of a genuine backup: %d %s", code, out)
		}
	})

	t.Run("sparse entries", func(t *testing.T) {
		// On 611fe67 with 5 entries instead of 200: 83,886,080 bytes (5 ×
		// 16 MiB of zeros) written under the parent before "invalid backup";
		// with 200, 3.2 GB.
		parent := t.TempDir()
		input := sparseArtifacts(t, sparseEntries)
		code, stderr, most := restoreSampled(t, dataDirConfig(t, filepath.Join(parent, "data"), ""), parent, input)
		t.Logf("%d-byte stream: exit %d, at most %d bytes written; %s", len(input), code, most, strings.TrimSpace(stderr))
		if code != 1 || !strings.Contains(stderr, "invalid backup") {
			t.Fatalf("restore of sparse entries: %d %s", code, stderr)
		}
		if most > 1<<20 {
			t.Fatalf("%d bytes written before the refusal, want at most 1 MiB", most)
		}
	})

	sum := sha256.Sum256(testwasm.Bytes(t, "hello"))
	tenantDir := func(tenant string) string {
		h := sha256.Sum256([]byte(tenant))
		return "catalog/owners/" + hex.EncodeToString(h[:])
	}
	acmeOwnsHello := tenantDir("acme") + "/" + hex.EncodeToString(sum[:]) + ".rec"

	t.Run("service using another tenant's artifact", func(t *testing.T) {
		// acme/hello names the hello module, which (without acme's
		// ownership record) only beta owns. On 611fe67: exit 0, "restored
		// generation … 3 services", and acme runs beta's module.
		crafted := tartest.Write(t, withoutEntry(t, tartest.Read(t, stream), acmeOwnsHello))
		code, out, made := restore(t, crafted, "")
		if code != 1 || made || !strings.Contains(out, `not owned by tenant "acme"`) {
			t.Fatalf("restore: %d %s (directory made: %v)", code, out, made)
		}
	})

	t.Run("services beyond max_services_per_tenant", func(t *testing.T) {
		// acme has 2 services; the configuration allows 1. On 611fe67:
		// exit 0, restored.
		code, out, made := restore(t, stream, "[catalog]\nmax_services_per_tenant = 1\n")
		if code != 1 || made || !strings.Contains(out, "max_services_per_tenant") {
			t.Fatalf("restore: %d %s (directory made: %v)", code, out, made)
		}
	})

	t.Run("signed", func(t *testing.T) {
		// On 611fe67 the flag does not exist (exit 2 for every case).
		if code, out, made := restore(t, signed, "", "--sign-key-file", keyFile); code != 0 || !made {
			t.Fatalf("signed backup with its key: %d %s", code, out)
		}
		if code, out, made := restore(t, stream, "", "--sign-key-file", keyFile); code != 1 || made || !strings.Contains(out, "not signed") {
			t.Fatalf("unsigned backup with a key: %d %s", code, out)
		}
		files := tartest.Read(t, signed)
		files[0].Data = bytes.Replace(files[0].Data, []byte("\ngeneration "), []byte("\ngeneration 9"), 1)
		if code, out, made := restore(t, tartest.Write(t, files), "", "--sign-key-file", keyFile); code != 1 || made ||
			!strings.Contains(out, "signature") {
			t.Fatalf("tampered signed backup: %d %s", code, out)
		}
		loose := filepath.Join(t.TempDir(), "loose.key")
		if err := os.WriteFile(loose, []byte(strings.Repeat("5a", 32)), 0o644); err != nil {
			t.Fatal(err)
		}
		if code, out, _ := restore(t, signed, "", "--sign-key-file", loose); code != 2 || !strings.Contains(out, "other users") {
			t.Fatalf("a key file others can read: %d %s", code, out)
		}
	})
}
