package admission

// CheckRevision, the deploy-time check that a revision of a release could
// ever be admitted on this node, its problems named by manifest field.

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/latent-node/latent-node/vocab"
)

// CheckRevision returns why a revision of tenant's release could never be
// admitted on this node without a caller's budget lowering its ceiling: the
// node's deploy refuses such a release instead of publishing one whose every
// activation is refused. It applies the same code as Admit (the trust-class
// checks, the grant, the placement check, the cell-class selection) to the
// grant of a request that restricts nothing, and adds one rule Admit does
// not need: a ceiling above the node's budget ceiling (Admit would lower it
// silently). Each reserved dimension of that grant must also fit, on its
// own, the reserved-fuel and reserved-memory limits of the node, the tenant
// and the revision's trust class: a grant above a limit is refused as
// capacity-exhausted however idle the node is.
//
// Problems name the revision's fields by their manifest JSON names under at
// (at.Field("trust_class"), at.Field("ceiling").Field("memory_bytes"), …),
// at most one problem per field, and say what the node allows. A zero
// rev.Capsule means that the module was not inspected yet: the rules that
// need it (the module's minimum and maximum memory) are skipped. Only the
// declared requirements of rev are checked; features the module uses
// without declaring them are checked at admission. CheckRevision reads only
// the immutable policy: it takes no lock.
func (p *LocalQuotaProvider) CheckRevision(tenant vocab.TenantID, at vocab.FieldPath, rev vocab.RevisionPolicy) []vocab.FieldError {
	var c revisionCheck
	v := p.view.Load()
	pol := &v.policy
	ceiling := at.Field("ceiling")
	fuelF, memF, wallF := ceiling.Field("cpu_fuel"), ceiling.Field("memory_bytes"), ceiling.Field("wall_time")
	trustF := at.Field("trust_class")

	ts, ok := v.tenants[tenant]
	if !ok {
		c.add("tenant", "names a tenant this node does not have")
		return c.list
	}
	allowedTrust := func() string {
		names := make([]string, len(ts.policy.TrustClasses))
		for i, t := range ts.policy.TrustClasses {
			names[i] = string(t)
		}
		slices.Sort(names)
		return " (want one of: " + strings.Join(names, ", ") + ")"
	}
	trust, ok := v.trust[rev.TrustClass]
	switch _, tenantMay := ts.trust[rev.TrustClass]; {
	case !ok:
		c.add(trustF, "names a trust class this node does not have"+allowedTrust())
	case !tenantMay:
		c.add(trustF, "names a trust class the tenant may not use"+allowedTrust())
	}
	if !rev.Placement.Allows(pol.Placement.Architecture, pol.Placement.Region, pol.Placement.Zone) {
		pl := at.Field("placement")
		for _, l := range []struct {
			field, what, node string
			allowed           []string
		}{{"architectures", "architecture", pol.Placement.Architecture, rev.Placement.Architectures()},
			{"regions", "region", pol.Placement.Region, rev.Placement.Regions()},
			{"zones", "zone", pol.Placement.Zone, rev.Placement.Zones()}} {
			if len(l.allowed) > 0 && !slices.Contains(l.allowed, l.node) {
				c.add(pl.Field(l.field), "does not include this node's "+l.what+" ("+l.node+")")
			}
		}
	}

	// Above the node's ceiling Admit lowers the grant; the deployer declared
	// more than the node ever grants.
	node := pol.BudgetCeiling
	if rev.Ceiling.CPUFuel > node.CPUFuel {
		c.add(fuelF, "exceeds the node's budget ceiling ("+strconv.FormatUint(node.CPUFuel, 10)+")")
	}
	if rev.Ceiling.MemoryBytes > node.MemoryBytes {
		c.add(memF, "exceeds the node's budget ceiling ("+bytesString(node.MemoryBytes)+")")
	}
	if rev.Ceiling.WallTime > node.WallTime {
		c.add(wallF, "exceeds the node's budget ceiling ("+node.WallTime.String()+")")
	}

	// The grant of a request that restricts nothing, as Admit computes it.
	r := rev
	if r.Capsule == (vocab.Capsule{}) {
		r.Capsule.MaxMemoryBytes = math.MaxUint64
	}
	budget, rej := grant(&BudgetRequest{}, &r, node)
	switch rej {
	case nil:
	case rejZeroFuel:
		c.add(fuelF, "must be positive")
	case rejZeroMemory:
		c.add(memF, "must be at least "+bytesString(vocab.WasmPageBytes)+" (one WebAssembly page)")
	case rejZeroWall:
		c.add(wallF, "must be positive")
	case rejMemoryBelowMin:
		c.add(memF, "is below the module's minimum memory ("+bytesString(r.Capsule.MinMemoryBytes)+")")
	}
	if rej != nil || trust == nil {
		return c.list
	}
	if _, tenantMay := ts.trust[rev.TrustClass]; !tenantMay {
		return c.list // the cell classes the revision may use are unknown
	}

	if _, rej := p.selectCell(v, budget.MemoryBytes, rev.Requirements, ts.cellMask&trust.cellMask); rej != nil {
		c.cellProblem(v, at, memF, budget.MemoryBytes, rev.Requirements, ts.cellMask&trust.cellMask)
	}

	// Reservations: one activation's grant against every scope's limit.
	for _, s := range []struct {
		what string
		lim  Limits
	}{{"the node", pol.Limits.Limits}, {"the tenant", ts.limits.Limits}, {"trust class " + string(trust.name), trust.limits}} {
		if budget.CPUFuel > s.lim.MaxReservedFuel {
			c.add(fuelF, "exceeds what "+s.what+" may reserve ("+strconv.FormatUint(s.lim.MaxReservedFuel, 10)+")")
		}
		if budget.MemoryBytes > s.lim.MaxReservedMemory {
			c.add(memF, "exceeds what "+s.what+" may reserve ("+bytesString(s.lim.MaxReservedMemory)+")")
		}
	}
	return c.list
}

// cellProblem explains a selectCell refusal in the terms of the field that
// causes it, looking at every configured cell class first, then at the ones
// the tenant and the trust class allow.
func (c *revisionCheck) cellProblem(v *view, at, memF vocab.FieldPath, mem uint64, req vocab.Requirements, allowed uint8) {
	for _, scope := range []struct {
		who  string
		mask uint8
	}{{"of this node", math.MaxUint8}, {"the tenant may use", allowed}} {
		var threading, features bool
		var largest uint64
		for _, cl := range vocab.CellClasses {
			cs := &v.cells[cl]
			if !cs.configured || scope.mask&(1<<cl) == 0 || cs.threading&(1<<req.Threading) == 0 {
				continue
			}
			threading = true
			if !req.Features.SubsetOf(cs.features) {
				continue
			}
			features = true
			largest = max(largest, cs.memory)
		}
		switch {
		case !threading:
			c.add(at.Field("threading"), "no cell class "+scope.who+" offers threading "+req.Threading.String())
		case !features:
			c.add(at.Field("features"), "no cell class "+scope.who+" offers every feature of "+req.Features.String())
		case largest < mem:
			c.add(memF, "no cell class "+scope.who+" has "+bytesString(mem)+" (largest: "+bytesString(largest)+")")
		default:
			continue
		}
		return
	}
}

type revisionCheck struct{ list []vocab.FieldError }

// add records a problem unless its field already has one: the first
// problem of a field is its cause, later ones its consequences.
func (c *revisionCheck) add(f vocab.FieldPath, problem string) {
	if slices.ContainsFunc(c.list, func(e vocab.FieldError) bool { return e.Field == string(f) }) {
		return
	}
	c.list = append(c.list, f.Error(problem))
}

func bytesString(n uint64) string { return vocab.ByteSize(n).String() }
