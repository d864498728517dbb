package backup

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/internal/testutil/catalogtest"
	"github.com/latent-node/latent-node/internal/testutil/tartest"
	"github.com/latent-node/latent-node/vocab"
)

// replaceEntry replaces (or adds) entry name and lists it in the manifest.
func replaceEntry(e []tarEntry, name string, data []byte) []tarEntry {
	found := false
	for i := range e {
		if e[i].Name == name {
			e[i].Data, found = data, true
		}
	}
	if !found {
		e = append(e, tarEntry{Name: name, Data: data})
		for i := range e {
			if e[i].Name == ManifestName {
				e[i].Data = append(append([]byte(nil), e[i].Data...), []byte("sha256:x 0 "+name+"\n")...)
			}
		}
	}
	return relist(e, name, data)
}

// dropEntry removes entry name and its manifest line.
func dropEntry(e []tarEntry, name string) []tarEntry {
	for i := range e {
		if e[i].Name == name {
			return relist(append(e[:i:i], e[i+1:]...), name, nil)
		}
	}
	panic("no entry " + name)
}

func ownerEntry(t *testing.T, tenant vocab.TenantID, d vocab.Digest, size int, uploaded time.Time) (string, []byte) {
	t.Helper()
	payload, err := json.Marshal(catalog.OwnerRecord{Tenant: tenant, Digest: d, Bytes: uint64(size), Uploaded: uploaded.UnixNano()})
	if err != nil {
		t.Fatal(err)
	}
	// A record file: "latent-record v1 owner <length> sha256:<hex>\n" and the payload.
	sum := sha256.Sum256(payload)
	header := "latent-record v1 owner " + strconv.Itoa(len(payload)) + " sha256:" + hex.EncodeToString(sum[:]) + "\n"
	return catalog.OwnerRecordPath(tenant, d), append([]byte(header), payload...)
}

// TestRestore_untrustedInput: what a crafted backup could do before the
// manifest came first and the restored catalog was held to the quotas and
// ownership rules of a deploy. Each case is refused with ErrInvalid
// (or ErrSignature) and leaves nothing next to the target; the
// untouched backup restores (the control).
func TestRestore_untrustedInput(t *testing.T) {
	fx := backupFixture(t)
	a := digestOf("module a")
	// acme deploys a second service: two services of one tenant.
	m := twoRevisions(a, digestOf("module b"))
	m.Service = "images2"
	fx.deploy(m)
	data, _ := backupTar(t, fx.dir)
	key := bytes.Repeat([]byte("k"), 32)
	var signed bytes.Buffer
	sink := NewTarSink(&signed)
	if _, err := Write(context.Background(), fx.dir, sink, Options{SignKey: key}); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	asIs := func(e []tarEntry) []tarEntry { return e }
	tests := []struct {
		name   string
		input  []byte                      // nil: data with tamper applied
		tamper func([]tarEntry) []tarEntry // applied to data's entries
		opts   func(o *RestoreOptions)     // nil: defaults
		want   error                       // nil: restores
		says   string
	}{
		{name: "untouched (control)", tamper: asIs},
		{name: "within the tenant list and quotas (control)", tamper: asIs, opts: func(o *RestoreOptions) {
			o.Tenants, o.Quotas.MaxServicesPerTenant, o.Quotas.MaxServices = []vocab.TenantID{"acme", "beta"}, 2, 3
		}},
		{name: "service uses an artifact only another tenant owns", want: ErrInvalid, says: `not owned by tenant "beta"`,
			tamper: func(e []tarEntry) []tarEntry { return dropEntry(e, catalog.OwnerRecordPath("beta", a)) }},
		{name: "services beyond max_services_per_tenant", want: ErrInvalid, says: "max_services_per_tenant",
			tamper: asIs, opts: func(o *RestoreOptions) { o.Quotas.MaxServicesPerTenant = 1 }},
		{name: "services beyond max_services (manifest)", want: ErrInvalid, says: "max_services",
			tamper: asIs, opts: func(o *RestoreOptions) { o.Quotas.MaxServices = 2 }},
		{name: "ownership beyond max_artifacts_per_tenant (manifest)", want: ErrInvalid, says: "max_artifacts_per_tenant",
			tamper: asIs, opts: func(o *RestoreOptions) { o.Quotas.MaxArtifactsPerTenant = 2 }},
		{name: "deployed bytes beyond the quota", want: ErrInvalid, says: "max_deployed_bytes_per_tenant",
			tamper: asIs, opts: func(o *RestoreOptions) { o.Quotas.MaxDeployedBytesPerTenant = 10 }},
		{name: "tenant not configured", want: ErrInvalid, says: "does not name",
			tamper: asIs, opts: func(o *RestoreOptions) { o.Tenants = []vocab.TenantID{"acme"} }},
		{name: "ownership uploaded in the far future", want: ErrInvalid, says: "in the future",
			tamper: func(e []tarEntry) []tarEntry {
				name, rec := ownerEntry(t, "beta", a, len("module a"), time.Now().AddDate(100, 0, 0))
				return replaceEntry(e, name, rec)
			}},
		{name: "unlisted entry", want: ErrInvalid, says: "not listed in the manifest",
			tamper: func(e []tarEntry) []tarEntry {
				return append([]tarEntry{e[0], {Name: catalog.ArtifactsDir + "/" + strings.Repeat("ab", 32), Data: []byte("x")}}, e[1:]...)
			}},
		{name: "entry of another size than listed", want: ErrInvalid, says: "the manifest lists",
			tamper: func(e []tarEntry) []tarEntry {
				i := firstOf(e, catalog.ArtifactsDir)
				e[i].Data = append(append([]byte(nil), e[i].Data...), 'x')
				return e
			}},
		{name: "sparse entry", want: ErrInvalid, says: "sparse",
			input: func() []byte {
				e := tartest.Read(t, data)
				var b bytes.Buffer
				tw := tar.NewWriter(&b)
				_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: e[0].Name, Size: int64(len(e[0].Data)), Mode: 0o600})
				_, _ = tw.Write(e[0].Data)
				_ = tw.Flush()
				out := append(b.Bytes(), tartest.Sparse(e[firstOf(e, catalog.ArtifactsDir)].Name, 1<<20)...)
				return append(out, make([]byte, 1024)...)
			}()},
		{name: "signed, with its key (control)", input: signed.Bytes(), opts: func(o *RestoreOptions) { o.SignKey = key }},
		{name: "signed, without a key (control)", input: signed.Bytes()},
		{name: "unsigned, with a key", want: ErrSignature, says: "not signed", tamper: asIs,
			opts: func(o *RestoreOptions) { o.SignKey = key }},
		{name: "signed with another key", want: ErrSignature, input: signed.Bytes(),
			opts: func(o *RestoreOptions) { o.SignKey = bytes.Repeat([]byte("j"), 32) }},
		{name: "signed, manifest changed", want: ErrSignature, opts: func(o *RestoreOptions) { o.SignKey = key },
			input: func() []byte {
				e := tartest.Read(t, signed.Bytes())
				e[0].Data = bytes.Replace(e[0].Data, []byte("\ngeneration "), []byte("\ngeneration 1"), 1)
				return tartest.Write(t, e)
			}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			input := tt.input
			if input == nil {
				input = tartest.Write(t, tt.tamper(tartest.Read(t, data)))
			}
			parent := t.TempDir()
			target := filepath.Join(parent, "data")
			opts := RestoreOptions{Verify: openVerify(catalogtest.Inspector{})}
			if tt.opts != nil {
				tt.opts(&opts)
			}
			_, err := Restore(context.Background(), NewTarSource(bytes.NewReader(input)), target, opts)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("control: %v", err)
				}
				return
			}
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("got %v, want %v saying %q", err, tt.want, tt.says)
			}
			if left, _ := os.ReadDir(parent); len(left) != 0 {
				t.Fatalf("a refused restore left %v", left)
			}
		})
	}
}
