package e2e

import "syscall"

// setRcvBuf sets socket fd's receive buffer to n bytes (best effort).
func setRcvBuf(fd uintptr, n int) {
	_ = syscall.SetsockoptInt(syscall.Handle(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, n)
}
