// Command latent-node is the standalone WebAssembly execution node: serve,
// check, keygen, deploy, get, list, delete, invoke, version (usageText lists
// them; each command's --help its flags). The configuration file is
// described in docs/configuration.md, the HTTP API that the client commands
// call in docs/api.md.
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/oklog/run"
	"github.com/pelletier/go-toml/v2"

	"github.com/latent-node/latent-node/client"
	"github.com/latent-node/latent-node/internal/gcfloor"
	"github.com/latent-node/latent-node/loadsource"
	"github.com/latent-node/latent-node/node"
	"github.com/latent-node/latent-node/node/auth"
	"github.com/latent-node/latent-node/node/config"
	"github.com/latent-node/latent-node/node/front"
	"github.com/latent-node/latent-node/vocab"
)

func main() {
	os.Exit(runMain(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

const usageText = `usage: latent-node <command> [flags]

commands:
  serve     run the node (--config FILE, or --demo for the embedded demo)
  check     validate a configuration file (--config FILE)
  keygen    print a new API key and its sha256 hash
  deploy    upload the modules of a release manifest and activate it
  get       print the active release of TENANT/SERVICE
  list      list the services of the key's tenant
  delete    delete TENANT/SERVICE
  nodes     list the members of the node's cluster
  invoke    invoke TENANT/SERVICE/ROUTE[/PATH][?QUERY] with -d or stdin as the body
            (-X METHOD, -H 'Name: value'; -v: answer status and headers on stderr)
  gc        remove unused artifacts and compile-cache entries of a stopped node (--config FILE [--dry-run])
  backup    copy the catalog and its artifacts (--config FILE --out DIR|- [--sign-key-file KEY]),
            also while the node runs; --sign-key-file signs it (HMAC-SHA256)
  restore   restore a backup into an empty data directory (--config FILE --in DIR|- [--sign-key-file KEY]);
            within the configuration's tenants and quotas; --sign-key-file accepts only a backup
            signed with KEY, the way to trust a backup from elsewhere
  version   print the version

Run 'latent-node <command> --help' for a command's flags.
`

func runMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usageText)
		return 2
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "serve":
		return serve(rest, stdout, stderr)
	case "check":
		return check(rest, stdout, stderr)
	case "keygen":
		return keygen(rest, stdout, stderr)
	case "deploy":
		return deploy(rest, stdout, stderr)
	case "get":
		return get(rest, stdout, stderr)
	case "list":
		return list(rest, stdout, stderr)
	case "delete":
		return del(rest, stdout, stderr)
	case "nodes":
		return nodes(rest, stdout, stderr)
	case "top":
		return top(rest, stdout, stderr)
	case "invoke":
		return invoke(rest, stdin, stdout, stderr)
	case "gc":
		return gc(rest, stdout, stderr)
	case "backup":
		return backupCmd(rest, stdout, stderr)
	case "restore":
		return restore(rest, stdin, stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, "latent-node", versionString())
		return 0
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usageText)
		return 0
	}
	fmt.Fprintf(stderr, "latent-node: unknown command %q\n\n%s", cmd, usageText)
	return 2
}

// versionString is the version, then the commit and its date when known:
// "v1.2.3 (commit 59097f5…, 2026-11-30T15:00:00Z)".
func versionString() string {
	bi := node.CurrentBuildInfo()
	s := bi.Version
	var extra []string
	if bi.Commit != "" {
		extra = append(extra, "commit "+bi.Commit)
	}
	if bi.Date != "" {
		extra = append(extra, bi.Date)
	}
	if len(extra) > 0 {
		s += " (" + strings.Join(extra, ", ") + ")"
	}
	return s
}

func newFlags(name string, stderr io.Writer, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: latent-node %s\n\nflags:\n", usage)
		fs.PrintDefaults()
	}
	return fs
}

// parse handles --help (exit 0) and bad flags (exit 2).
func parse(fs *flag.FlagSet, args []string) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	return 0, true
}

func check(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("check", stderr, "check --config FILE")
	path := fs.String("config", "", "configuration file (TOML)")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if *path == "" {
		fmt.Fprintln(stderr, "latent-node check: --config is required")
		return 2
	}
	cfg, err := config.Load(*path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	fmt.Fprintln(stdout, *path+": ok")
	fmt.Fprintln(stdout, "on this host, "+cfg.Sizing(runtime.NumCPU()).String())
	return 0
}

func keygen(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("keygen", stderr, "keygen")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	key, hash, err := auth.Generate()
	if err != nil {
		fmt.Fprintln(stderr, "latent-node keygen:", err)
		return 1
	}
	fmt.Fprintf(stdout, "key:  %s\nhash: %s\n\n# in the configuration:\n# api_keys = [\"%s\"]\n", key, hash, hash)
	return 0
}

func serve(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("serve", stderr, "serve (--config FILE | --demo) [--listen ADDR]")
	path := fs.String("config", "", "configuration file (TOML)")
	demo := fs.Bool("demo", false, "run the embedded demo configuration with a temporary data directory")
	listen := fs.String("listen", "", "listen address (overrides node.listen)")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintln(stderr, "latent-node serve: --log-level:", err)
		return 2
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
	var opts []config.Option
	if *listen != "" {
		opts = append(opts, config.WithListen(*listen))
	}
	var cfg *config.Config
	var demoKey string
	switch {
	case *demo && *path != "":
		fmt.Fprintln(stderr, "latent-node serve: give --config or --demo, not both")
		return 2
	case *demo:
		key, hash, err := auth.Generate()
		if err != nil {
			fmt.Fprintln(stderr, "latent-node serve:", err)
			return 1
		}
		dir, err := os.MkdirTemp("", "latent-node-demo-")
		if err != nil {
			fmt.Fprintln(stderr, "latent-node serve:", err)
			return 1
		}
		defer func() { _ = os.RemoveAll(dir) }()
		if cfg, err = config.Demo(append(opts, config.WithDataDir(dir), config.WithDemoKey(hash))...); err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		demoKey = key
	case *path != "":
		var err error
		if cfg, err = config.Load(*path, opts...); err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
	default:
		fmt.Fprintln(stderr, "latent-node serve: --config FILE or --demo is required")
		return 2
	}
	var reload func() (*config.Config, error) // nil for the demo: no file to read again
	if *path != "" {
		reload = func() (*config.Config, error) { return config.Load(*path, opts...) }
	}
	if err := serveConfig(cfg, demoKey, reload, log, stdout); err != nil {
		fmt.Fprintln(stderr, "latent-node serve:", err)
		return 1
	}
	return 0
}

// serveConfig runs the node's actors until a signal, then shuts down: stop
// accepting, queued activations get 503 shutting-down, running ones finish
// within shutdown_grace and are then cancelled; every caller gets an answer.
//
// SIGHUP (and POST /v1/admin/reload) reads the configuration again through
// reload and applies what can change live (node.Reload).
func serveConfig(cfg *config.Config, demoKey string, reload func() (*config.Config, error), log *slog.Logger, stdout io.Writer) error {
	ctx := context.Background()
	src, err := loadSourceFromEnv()
	if err != nil {
		return err
	}
	if src != nil {
		log.Warn("load samples are fixed by " + loadSourceEnv + ": host pressure is not measured (a testing aid)")
	}
	n, err := node.New(ctx, cfg, node.Options{Logger: log, LoadSource: src})
	if err != nil {
		return err
	}
	defer n.Close(ctx)
	raw, err := net.Listen("tcp", cfg.Node.Listen)
	if err != nil {
		return errors.Wrap(err, "listen")
	}
	ln := n.WrapListener(raw) // bounded connections, accept errors backed off
	var serverTLS *front.ServerTLS
	if cfg.Node.TLS.Enabled() { // [node.tls]: HTTPS only
		if serverTLS, err = front.NewServerTLS(cfg.Node.TLS); err != nil {
			_ = ln.Close()
			return err
		}
		ln = tls.NewListener(ln, serverTLS.Config())
	}
	if demoKey != "" {
		if _, err := n.DeployDemo(ctx); err != nil {
			_ = ln.Close()
			return err
		}
		addr := ln.Addr().String()
		fmt.Fprintf(stdout, "demo api key: %s\n", demoKey)
		fmt.Fprintf(stdout, "try: curl -s -H 'Authorization: Bearer %s' --data 'ada' http://%s/v1/invoke/demo/hello/greet\n", demoKey, addr)
		fmt.Fprintf(stdout, "status page: http://%s/ui (sign in with the key)\n", addr)
	}
	if reload != nil {
		n.SetReloadSource(node.ReloadSource{Load: reload, TLS: serverTLS})
	}
	sizing := n.Sizing()
	// GOGC from the environment wins; otherwise the heap goal keeps a
	// floor (gcfloor: a node's live heap is small and would be collected
	// about a hundred times a second under load).
	gcTuned, gcMode := os.Getenv("GOGC") == "", "floor 64MiB"
	if !gcTuned {
		gcMode = "GOGC=" + os.Getenv("GOGC")
	}
	log.Info("serving", "listen", ln.Addr().String(), "version", versionString(), "load_source", n.LoadSourceKind(),
		"guests", sizing.String(), "gomaxprocs", runtime.GOMAXPROCS(0), "gc", gcMode)

	var g run.Group
	{ // signals
		g.Add(run.SignalHandler(ctx, os.Interrupt, syscall.SIGTERM))
	}
	{ // SIGHUP: reload the configuration (an invalid file changes nothing)
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		sctx, cancel := context.WithCancel(ctx)
		g.Add(func() error {
			defer signal.Stop(hup)
			for {
				select {
				case <-sctx.Done():
					return nil
				case <-hup:
					if _, err := n.Reload(); errors.Is(err, node.ErrNotReloadable) {
						log.Warn("SIGHUP ignored: the node was started without a configuration file")
					}
				}
			}
		}, func(error) { cancel() })
	}
	for _, a := range n.Actors() { // scheduler, sampler, cells, front yield, collection, refusal log, warm sweep, cluster
		sctx, cancel := context.WithCancel(ctx)
		g.Add(func() error { return a.Run(sctx) }, func(error) { cancel() })
	}
	if gcTuned { // the Go heap goal's floor (GOGC unset)
		sctx, cancel := context.WithCancel(ctx)
		g.Add(func() error { return gcfloor.New(gcfloor.DefaultFloor).Run(sctx, time.Second) }, func(error) { cancel() })
	}
	{ // HTTP server
		srv := n.Server()
		if serverTLS != nil {
			srv.TLSConfig = serverTLS.Config()
		}
		g.Add(func() error {
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		}, func(error) {
			sctx, cancel := context.WithTimeout(ctx, cfg.Node.ShutdownGrace+5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
		})
	}
	err = g.Run()
	if errors.Is(err, run.ErrSignal) {
		log.Info("shut down", "cause", err.Error())
		return nil
	}
	return err
}

// loadSourceEnv is a testing aid: LATENT_NODE_LOAD_SOURCE=fixed:CPU,MEMORY
// (pressures in [0,1]) replaces the host load source with constant readings,
// so black-box tests neither depend on the host's load nor need to saturate
// it to see node-overloaded. Unset (the default): the host's load source.
const loadSourceEnv = "LATENT_NODE_LOAD_SOURCE"

func loadSourceFromEnv() (loadsource.Source, error) {
	v, ok := os.LookupEnv(loadSourceEnv)
	if !ok || v == "" {
		return nil, nil
	}
	spec, ok := strings.CutPrefix(v, "fixed:")
	cpuS, memS, ok2 := strings.Cut(spec, ",")
	if !ok || !ok2 {
		return nil, errors.Newf("%s: want fixed:CPU,MEMORY", loadSourceEnv)
	}
	cpu, err1 := strconv.ParseFloat(cpuS, 64)
	mem, err2 := strconv.ParseFloat(memS, 64)
	if err1 != nil || err2 != nil || !(cpu >= 0 && cpu <= 1) || !(mem >= 0 && mem <= 1) {
		return nil, errors.Newf("%s: pressures must be numbers in [0,1]", loadSourceEnv)
	}
	return loadsource.FixedSource{CPU: cpu, Memory: mem}, nil
}

// deploy reads a TOML release manifest whose revisions name their modules by
// path (loadManifest), uploads the modules and activates the release.
func deploy(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("deploy", stderr, "deploy [flags] release.toml")
	nodeURL, key, caFile := clientFlags(fs)
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "latent-node deploy: want exactly one release manifest")
		return 2
	}
	c, ok := newClient("deploy", *nodeURL, *key, *caFile, stderr)
	if !ok {
		return 2
	}
	m, err := loadManifest(context.Background(), c, fs.Arg(0))
	var syntax *manifestSyntaxError
	switch {
	case errors.As(err, &syntax):
		// file:line:column first on its line, as editors expect it.
		fmt.Fprintln(stderr, syntax.Error())
		if syntax.context != "" {
			fmt.Fprintln(stderr, strings.TrimRight(syntax.context, "\n"))
		}
		return 1
	case err != nil:
		fmt.Fprint(stderr, "latent-node deploy: ")
		printError(stderr, err) // an upload refused for its key says so
		return 1
	}
	d, err := deployReporting(c, m, stderr, deployProgressEvery)
	if err != nil {
		printError(stderr, err)
		return 1
	}
	fmt.Fprintf(stdout, "release %s generation %d\n", d.Release, d.Generation)
	for _, r := range d.Revisions {
		fmt.Fprintf(stdout, "  %s %s\n", r.Name, r.ID)
	}
	return 0
}

// loadManifest reads release.toml, uploads every module it names (paths
// relative to the manifest) and returns the JSON form with artifact digests.
func loadManifest(ctx context.Context, c *client.Client, path string) (vocab.Manifest, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return vocab.Manifest{}, err
	}
	var doc map[string]any
	if err := toml.Unmarshal(data, &doc); err != nil {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			line, col := de.Position()
			return vocab.Manifest{}, &manifestSyntaxError{path: path, line: line, column: col,
				msg: strings.TrimPrefix(de.Error(), "toml: "), context: de.String()}
		}
		return vocab.Manifest{}, errors.Wrapf(err, "%s", path)
	}
	js, err := json.Marshal(doc)
	if err != nil {
		return vocab.Manifest{}, errors.Wrap(err, "encode manifest")
	}
	m, err := vocab.DecodeManifest(strings.NewReader(string(js)))
	if err != nil {
		return vocab.Manifest{}, errors.Wrapf(err, "%s", path)
	}
	for i := range m.Revisions {
		r := &m.Revisions[i]
		if r.Module == "" {
			continue
		}
		mod := r.Module
		if !filepath.IsAbs(mod) {
			mod = filepath.Join(filepath.Dir(path), mod)
		}
		wasm, err := os.ReadFile(mod)
		if err != nil {
			return vocab.Manifest{}, errors.Wrapf(err, "revisions[%d].module", i)
		}
		d, err := c.UploadArtifact(ctx, wasm)
		if err != nil {
			return vocab.Manifest{}, errors.Wrapf(err, "upload %s", r.Module)
		}
		r.Artifact, r.Module = vocab.Digest(d), ""
	}
	return m, nil
}

// manifestSyntaxError is a release manifest that is not valid TOML, at the
// position go-toml reports (1-based line and column).
type manifestSyntaxError struct {
	path         string
	line, column int
	msg          string
	context      string // go-toml's excerpt of the document around the position
}

func (e *manifestSyntaxError) Error() string {
	return fmt.Sprintf("%s:%d:%d: %s", e.path, e.line, e.column, e.msg)
}
