// The signature budget: function signatures the runtime holds, charged
// per tenant against Config.MaxSignaturesPerTenant (runner/internal/sigledger).

package runner

// DefaultMaxSignaturesPerTenant is Config.MaxSignaturesPerTenant's default:
// a Go guest declares a few hundred distinct function types, a Rust or C
// one fewer, and deploys of one toolchain share most of theirs.
const DefaultMaxSignaturesPerTenant = 20_000
