package fuel

import (
	"os"
	"slices"
	"testing"
)

func TestZZDump(t *testing.T) {
	dir := os.Getenv("FUEL_DUMP")
	if dir == "" {
		t.Skip()
	}
	os.WriteFile(dir+"/fib.wasm", fibModule(), 0o644)
	os.WriteFile(dir+"/fib.metered.wasm", mustInstrument(t, fibModule(), Config{}).Module, 0o644)
	splitEntry = true
	os.WriteFile(dir+"/fib.split.wasm", mustInstrument(t, fibModule(), Config{}).Module, 0o644)
	splitEntry = false
	expNoDepth = true
	os.WriteFile(dir+"/fib.nodepth.wasm", mustInstrument(t, fibModule(), Config{}).Module, 0o644)
	expNoDepth = false
}

func BenchmarkZZVariants(b *testing.B) {
	dir := os.Getenv("FUEL_VARIANTS")
	if dir == "" {
		b.Skip()
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if len(e.Name()) < 5 || e.Name()[len(e.Name())-5:] != ".wasm" {
			continue
		}
		wasm, _ := os.ReadFile(dir + "/" + e.Name())
		b.Run(e.Name(), func(b *testing.B) {
			plain := newCallable(b, fibModule(), "fib")
			metered := newCallable(b, wasm, "fib")
			var ratios []float64
			for b.Loop() {
				p := plain.call(b, 25)
				m := metered.call(b, 25)
				ratios = append(ratios, float64(m)/float64(p))
			}
			slices.Sort(ratios)
			b.ReportMetric(ratios[len(ratios)/2], "ratio")
		})
	}
}
