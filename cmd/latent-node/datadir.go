package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime"
	"slices"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/catalog/backup"
	"github.com/latent-node/latent-node/node/config"
	"github.com/latent-node/latent-node/runner"
	"github.com/latent-node/latent-node/vocab"
)

// The data directory commands: gc and restore work on a stopped node's data
// directory (they take its lock, so a running node makes them refuse);
// backup only reads and works while the node runs.

// loadDataDirConfig parses the flags shared by the data directory commands
// and loads the configuration.
func loadDataDirConfig(name, path string, stderr io.Writer) (*config.Config, int) {
	if path == "" {
		fmt.Fprintf(stderr, "latent-node %s: --config is required\n", name)
		return nil, 2
	}
	cfg, err := config.Load(path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return nil, 2
	}
	return cfg, 0
}

// lockDataDir takes the data directory's lock, explaining a refusal.
func lockDataDir(name, dir string, stderr io.Writer) bool {
	err := catalog.LockDir(dir)
	switch {
	case err == nil:
		return true
	case errors.Is(err, catalog.ErrDirInUse):
		fmt.Fprintf(stderr, "latent-node %s: the data directory %s is in use by a running node (or another gc or restore); stop it first\n", name, dir)
	default:
		fmt.Fprintf(stderr, "latent-node %s: %v\n", name, err)
	}
	return false
}

// openOffline opens the runner and the catalog of dir as the node does.
// The caller closes the runner.
func openOffline(ctx context.Context, cfg *config.Config, dir string) (*runner.Runner, *catalog.Catalog, error) {
	r, err := runner.New(ctx, cfg.RunnerConfig(dir))
	if err != nil {
		return nil, nil, err
	}
	co := cfg.CatalogConfig()
	co.Dir, co.Inspector = dir, r
	c, err := catalog.Open(ctx, co)
	if err != nil {
		_ = r.Close(ctx)
		return nil, nil, err
	}
	return r, c, nil
}

func gc(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("gc", stderr, "gc --config FILE [--dry-run]")
	path := fs.String("config", "", "configuration file (TOML); the node must be stopped")
	dryRun := fs.Bool("dry-run", false, "print what would be removed, remove nothing")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	cfg, code := loadDataDirConfig("gc", *path, stderr)
	if cfg == nil {
		return code
	}
	dir := cfg.Node.DataDir
	if !lockDataDir("gc", dir, stderr) {
		return 1
	}
	ctx := context.Background()
	r, c, err := openOffline(ctx, cfg, dir)
	if err != nil {
		fmt.Fprintln(stderr, "latent-node gc:", err)
		return 1
	}
	defer func() { _ = r.Close(ctx) }()
	verb := "removed"
	var st catalog.GCStats
	if *dryRun {
		verb = "would remove"
		st = c.Artifacts().PlanGarbage(time.Now())
	} else if st, err = c.Artifacts().CollectGarbage(ctx, time.Now()); err != nil {
		fmt.Fprintln(stderr, "latent-node gc: artifacts:", err)
		return 1
	}
	fmt.Fprintf(stdout, "artifacts: %s %d ownership records and %d artifacts (%d bytes) unused for longer than %v\n",
		verb, st.Released, st.Deleted, st.DeletedBytes, cfg.CatalogConfig().ArtifactGrace)
	cs, err := r.CollectCompileCache(ctx, *dryRun)
	if err != nil {
		fmt.Fprintln(stderr, "latent-node gc: compile cache:", err)
		return 1
	}
	fmt.Fprintf(stdout, "compile cache: %s %d entries (%d bytes), kept %d (%d bytes)\n",
		verb, cs.Removed, cs.RemovedBytes, cs.Kept, cs.KeptBytes)
	return 0
}

// maxSignKeyFileBytes bounds a --sign-key-file.
const maxSignKeyFileBytes = 4096

// readSignKey reads a backup signing key file: a regular file that only its
// owner may read or write (like an SSH private key), holding at least
// backup.MinSignKeyBytes bytes once surrounding whitespace is trimmed
// (such as 64 hex digits from "openssl rand -hex 32").
func readSignKey(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, errors.Wrap(err, "--sign-key-file")
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return nil, errors.Wrap(err, "--sign-key-file")
	}
	if !st.Mode().IsRegular() {
		return nil, errors.Newf("--sign-key-file %s is not a regular file", path)
	}
	if runtime.GOOS != "windows" && st.Mode().Perm()&0o077 != 0 {
		return nil, errors.WithHint(errors.Newf("--sign-key-file %s is accessible by other users (mode %04o)", path, st.Mode().Perm()),
			"chmod 600 the key file")
	}
	data, err := io.ReadAll(io.LimitReader(f, maxSignKeyFileBytes+1))
	if err != nil {
		return nil, errors.Wrap(err, "--sign-key-file")
	}
	key := bytes.TrimSpace(data)
	if len(data) > maxSignKeyFileBytes || len(key) < backup.MinSignKeyBytes {
		return nil, errors.Newf("--sign-key-file %s must hold %d to %d bytes (such as the output of \"openssl rand -hex 32\")",
			path, backup.MinSignKeyBytes, maxSignKeyFileBytes)
	}
	return key, nil
}

// backupCmd is the backup command (named so: backup is the package).
func backupCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("backup", stderr, "backup --config FILE --out DIR|- [--sign-key-file FILE]")
	path := fs.String("config", "", "configuration file (TOML); the node may be running")
	out := fs.String("out", "", "a new or empty directory, or - for a tar stream on stdout")
	keyFile := fs.String("sign-key-file", "", "sign the backup with the HMAC-SHA256 key in this file (mode 0600); restore --sign-key-file checks it")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	cfg, code := loadDataDirConfig("backup", *path, stderr)
	if cfg == nil {
		return code
	}
	if *out == "" {
		fmt.Fprintln(stderr, "latent-node backup: --out is required")
		return 2
	}
	var opts backup.Options
	if *keyFile != "" {
		key, err := readSignKey(*keyFile)
		if err != nil {
			fmt.Fprintln(stderr, "latent-node backup:", err)
			return 2
		}
		opts.SignKey = key
	}
	ctx := context.Background()
	var st backup.Stats
	var err error
	if *out == "-" {
		sink := backup.NewTarSink(stdout)
		if st, err = backup.Write(ctx, cfg.Node.DataDir, sink, opts); err == nil {
			err = sink.Close()
		}
	} else {
		var sink *backup.DirSink
		if sink, err = backup.NewDirSink(*out); err == nil {
			if st, err = backup.Write(ctx, cfg.Node.DataDir, sink, opts); err == nil {
				err = sink.Commit()
			}
			if err != nil {
				sink.Abort()
			}
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "latent-node backup:", err)
		return 1
	}
	fmt.Fprintf(stderr, "backup: generation %d, %d services, %d ownership records, %d artifacts, %d bytes\n",
		st.Generation, st.Services, st.Owners, st.Artifacts, st.Bytes)
	return 0
}

func restore(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("restore", stderr, "restore --config FILE --in DIR|- [--sign-key-file FILE]")
	path := fs.String("config", "", "configuration file (TOML); its node.data_dir must be empty or absent; "+
		"the backup must fit its tenants and catalog quotas")
	in := fs.String("in", "", "a backup directory, or - for a tar stream on stdin")
	keyFile := fs.String("sign-key-file", "", "accept only a backup signed with the HMAC-SHA256 key in this file "+
		"(backup --sign-key-file): the way to trust a backup that passed through other hands")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	cfg, code := loadDataDirConfig("restore", *path, stderr)
	if cfg == nil {
		return code
	}
	if *in == "" {
		fmt.Fprintln(stderr, "latent-node restore: --in is required")
		return 2
	}
	var signKey []byte
	if *keyFile != "" {
		key, err := readSignKey(*keyFile)
		if err != nil {
			fmt.Fprintln(stderr, "latent-node restore:", err)
			return 2
		}
		signKey = key
	}
	var src backup.Source
	if *in == "-" {
		src = backup.NewTarSource(stdin)
	} else {
		ds, err := backup.NewDirSource(*in)
		if err != nil {
			fmt.Fprintln(stderr, "latent-node restore:", err)
			return 1
		}
		defer func() { _ = ds.Close() }()
		src = ds
	}
	ctx := context.Background()
	// A running node's data directory is not empty: Restore refuses it.
	dir := cfg.Node.DataDir
	verify := func(ctx context.Context, staged string) error {
		r, _, err := openOffline(ctx, cfg, staged)
		if err != nil {
			return err
		}
		return r.Close(ctx)
	}
	tenants := slices.Sorted(maps.Keys(cfg.Tenants))
	if tenants == nil {
		tenants = []vocab.TenantID{}
	}
	st, err := backup.Restore(ctx, src, dir, backup.RestoreOptions{
		MaxArtifactBytes: cfg.CatalogConfig().MaxArtifactBytes, Quotas: cfg.CatalogConfig(), Tenants: tenants,
		SignKey: signKey, Verify: verify})
	if err != nil {
		fmt.Fprintln(stderr, "latent-node restore:", err)
		return 1
	}
	fmt.Fprintf(stdout, "restored generation %d into %s: %d services, %d ownership records, %d artifacts, %d bytes, verified and opened\n",
		st.Generation, dir, st.Services, st.Owners, st.Artifacts, st.Bytes)
	return 0
}
