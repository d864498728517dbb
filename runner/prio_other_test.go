//go:build !linux

package runner

func threadNice() int { return 0 }
