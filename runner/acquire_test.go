package runner

import (
	"context"
	"reflect"
	"testing"

	"github.com/latent-node/latent-node/internal/testwasm"
)

// TestAcquireModule: a held module is acquired with Inspect's facts and
// one more reference; once every reference is released it is not.
func TestAcquireModule(t *testing.T) {
	ctx := context.Background()
	r := newRunner(t, Config{CompileConcurrency: 1})
	wasm := testwasm.Bytes(t, "trivial")
	d := digestOf(wasm)
	if _, ok := r.AcquireModule(d); ok {
		t.Fatal("a module never inspected was acquired")
	}
	info, err := r.Inspect(ctx, d, wasm)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := r.AcquireModule(d)
	if !ok || !reflect.DeepEqual(got, info) {
		t.Fatalf("acquired %+v %v, want %+v", got, ok, info)
	}
	r.ReleaseModule(d) // the acquired reference
	if !r.Prepared(d) {
		t.Fatal("releasing the acquired reference dropped Inspect's")
	}
	r.ReleaseModule(d)
	if _, ok := r.AcquireModule(d); ok {
		t.Fatal("a released module was acquired")
	}
}
