//go:build !unix

package front

// DefaultMaxConns is DefaultMaxConnsCeiling where the process has no
// RLIMIT_NOFILE (Windows: sockets are handles, bounded by memory).
func DefaultMaxConns() int { return DefaultMaxConnsCeiling }
