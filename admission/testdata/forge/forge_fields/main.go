// Command forge_fields tries to mint a permit with a reservation: it must not compile.
package main

import "github.com/latent-node/latent-node/admission"

func main() {
	p := &admission.Permit{id: "x", seq: 1}
	_, _ = p.StartExecution()
}
