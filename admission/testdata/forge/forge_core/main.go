// Command forge_core tries to copy obligations into a new execution permit: it must not compile.
package main

import "github.com/latent-node/latent-node/admission"

func main() {
	var a *admission.AdmissionPermit
	e := &admission.ExecutionPermit{permitCore: a.permitCore}
	_ = e.Release()
}
