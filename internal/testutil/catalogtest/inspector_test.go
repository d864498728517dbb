package catalogtest

import (
	"context"
	"testing"

	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/vocab"
)

func TestInspector(t *testing.T) {
	shared := PlainModuleInfo()
	shared.Threading = vocab.ThreadingShared
	in := Inspector{ByModule: map[string]catalog.ModuleInfo{"shared": shared}}
	tests := []struct {
		module string
		want   vocab.Threading
	}{{"plain", vocab.ThreadingSingle}, {"shared", vocab.ThreadingShared}}
	for _, tc := range tests {
		t.Run(tc.module, func(t *testing.T) {
			info, err := in.Inspect(context.Background(), "", []byte(tc.module))
			if err != nil {
				t.Fatal(err)
			}
			if info.Threading != tc.want || len(info.Exports) != 1 {
				t.Fatalf("want %v, have %+v", tc.want, info)
			}
		})
	}
}
