// Command latent-node is the standalone WebAssembly execution node.
//
// This build contains the deployment catalog only; `serve`, `check`,
// `keygen`, `deploy` and `invoke` arrive with the node (see README.md).
package main

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"
)

// version is set by the linker (-X main.version=…) for releases.
var version = ""

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "version":
		fmt.Fprintln(stdout, "latent-node", versionString())
		return 0
	case "-h", "--help", "help":
		usage(stdout)
		return 0
	case "serve":
		for _, a := range args[1:] {
			if a == "--demo" || a == "-demo" {
				fmt.Fprintln(stdout, "latent-node: the demo node is not built yet; this build holds the deployment catalog (issue 2).")
				fmt.Fprintln(stdout, "latent-node: `make test` runs what exists; the HTTP node arrives with issue 6.")
				return 0
			}
		}
		fmt.Fprintln(stderr, "latent-node serve: not implemented yet (the node arrives with issue 6)")
		return 2
	case "check", "keygen", "deploy", "invoke":
		fmt.Fprintf(stderr, "latent-node %s: not implemented yet (the node arrives with issue 6)\n", args[0])
		return 2
	default:
		fmt.Fprintf(stderr, "latent-node: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: latent-node <command> [flags]

commands:
  serve     run the node (serve --demo: embedded demo configuration)
  check     validate a configuration file
  keygen    print a new API key and its sha256 hash
  deploy    upload modules and activate a release
  invoke    invoke a route
  version   print the version
`)
}

func versionString() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
