//go:build unix

package front

import "syscall"

// DefaultMaxConns is min(DefaultMaxConnsCeiling, RLIMIT_NOFILE soft - 64),
// and at least 1.
func DefaultMaxConns() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return DefaultMaxConnsCeiling
	}
	if uint64(rl.Cur) <= connsFDReserve { // int64 on some BSDs
		return 1
	}
	return int(min(uint64(DefaultMaxConnsCeiling), uint64(rl.Cur)-connsFDReserve))
}
