// Command control uses only admission's public API: it must compile.
package main

import "github.com/latent-node/latent-node/admission"

func main() {
	var p *admission.Permit
	if p != nil {
		_, _ = p.StartExecution()
	}
	_ = admission.ErrPermitUsed
}
