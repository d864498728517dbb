// Package cluster shares one catalog among many nodes through etcd.
//
// etcd is the source of truth for releases and their order; each node keeps
// serving from its own verified, persisted catalog (package catalog) and
// applies the history it watches. Admission stays node-local.
//
// # Keys
//
// Under the configured prefix P:
//
//	P/services/<tenant>/<service>   the service's release record (its manifest and release id)
//	P/head                           the last deploy or delete (written in the same transaction)
//	P/census/<tenant>                touched by every transaction that creates or deletes one of the tenant's services
//	P/nodes/<node id>                a member's record, leased: URL, version, applied generation, freshness
//	P/artifacts/<digest>/<node id>   the member holds the artifact's bytes, leased (removed when its catalog deletes them)
//	P/secret                         the peer token nodes present to each other, made once, re-read every second
//	P/pending/<tenant>/<digest>/<id> a deploy of a release of the tenant naming the artifact is under way, leased
//
// # Peers
//
// Nodes call each other over HTTP with the peer token: to fetch an
// artifact, to ask a member to replicate one before a release naming it is
// committed, and to ask whether a member applied a generation. The token
// goes only to members whose advertised URL is scheme://host:port (https
// when the node serves TLS: Config.RequireHTTPS); other member records are
// ignored. Redirects are never followed. A member asked to replicate
// artifact D for tenant T makes T its owner only while P/pending/T/D/
// holds an announcement of the deploying node (Replicate), so the token
// alone cannot hand one tenant's module to another. A new token written
// to P/secret is picked up at the next freshness check; the previous one
// stays accepted for a grace period.
//
// A catalog generation is the etcd revision of the deploy or delete that
// made it: monotonic and never reused. A node whose catalog is at
// generation G serves exactly the services etcd had at revision G. The head
// key's modification revision is the cluster's latest generation, which a
// node compares with its own to know it is current.
//
// # Deploy through any node
//
// Deploy checks and inspects the release against the local catalog, makes
// sure every artifact it names is held by min(replication, ready members)
// nodes (asking ready members to fetch it from a holder), and then writes
// the record and the head in one transaction that compares the service
// key's modification revision with the one read before. An ambiguous
// commit is resolved by reading the key again: the release id is derived
// from the content, so the record says whether this release landed; a
// retried deploy of the same content never makes a second generation.
// A transaction that creates a service also requires the tenant's census
// key unchanged since the generation its quota was checked on; if another
// node created or deleted one of the tenant's services meanwhile, Deploy
// waits until the local catalog has that change and checks again.
//
// # Apply on every node
//
// Run lists the services at one revision (in pages of Config.ListPage
// records, each read at the first page's revision), fetches missing artifacts from
// holders (verifying their digests and trying the next holder after a bad
// one), replaces the catalog at the head's revision, then watches from the
// listing revision and applies each change at its revision. A compacted
// history, a broken watch or a catalog that does not keep up with the head
// leads to a new listing. A listing whose head is older than the local
// catalog (a store restored from an older backup) is refused and reported:
// the node keeps serving what it has.
//
// # Failure
//
// The node checks every second, with a quorum read of the head, that it
// can reach etcd and that its catalog is current. Without that for
// staleAfter (2.5 s) it reports itself stale; after the configured
// max_staleness it is not ready. It keeps serving its last catalog
// throughout; deploys are refused while it is stale.
//
// # Internal organization
//
//   - cluster.go: Config, Cluster, New, Run, Status and the freshness check.
//   - membership.go: the membership lease, the member record and the
//     artifact holdings under it.
//   - deploy.go: Deploy and Delete (the checked compare-and-swap commit)
//     and Replicate.
//   - artifacts.go: artifact holders, replication before a release is
//     published, the pending-release announcements, fetching from a holder.
//   - apply.go: the apply loop: list, watch, apply, fetch what is missing.
//   - peers.go: the peer token and the requests sent to other members.
//   - keys.go: the etcd keys.
package cluster
