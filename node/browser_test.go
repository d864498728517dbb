package node

import (
	"net/http"
	"testing"

	"github.com/latent-node/latent-node/refusal"
)

// TestUI_hostRefused: the status page under a name it does not know is
// refused before authentication; under an address it is served.
func TestUI_hostRefused(t *testing.T) {
	sn := startServed(t)
	for _, path := range []string{"/ui", "/ui/assets/app.js", "/ui/session", "/ui/data", "/ui/history"} {
		req, _ := http.NewRequest("GET", sn.url+path, nil)
		req.Host = "attacker.example"
		req.Header.Set("Authorization", "Bearer "+sn.admin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		a := readAnswer(t, resp)
		_ = resp.Body.Close()
		if a.status != http.StatusForbidden || a.prob.Reason != refusal.ReasonHostNotAllowed.String() {
			t.Fatalf("%s under attacker.example: %d %s", path, a.status, a.body)
		}
		if a := sn.do(t, "GET", path, sn.admin, nil, nil); a.status != http.StatusOK {
			t.Fatalf("%s under the listen address: %d %s", path, a.status, a.body)
		}
	}
}
