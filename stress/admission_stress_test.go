//go:build stress

package stress

import (
	"testing"
	"time"
)

// TestAdmissionIsolated100k is the large variant of the isolated admission
// regression: `go test -tags stress -run 100k ./stress/`.
func TestAdmissionIsolated100k(t *testing.T) { runIsolated(t, 100_000, 10*time.Minute) }
