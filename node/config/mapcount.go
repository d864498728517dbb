package config

// The warm instances' share of the kernel's memory mappings.

// MappingsPerWarmInstance is how many memory mappings one snapshot
// instance was measured to hold (its memory's reservation, with the image
// mapped over its start); a reuse instance holds fewer.
const MappingsPerWarmInstance = 3

// WarmInstanceBound returns node.max_warm_instances as the node applies
// it: warm instances, idle and running, may use at most half of the
// kernel's vm.max_map_count (the rest is the Go runtime's, wazero's
// compiled code's and the snapshot images'), with room kept for the cells
// (every one may run an instance past the bound). It says whether that
// lowered the configured value; maxMapCount 0 (unknown: not Linux) bounds
// nothing. Past its bound an activation runs on an instance that is not
// kept, so at most bound + cells instances exist, and mmap never fails
// for them before the node's own bound does.
func WarmInstanceBound(configured, cells, maxMapCount int) (int, bool) {
	if maxMapCount <= 0 {
		return configured, false
	}
	fit := max(maxMapCount/2/MappingsPerWarmInstance-cells, 1)
	if configured <= fit {
		return configured, false
	}
	return fit, true
}
