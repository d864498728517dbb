// Checks the vocabulary and the HTTP mapping against docs/api.md: every
// refusal the module emits against the doc's refusal tables (both ways),
// every code and reason against its status table, every outcome against its
// outcome table.

package refusal

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// emitted lists every refusal the module emits: a code and reason with the
// scopes and dimensions it is emitted with (every combination need not
// occur) and whether it is retryable. A refusal added to the code belongs
// here and in docs/api.md.
var emitted = []struct {
	code  Code
	rs    []Reason
	ss    []Scope
	ds    []Dimension
	retry bool
}{
	// The ingress governor (node/ingress.go) and the catalog writes' bound.
	{CodeResourceExhausted, rs(ReasonCapacityExhausted), ss(ScopeNode, ScopeTenant, ScopePrincipal),
		ds(DimDataSlots, DimDataBytes, DimControlSlots, DimControlBytes), true},
	{CodeResourceExhausted, rs(ReasonCapacityExhausted), ss(ScopeTenant), ds(DimCatalogWrites), true},
	// Authentication, the browser rules, roles (node/http.go, browser.go).
	{CodeUnauthenticated, rs(ReasonUnauthenticated), ss(ScopePrincipal), ds(DimNone), false},
	{CodePermissionDenied, rs(ReasonHostNotAllowed), ss(ScopeRequest), ds(DimHost), false},
	{CodePermissionDenied, rs(ReasonCrossSiteRequest), ss(ScopeRequest), ds(DimOrigin), false},
	{CodePermissionDenied, rs(ReasonRoleNotAuthorized), ss(ScopePrincipal), ds(DimNone), false},
	{CodePermissionDenied, rs(ReasonPrincipalNotAuthorized), ss(ScopePrincipal), ds(DimNone, DimServiceIdentity), false},
	// The request's form (node/http.go, node/api, node/wagi.go, node/list.go).
	{CodeInvalidArgument, rs(ReasonInvalidHeader), ss(ScopeRequest), ds(DimHeaderActivationID, DimHeaderRoutingKey,
		DimHeaderStderr, DimHeaderPriority, DimHeaderTimeoutMs, DimHeaderDeadlineUnixMs, DimHeaderBudget, DimHeaderMeta), false},
	{CodeInvalidArgument, rs(ReasonUnknownPath), ss(ScopeRequest), ds(DimPath), false},
	{CodeInvalidArgument, rs(ReasonMethodNotAllowed), ss(ScopeRequest), ds(DimMethod), false},
	{CodeInvalidArgument, rs(ReasonEnvironmentTooLarge), ss(ScopeRequest), ds(DimHeaders), false},
	{CodeInvalidArgument, rs(ReasonInvalidPath, ReasonInvalidTarget, ReasonInvalidGeneration), ss(ScopeRequest), ds(DimPath), false},
	{CodeInvalidArgument, rs(ReasonMalformedBody), ss(ScopeRequest), ds(DimBody), false},
	{CodeInvalidArgument, rs(ReasonInvalidDigest, ReasonDigestMismatch), ss(ScopeRequest), ds(DimDigest), false},
	{CodeInvalidArgument, rs(ReasonInvalidQuery), ss(ScopeRequest), ds(DimLimit, DimAfter), false},
	{CodeInvalidArgument, rs(ReasonInvalidManifest), ss(ScopeRequest), ds(DimManifest), false},
	{CodeResourceExhausted, rs(ReasonPayloadTooLarge), ss(ScopeNode), ds(DimPayloadBytes, DimArtifactBytes, DimManifestBytes), false},
	// Resolving (node/invoke.go) and admission (admission/errors.go, permit.go).
	{CodeAdmissionRejected, rs(ReasonServiceNotFound), ss(ScopeRevision), ds(DimService), false},
	{CodeAdmissionRejected, rs(ReasonRouteNotFound), ss(ScopeRevision), ds(DimRoute), false},
	{CodeAdmissionRejected, rs(ReasonRevisionNotAvailable), ss(ScopeRevision), ds(DimNone), false},
	{CodeInvalidArgument, rs(ReasonInvalidIdentifier), ss(ScopeRequest, ScopePrincipal, ScopeRevision),
		ds(DimTarget, DimActivationID, DimSubject, DimRevisionID, DimMetadataKey), false},
	{CodeInvalidArgument, rs(ReasonMetadataTooLarge), ss(ScopeRequest), ds(DimMetadataEntries, DimMetadataBytes), false},
	{CodeInvalidArgument, rs(ReasonUnsupportedBudgetDimension), ss(ScopeRequest),
		ds(DimNetworkEgressBytes, DimStorageBytes, DimAccelerators), false},
	{CodePermissionDenied, rs(ReasonPriorityNotAuthorized), ss(ScopeNode, ScopeTenant), ds(DimPriority), false},
	{CodeResourceExhausted, rs(ReasonPayloadTooLarge), ss(ScopeNode, ScopeTenant), ds(DimPayloadBytes), false},
	{CodePermissionDenied, rs(ReasonTrustClassNotAuthorized), ss(ScopeTenant), ds(DimTrustClass), false},
	{CodeAdmissionRejected, rs(ReasonPlacementNotCompatible), ss(ScopeNode), ds(DimPlacement), false},
	{CodeInvalidArgument, rs(ReasonBudgetInfeasible), ss(ScopeRequest, ScopeRevision), ds(DimCPUFuel, DimMemory, DimWallTime), false},
	{CodeAdmissionRejected, rs(ReasonUnsupportedExecutionRequirement), ss(ScopeCellClass), ds(DimThreading, DimFeatures), false},
	{CodeAdmissionRejected, rs(ReasonNoCompatibleCell), ss(ScopeCellClass), ds(DimMemory), false},
	{CodePermissionDenied, rs(ReasonCellClassNotAuthorized), ss(ScopeCellClass), ds(DimCellClass), false},
	{CodeDeadlineExceeded, rs(ReasonDeadlineExceeded), ss(ScopeRequest, ScopeQueueClass), ds(DimWallTime), false},
	{CodeUnavailable, rs(ReasonLoadSampleMissing, ReasonLoadSampleMalformed, ReasonLoadSampleOutOfOrder, ReasonLoadSampleFuture,
		ReasonLoadSampleStale, ReasonLoadSourceUnavailable), ss(ScopeLoadSource), ds(DimNone), true},
	{CodeResourceExhausted, rs(ReasonNodeOverloaded), ss(ScopeNode), ds(DimCPU, DimMemory), true},
	{CodeAlreadyExists, rs(ReasonActivationIDUnavailable), ss(ScopeRequest), ds(DimActivationID), false},
	{CodeResourceExhausted, rs(ReasonCapacityExhausted), ss(ScopeNode, ScopeTenant, ScopeTrustClass, ScopeQueueClass),
		ds(DimLiveActivations, DimQueued, DimCPUFuel, DimMemory), true},
	{CodeResourceExhausted, rs(ReasonCapacityExhausted), ss(ScopeNode), ds(DimArithmetic), true},
	{CodeAdmissionRejected, rs(ReasonQueueDeadlineInfeasible), ss(ScopeCellClass), ds(DimWallTime), true},
	// The scheduler (scheduler/errors.go) and the node's shutdown.
	{CodeResourceExhausted, rs(ReasonFairShareOfWaitingSlots), ss(ScopeQueueClass), ds(DimQueued), true},
	{CodeResourceExhausted, rs(ReasonQueueWaitExceeded), ss(ScopeQueueClass), ds(DimWaitTime), true},
	{CodeUnavailable, rs(ReasonShuttingDown), ss(ScopeNode), ds(DimNone), true},
	{CodeCancelled, rs(ReasonCancelled), ss(ScopeRequest), ds(DimNone), false},
	{CodeInternal, rs(ReasonPlatformFailure), ss(ScopeNode), ds(DimNone, DimExecutor), false},
	// The catalog's writes and the cluster (node/http.go, node/cluster.go).
	{CodeResourceExhausted, rs(ReasonTenantQuotaExceeded), ss(ScopeTenant),
		ds(DimNone, DimServices, DimArtifacts, DimArtifactBytes, DimDeployedBytes), false},
	{CodeResourceExhausted, rs(ReasonInsufficientStorage), ss(ScopeNode), ds(DimStorageBytes, DimCompiledBytes), true},
	{CodeResourceExhausted, rs(ReasonCatalogFull), ss(ScopeNode), ds(DimServices), false},
	{CodeUnavailable, rs(ReasonClusterUnavailable, ReasonCommitUnknown, ReasonConcurrentChange, ReasonPeerBusy), ss(ScopeNode),
		ds(DimCluster), true},
	{CodeInvalidArgument, rs(ReasonNotClustered), ss(ScopeNode), ds(DimCluster), false},
	{CodePermissionDenied, rs(ReasonNotPending), ss(ScopeTenant), ds(DimCluster), false},
	// Health and reload (node/http.go, node/reload.go).
	{CodeUnavailable, rs(ReasonHealthChecksBusy), ss(ScopeNode), ds(DimNone), true},
	{CodeInvalidArgument, rs(ReasonNotReloadable), ss(ScopeNode), ds(DimConfiguration), false},
	{CodeInvalidArgument, rs(ReasonInvalidConfiguration), ss(ScopeRequest), ds(DimConfiguration), false},
	{CodeUnavailable, rs(ReasonReloadFailed), ss(ScopeNode), ds(DimConfiguration), true},
}

func rs(v ...Reason) []Reason       { return v }
func ss(v ...Scope) []Scope         { return v }
func ds(v ...Dimension) []Dimension { return v }

// apiDoc returns docs/api.md.
func apiDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// section is the text of doc's section heading up to the next heading of
// the same level.
func section(t *testing.T, doc, heading string) string {
	t.Helper()
	_, s, ok := strings.Cut(doc, "\n"+heading+"\n")
	if !ok {
		t.Fatalf("docs/api.md has no section %q", heading)
	}
	if i := strings.Index(s, "\n## "); i >= 0 {
		s = s[:i]
	}
	return s
}

// cells splits a table row into its trimmed cells.
func cells(row string) []string {
	parts := strings.Split(strings.Trim(strings.TrimSpace(row), "|"), "|")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

var backticked = regexp.MustCompile("`([^`]+)`")

// quoted returns the backticked words of s.
func quoted(s string) []string {
	var out []string
	for _, m := range backticked.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

// lookup builds a name → value map of an enum.
func lookup[E interface {
	comparable
	String() string
}](vals []E) map[string]E {
	m := map[string]E{}
	for _, v := range vals {
		m[v.String()] = v
	}
	return m
}

// docRow is one row of the doc's refusal tables.
type docRow struct {
	line   string
	status int
	code   Code
	rs     []Reason
	ss     []Scope
	ds     []Dimension
	retry  bool
}

// refusalRows parses the rows of every table of the "## Refusals" section.
func refusalRows(t *testing.T, doc string) []docRow {
	t.Helper()
	codes, reasons, scopes, dims := lookup(Codes()), lookup(Reasons()), lookup(Scopes()), lookup(Dimensions())
	var rows []docRow
	for _, line := range strings.Split(section(t, doc, "## Refusals"), "\n") {
		if !regexp.MustCompile(`^\| \d{3} \| `).MatchString(line) {
			continue
		}
		c := cells(line)
		if len(c) != 6 {
			t.Errorf("docs/api.md: a refusal row has %d cells: %s", len(c), line)
			continue
		}
		r := docRow{line: line, retry: c[4] == "yes"}
		r.status, _ = strconv.Atoi(c[0])
		if c[4] != "yes" && c[4] != "no" {
			t.Errorf("docs/api.md: retryable %q is neither yes nor no: %s", c[4], line)
		}
		code, reasonList, found := strings.Cut(c[1], " / ")
		var ok bool
		if r.code, ok = codes[code]; !found || !ok {
			t.Errorf("docs/api.md: unknown code %q: %s", code, line)
		}
		for _, name := range strings.Split(reasonList, ", ") {
			if v, ok := reasons[name]; ok {
				r.rs = append(r.rs, v)
			} else {
				t.Errorf("docs/api.md: unknown reason %q: %s", name, line)
			}
		}
		for _, name := range strings.Split(c[2], ", ") {
			if v, ok := scopes[name]; ok {
				r.ss = append(r.ss, v)
			} else {
				t.Errorf("docs/api.md: unknown scope %q: %s", name, line)
			}
		}
		if c[3] == "" || regexp.MustCompile(`(^|, )none(,|$)`).MatchString(c[3]) {
			r.ds = append(r.ds, DimNone)
		}
		for _, name := range quoted(c[3]) {
			if v, ok := dims[name]; ok {
				r.ds = append(r.ds, v)
			} else {
				t.Errorf("docs/api.md: unknown dimension %q: %s", name, line)
			}
		}
		rows = append(rows, r)
	}
	if len(rows) < 40 {
		t.Fatalf("found %d refusal rows in docs/api.md; the parser no longer reads it", len(rows))
	}
	return rows
}

// TestRefusals_matchDoc checks every refusal the module emits against
// docs/api.md's refusal tables, and every row of those tables against what
// the module emits: status, code, reason, scope, dimension and retryable.
func TestRefusals_matchDoc(t *testing.T) {
	rows := refusalRows(t, apiDoc(t))
	for _, e := range emitted {
		for _, r := range e.rs {
			ref := Refusal{Code: e.code, Reason: r, Retryable: e.retry}
			status := ref.HTTP().Status
			for _, s := range e.ss {
				for _, d := range e.ds {
					found := false
					for _, row := range rows {
						if row.code == e.code && slices.Contains(row.rs, r) && slices.Contains(row.ss, s) &&
							slices.Contains(row.ds, d) && row.retry == e.retry && row.status == status {
							found = true
							break
						}
					}
					if !found {
						t.Errorf("docs/api.md has no row %d %s / %s, scope %s, dimension %q, retryable %v",
							status, e.code, r, s, d, e.retry)
					}
				}
			}
		}
	}
	for _, row := range rows {
		var match []int // indexes of emitted entries of the row's code and one of its reasons
		for i, e := range emitted {
			if e.code != row.code {
				continue
			}
			for _, r := range row.rs {
				if slices.Contains(e.rs, r) {
					match = append(match, i)
					break
				}
			}
		}
		for _, r := range row.rs {
			ok := false
			for _, i := range match {
				e := emitted[i]
				if slices.Contains(e.rs, r) && e.retry == row.retry &&
					(Refusal{Code: e.code, Reason: r}).HTTP().Status == row.status {
					ok = true
				}
			}
			if !ok {
				t.Errorf("docs/api.md: no refusal %s / %s with status %d, retryable %v is emitted: %s",
					row.code, r, row.status, row.retry, row.line)
			}
		}
		for _, s := range row.ss {
			if !slices.ContainsFunc(match, func(i int) bool { return slices.Contains(emitted[i].ss, s) }) {
				t.Errorf("docs/api.md: scope %s is not emitted with these reasons: %s", s, row.line)
			}
		}
		for _, d := range row.ds {
			if !slices.ContainsFunc(match, func(i int) bool { return slices.Contains(emitted[i].ds, d) }) {
				t.Errorf("docs/api.md: dimension %q is not emitted with these reasons: %s", d, row.line)
			}
		}
	}
}

// TestEmitted_coversEnums: every code, scope and dimension, and every
// reason but the outcomes', is emitted (so is in docs/api.md's refusal
// tables); the outcomes' reasons are the failed outcomes'.
func TestEmitted_coversEnums(t *testing.T) {
	var codes []Code
	var reasons []Reason
	var scopes []Scope
	var dims []Dimension
	for _, e := range emitted {
		codes = append(codes, e.code)
		reasons = append(reasons, e.rs...)
		scopes = append(scopes, e.ss...)
		dims = append(dims, e.ds...)
	}
	for _, o := range Outcomes() {
		if r := o.Refusal(); r.Code != CodeNone {
			codes, reasons, scopes = append(codes, r.Code), append(reasons, r.Reason), append(scopes, r.Scope)
		}
	}
	for _, v := range Codes() {
		if !slices.Contains(codes, v) {
			t.Errorf("code %s is never emitted", v)
		}
	}
	for _, v := range Reasons() {
		if !slices.Contains(reasons, v) {
			t.Errorf("reason %s is never emitted", v)
		}
	}
	for _, v := range Scopes() {
		if !slices.Contains(scopes, v) {
			t.Errorf("scope %s is never emitted", v)
		}
	}
	for _, v := range Dimensions() {
		if !slices.Contains(dims, v) {
			t.Errorf("dimension %s is never emitted", v)
		}
	}
}

// TestHTTP_statusTable checks the status of every code and reason against
// docs/api.md's "Status of a structured refusal": a code's default status,
// and the statuses the table names for some of its reasons.
func TestHTTP_statusTable(t *testing.T) {
	codes, reasons := lookup(Codes()), lookup(Reasons())
	status := regexp.MustCompile(`\b\d{3}\b`)
	want := map[Code]map[Reason]int{} // ReasonNone: the code's default
	for _, line := range strings.Split(section(t, apiDoc(t), "## Status of a structured refusal"), "\n") {
		c := cells(line)
		if !strings.HasPrefix(line, "| ") || len(c) != 2 || len(quoted(c[0])) != 1 {
			continue
		}
		code, ok := codes[quoted(c[0])[0]]
		if !ok {
			t.Errorf("docs/api.md: unknown code in %s", line)
			continue
		}
		want[code] = map[Reason]int{}
		for i, part := range strings.Split(c[1], "; ") {
			n, err := strconv.Atoi(status.FindString(part))
			if err != nil {
				t.Errorf("docs/api.md: no status in %q: %s", part, line)
			}
			if i == 0 {
				want[code][ReasonNone] = n
				continue
			}
			for _, name := range quoted(part) {
				r, ok := reasons[name]
				if !ok {
					t.Errorf("docs/api.md: unknown reason %q: %s", name, line)
				}
				want[code][r] = n
			}
		}
	}
	for _, c := range Codes() {
		byReason, ok := want[c]
		if !ok {
			t.Errorf("docs/api.md's status table has no row for %s", c)
			continue
		}
		for _, r := range append([]Reason{ReasonNone}, Reasons()...) {
			w, ok := byReason[r]
			if !ok {
				w = byReason[ReasonNone]
			}
			if have := (Refusal{Code: c, Reason: r}).HTTP().Status; have != w {
				t.Errorf("%s/%s: status %d, docs/api.md says %d", c, r, have, w)
			}
		}
	}
}

// TestOutcomes_matchDoc checks every outcome against docs/api.md's table of
// outcomes: the name and, for a failed one, the status of its refusal (the
// first row naming it).
func TestOutcomes_matchDoc(t *testing.T) {
	first := map[string]int{}
	for _, line := range strings.Split(section(t, apiDoc(t), "## Outcomes of executed activations"), "\n") {
		c := cells(line)
		if !strings.HasPrefix(line, "| `") || len(c) != 3 || c[1] == "status" {
			continue
		}
		n, err := strconv.Atoi(c[1])
		if err != nil {
			t.Errorf("docs/api.md: no status in %s", line)
		}
		for _, name := range quoted(c[0]) {
			if _, seen := first[name]; !seen && !strings.Contains(name, "(") {
				first[name] = n
			}
		}
	}
	var names []string
	for _, o := range Outcomes() {
		names = append(names, o.String())
		want, ok := first[o.String()]
		switch {
		case !ok:
			t.Errorf("docs/api.md's outcome table has no row for %s", o)
		case o == OutcomeSuccess:
			if want != 200 || o.Refusal() != (Refusal{}) {
				t.Errorf("success: status %d in docs/api.md, refusal %+v", want, o.Refusal())
			}
		case o.Refusal().HTTP().Status != want:
			t.Errorf("%s: status %d, docs/api.md says %d", o, o.Refusal().HTTP().Status, want)
		}
	}
	for name := range first {
		if !slices.Contains(names, name) {
			t.Errorf("docs/api.md names outcome %q, which is not an Outcome", name)
		}
	}
}

// TestHTTP_typeAndTitle: the type is the code's (an outcome's for
// execution-failed), the title code/reason (unauthenticated: the code).
func TestHTTP_typeAndTitle(t *testing.T) {
	check := func(r Refusal) {
		t.Helper()
		typ, title := ProblemTypeBase+r.Code.String(), r.Code.String()+"/"+r.Reason.String()
		switch r.Code {
		case CodeUnauthenticated:
			title = r.Code.String()
		case CodeExecutionFailed:
			typ = ProblemTypeBase + r.Reason.String()
		}
		if h := r.HTTP(); h.Type != typ || h.Title != title {
			t.Errorf("%+v: type %q, title %q; want %q, %q", r, h.Type, h.Title, typ, title)
		}
	}
	for _, e := range emitted {
		for _, r := range e.rs {
			check(Refusal{Code: e.code, Reason: r, Scope: e.ss[0], Dimension: e.ds[0], Retryable: e.retry})
		}
	}
	for _, o := range Outcomes() {
		if o != OutcomeSuccess {
			check(o.Refusal())
		}
	}
	if h := (Refusal{Code: CodeUnauthenticated, Reason: ReasonUnauthenticated}).HTTP(); h.Title != "unauthenticated" ||
		h.Type != "https://latent-node.dev/problems/unauthenticated" || h.Status != 401 {
		t.Errorf("unauthenticated: %+v", h)
	}
	if h := OutcomeFuelExhausted.Refusal().HTTP(); h.Type != "https://latent-node.dev/problems/fuel-exhausted" ||
		h.Title != "execution-failed/fuel-exhausted" || h.Status != 502 {
		t.Errorf("fuel-exhausted: %+v", h)
	}
}

// TestNames: every value has a distinct, non-empty wire name; none has "".
func TestNames(t *testing.T) {
	check := func(kind string, names []string, none string) {
		t.Helper()
		if none != "" {
			t.Errorf("%s: the none value's name is %q", kind, none)
		}
		seen := map[string]bool{}
		for _, n := range names {
			if n == "" || seen[n] || strings.Contains(n, "(") {
				t.Errorf("%s: name %q is empty, repeated or out of range", kind, n)
			}
			seen[n] = true
		}
	}
	strs := func(vs []string) []string { return vs }
	var c, r, s, d, o []string
	for _, v := range Codes() {
		c = append(c, v.String())
	}
	for _, v := range Reasons() {
		r = append(r, v.String())
	}
	for _, v := range Scopes() {
		s = append(s, v.String())
	}
	for _, v := range Dimensions() {
		d = append(d, v.String())
	}
	for _, v := range Outcomes() {
		o = append(o, v.String())
	}
	check("Code", strs(c), CodeNone.String())
	check("Reason", r, ReasonNone.String())
	check("Scope", s, ScopeNone.String())
	check("Dimension", d, DimNone.String())
	check("Outcome", o, OutcomeNone.String())
	if n := Code(200).String(); n != "Code(200)" {
		t.Errorf("out of range: %q", n)
	}
	if n := Outcome(200).String(); n != "Outcome(200)" {
		t.Errorf("out of range: %q", n)
	}
}

// TestMatches: a sentinel matches on its code and on what else it names.
func TestMatches(t *testing.T) {
	r := Refusal{Code: CodeResourceExhausted, Reason: ReasonCapacityExhausted, Scope: ScopeTenant, Dimension: DimQueued, Retryable: true}
	for _, tc := range []struct {
		target Refusal
		want   bool
	}{
		{Refusal{Code: CodeResourceExhausted}, true},
		{Refusal{Code: CodeResourceExhausted, Reason: ReasonCapacityExhausted}, true},
		{Refusal{Code: CodeResourceExhausted, Reason: ReasonCapacityExhausted, Scope: ScopeTenant, Dimension: DimQueued}, true},
		{Refusal{Code: CodeResourceExhausted, Reason: ReasonPayloadTooLarge}, false},
		{Refusal{Code: CodeResourceExhausted, Scope: ScopeNode}, false},
		{Refusal{Code: CodeUnavailable}, false},
		{Refusal{Reason: ReasonCapacityExhausted}, false},
	} {
		if have := r.Matches(tc.target); have != tc.want {
			t.Errorf("Matches(%+v) = %v, want %v", tc.target, have, tc.want)
		}
	}
}
