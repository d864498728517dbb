//go:build unix

package front

import (
	"syscall"
	"testing"
)

func TestDefaultMaxConns(t *testing.T) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Skip(err)
	}
	want := int(min(4096, rl.Cur-64))
	if have := DefaultMaxConns(); have != want || have < 1 {
		t.Fatalf("want %d, have %d", want, have)
	}
	if l := (ConnLimits{}).withDefaults(); l.MaxConnsPerAddr != 256 || l.MaxConns != want {
		t.Fatalf("defaults: %+v", l)
	}
}
