// Command forge_assign tries to raise a granted budget after admission: it must not compile.
package main

import "github.com/latent-node/latent-node/admission"

func main() {
	var a admission.Permit
	a.budget.CPUFuel = 1 << 60
}
