package main

// The build's identity (version, commit, date) handed to the node.

import "github.com/latent-node/latent-node/node"

// The build's identity, set by the linker for release builds (`make dist`,
// the Dockerfile):
//
//	-X main.version=v1.2.3 -X main.commit=<git commit> -X main.date=<commit date, RFC 3339>
//
// An empty one falls back to what the Go toolchain recorded in the binary
// (module version, vcs.revision, vcs.time; node.CurrentBuildInfo).
var (
	version = ""
	commit  = ""
	date    = ""
)

// buildInfo is the linker's values over the toolchain's.
func buildInfo() node.BuildInfo {
	return node.BuildInfo{Version: version, Commit: commit, Date: date}
}

// The node's latent_build_info metric and cluster member record carry the
// same values `latent-node version` prints.
func init() { node.SetBuildInfo(buildInfo()) }
