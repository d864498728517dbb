// Package admission will own the node's admission layer (issue 3): the
// validated NodeAdmissionPolicy, the LocalQuotaProvider (one ledger under one
// mutex for node, tenant, trust-class, queue-class and cell-class counters),
// the Controller that refuses invalid, unauthorized, incompatible, infeasible
// and overloaded work before any cell is touched, the affine admission and
// execution permits, and the structured rejection errors. It reads revision
// policy from a catalog.Pin and load samples from loadsource.
package admission
