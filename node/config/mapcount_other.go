//go:build !linux

package config

// HostMaxMapCount is 0 off Linux: no vm.max_map_count to keep under.
func HostMaxMapCount() int { return 0 }
