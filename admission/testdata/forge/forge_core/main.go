// Command forge_core tries to build an execution permit out of an admission
// permit's obligations: it must not compile.
package main

import "github.com/latent-node/latent-node/admission"

func main() {
	var a *admission.Permit
	e := &admission.ExecutionPermit{a: a}
	_ = e.Release()
}
