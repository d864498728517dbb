package node

import (
	"encoding/json"
	"testing"
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
		wantProblem(t, sn.do(t, "GET", "/v1/deployments/demo", sn.inv, nil, nil), 403, "role-not-authorized")
		wantProblem(t, sn.do(t, "GET", "/v1/deployments/acme", sn.admin, nil, nil), 403, "principal-not-authorized")
		wantProblem(t, sn.do(t, "POST", "/v1/deployments/demo", sn.admin, nil, nil), 405, "method-not-allowed")
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
