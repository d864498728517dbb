package node

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/latent-node/latent-node/refusal"
	"github.com/latent-node/latent-node/vocab"
)

func TestHTTP_listDeployments(t *testing.T) {
	sn := startServed(t)
	list := func(t *testing.T) serviceList {
		t.Helper()
		a := sn.do(t, "GET", "/v1/deployments/demo", sn.admin, nil, nil)
		if a.status != 200 || a.header.Get("Content-Type") != "application/json" {
			t.Fatalf("list: %d %s", a.status, a.body)
		}
		var l serviceList
		if err := json.Unmarshal(a.body, &l); err != nil {
			t.Fatal(err)
		}
		return l
	}
	t.Run("own tenant", func(t *testing.T) {
		l := list(t)
		if l.Tenant != "demo" || l.Generation == 0 || len(l.Services) != 1 || l.Services[0].Name != "hello" ||
			l.Services[0].Generation == 0 || len(l.Services[0].Revisions) != 1 || l.Services[0].Revisions[0].Name != "v1" {
			t.Fatalf("list: %+v", l)
		}
	})
	t.Run("refusals", func(t *testing.T) {
		wantProblem(t, sn.do(t, "GET", "/v1/deployments/demo", "", nil, nil), 401, "unauthenticated")
		wantProblem(t, sn.do(t, "GET", "/v1/deployments/demo", sn.inv, nil, nil), 403, refusal.ReasonRoleNotAuthorized.String())
		wantProblem(t, sn.do(t, "GET", "/v1/deployments/acme", sn.admin, nil, nil), 403, refusal.ReasonPrincipalNotAuthorized.String())
		wantProblem(t, sn.do(t, "POST", "/v1/deployments/demo", sn.admin, nil, nil), 405, refusal.ReasonMethodNotAllowed.String())
	})
	t.Run("pages", func(t *testing.T) {
		// demo gets hello plus s00..s06: pages of 3 list all 8 once, in
		// order, each with next set until the last.
		_, m, _ := sn.n.cat.Manifest("demo", "hello")
		want := []string{"hello"}
		for i := range 7 {
			m.Service = vocab.ServiceName(fmt.Sprintf("s%02d", i))
			if _, err := sn.n.cat.Deploy(context.Background(), m); err != nil {
				t.Fatal(err)
			}
			want = append(want, string(m.Service))
		}
		slices.Sort(want)
		var got []string
		after, pages := "", 0
		for {
			a := sn.do(t, "GET", "/v1/deployments/demo?limit=3&after="+after, sn.admin, nil, nil)
			var l serviceList
			if err := json.Unmarshal(a.body, &l); a.status != 200 || err != nil {
				t.Fatalf("page: %d %s", a.status, a.body)
			}
			pages++
			for _, s := range l.Services {
				got = append(got, string(s.Name))
			}
			if l.Next == "" {
				break
			}
			if len(l.Services) != 3 || string(l.Next) != got[len(got)-1] {
				t.Fatalf("page %d: %+v", pages, l)
			}
			after = string(l.Next)
		}
		if !slices.Equal(got, want) || pages != 3 {
			t.Fatalf("pages listed %v in %d pages, want %v in 3", got, pages, want)
		}
		if all := list(t); len(all.Services) != len(want) || all.Next != "" {
			t.Fatalf("without limit: %+v", all)
		}
		for _, q := range []string{"limit=0", "limit=1001", "limit=x", "after=a%20b"} {
			wantProblem(t, sn.do(t, "GET", "/v1/deployments/demo?"+q, sn.admin, nil, nil), 400, refusal.ReasonInvalidQuery.String())
		}
		for _, s := range want[1:] {
			if _, err := sn.n.cat.Delete(context.Background(), "demo", vocab.ServiceName(s)); err != nil {
				t.Fatal(err)
			}
		}
	})
	t.Run("empty after delete", func(t *testing.T) {
		if a := sn.do(t, "DELETE", "/v1/deployments/demo/hello", sn.admin, nil, nil); a.status != 200 {
			t.Fatalf("delete: %d %s", a.status, a.body)
		}
		a := sn.do(t, "GET", "/v1/deployments/demo", sn.admin, nil, nil)
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(a.body, &raw); err != nil || string(raw["services"]) != "[]" {
			t.Fatalf("want an empty services list, have %s (%v)", a.body, err)
		}
	})
}
