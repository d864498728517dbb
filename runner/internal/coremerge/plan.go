package coremerge

// Plan, the merger's input.

// Plan describes core module instances to merge into one module.
type Plan struct {
	// Modules are the core modules' bytes, in instantiation order; each is
	// instantiated once.
	Modules [][]byte
	// Imports[i][j] is what import j (in import-section order) of
	// Modules[i] is bound to.
	Imports [][]Ref
	// Exports are the merged module's exports.
	Exports []Export
}

// Ref is what a core module's import is bound to: a host import of the
// merged module (Host set: functions only, named HostModule and
// HostName), or export Name of Modules[Module].
type Ref struct {
	Host       bool
	HostModule string
	HostName   string
	Module     int
	Name       string
}

// Export is one export of the merged module: export Item of
// Modules[Module], named Name.
type Export struct {
	Name   string
	Module int
	Item   string
}
