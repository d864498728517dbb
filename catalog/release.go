// The immutable per-service record built from a validated vocab.Spec and
// the inspected modules: its revisions, routes and policies, interned.

package catalog

import (
	"slices"
	"strconv"
	"strings"
	"unique"

	"github.com/latent-node/latent-node/vocab"
)

// service is one deployed service inside a snapshot. It is immutable.
type service struct {
	tenant     vocab.TenantID
	name       vocab.ServiceName
	generation vocab.Generation
	release    vocab.ReleaseID
	policies   []vocab.RevisionPolicy
	attributes [][]vocab.Attribute // per revision; nil when no revision has any
	routes     []route             // sorted by name
}

// A service is kept compact: a catalog holds up to hundreds of thousands of
// them, and every pointer in one is memory and garbage-collector work. So
// it keeps no manifest (Catalog.Manifest reads the service's record), its
// routes are a sorted slice and its revisions are found by scanning (at
// most MaxRevisions and MaxRoutes).

type route struct {
	name     vocab.RouteName
	function vocab.FunctionName
	targets  []routeTarget
}

// routeTarget is one target of a route: the revision's index in
// service.policies and the running sum of the weights up to it.
type routeTarget struct {
	revision   int32
	cumulative uint32
}

// intern returns the canonical copy of a name many services repeat
// (tenants, artifact digests, trust classes, revision, route and function
// names): one copy per distinct value, freed when no service uses it.
func intern[T ~string](v T) T { return T(unique.Make(string(v)).Value()) }

// route returns the service's route of that name.
func (s *service) route(name vocab.RouteName) (*route, bool) {
	i, ok := slices.BinarySearchFunc(s.routes, name, func(r route, n vocab.RouteName) int { return strings.Compare(string(r.name), string(n)) })
	if !ok {
		return nil, false
	}
	return &s.routes[i], true
}

// revision returns the index of the revision with that id.
func (s *service) revision(id vocab.RevisionID) (int, bool) {
	for i := range s.policies {
		if s.policies[i].ID == id {
			return i, true
		}
	}
	return 0, false
}

func (s *service) deployment() vocab.Deployment {
	d := vocab.Deployment{Tenant: s.tenant, Service: s.name, Release: s.release, Generation: s.generation,
		Revisions: make([]vocab.RevisionRef, len(s.policies))}
	for i, p := range s.policies {
		d.Revisions[i] = vocab.RevisionRef{Name: p.Name, ID: p.ID}
	}
	return d
}

// artifacts returns the distinct artifacts of the service's revisions, in
// revision order: the module references the catalog holds for it.
func (s *service) artifacts() []vocab.Digest {
	out := make([]vocab.Digest, 0, len(s.policies))
	for _, p := range s.policies {
		if !slices.Contains(out, p.Artifact) {
			out = append(out, p.Artifact)
		}
	}
	return out
}

// buildService turns a validated spec and the inspection of its modules into
// an immutable service. Problems that need the modules (memory, exports,
// threading) are reported with their manifest field.
func buildService(s vocab.Spec, modules []ModuleInfo, gen vocab.Generation) (*service, error) {
	var p vocab.Problems
	release := s.ReleaseID()
	svc := &service{
		tenant: s.Tenant, name: s.Service, generation: gen, release: release,
		policies: make([]vocab.RevisionPolicy, len(s.Revisions)),
		routes:   make([]route, 0, len(s.Routes)),
	}
	for i, r := range s.Revisions {
		f := "revisions[" + strconv.Itoa(i) + "]"
		mod := modules[i]
		if err := mod.validate(); err != nil {
			p.AddErr(f+".artifact", err)
			continue
		}
		switch floor := mod.MinMemoryBytes + mod.FixedMemoryBytes; {
		case r.Ceiling.MemoryBytes < mod.MinMemoryBytes:
			p.Add(f+".ceiling.memory_bytes", "is smaller than the module's initial memory of %d bytes", mod.MinMemoryBytes)
		case r.Ceiling.MemoryBytes < floor:
			p.Add(f+".ceiling.memory_bytes", "is smaller than the module's initial memory and tables, %d bytes", floor)
		}
		checkComponent(&p, f, r, mod)
		if mod.Threading == vocab.ThreadingShared && r.Threading != vocab.ThreadingShared {
			p.Add(f+".threading", `the module uses shared memory; declare threading = "shared"`)
		}
		id := s.RevisionID(i)
		svc.policies[i] = vocab.RevisionPolicy{
			Tenant: intern(s.Tenant), Service: s.Service, Name: intern(r.Name), ID: id, Release: release, Generation: gen,
			Artifact: intern(r.Artifact), TrustClass: intern(r.TrustClass), Ceiling: r.Ceiling,
			Capsule: vocab.Capsule{MinMemoryBytes: mod.MinMemoryBytes + mod.FixedMemoryBytes,
				MaxMemoryBytes: mod.MaxMemoryBytes + mod.FixedMemoryBytes + vocab.CallStackBytes},
			Requirements: vocab.Requirements{Threading: r.Threading, Features: r.Features.Union(mod.Features)},
			Placement:    r.Placement, Random: r.Random, ABI: r.ABI, Instance: r.Instance, Init: intern(r.Init),
			Outbound: r.Outbound,
		}
		if r.Init != "" && !mod.exports(r.Init) {
			p.Add(f+".init", "the module does not export this function")
		}
		if len(r.Attributes) > 0 {
			if svc.attributes == nil {
				svc.attributes = make([][]vocab.Attribute, len(s.Revisions))
			}
			svc.attributes[i] = r.Attributes
		}
	}
	for i, r := range s.Routes {
		rt := route{name: intern(r.Name), function: intern(r.Function), targets: make([]routeTarget, len(r.Targets))}
		var sum uint32
		for j, t := range r.Targets {
			if modules[t.Revision].Component {
				if r.Function != vocab.DefaultFunction {
					p.Add("routes["+strconv.Itoa(i)+"].function", "revision %q is a wasi-http component, which the node calls through its wasi:http/incoming-handler: leave function unset", s.Revisions[t.Revision].Name)
				}
			} else if !modules[t.Revision].exports(r.Function) {
				p.Add("routes["+strconv.Itoa(i)+"].function", "revision %q does not export this function", s.Revisions[t.Revision].Name)
			}
			sum += t.Weight
			rt.targets[j] = routeTarget{revision: int32(t.Revision), cumulative: sum}
		}
		svc.routes = append(svc.routes, rt)
	}
	slices.SortFunc(svc.routes, func(a, b route) int { return strings.Compare(string(a.name), string(b.name)) })
	if err := p.Err(); err != nil {
		return nil, err
	}
	return svc, nil
}

// checkComponent reports, under field f, a revision whose guest ABI does not
// fit its artifact: a component needs abi = "wasi-http" (and has no init
// export: its own start initialises it), and abi = "wasi-http" needs a
// component.
func checkComponent(p *vocab.Problems, f string, r vocab.RevisionSpec, mod ModuleInfo) {
	switch {
	case mod.Component && r.ABI != vocab.ABIWASIHTTP:
		p.Add(f+".abi", `the artifact is a WebAssembly component; declare abi = "wasi-http"`)
	case !mod.Component && r.ABI == vocab.ABIWASIHTTP:
		p.Add(f+".abi", `abi = "wasi-http" needs a WASI 0.2 component (of the wasi:http proxy world); the artifact is a core module`)
	case mod.Component && r.Init != "":
		p.Add(f+".init", "a wasi-http component has no init function")
	}
}
