// Package config reads the node's TOML configuration (every key is
// documented in docs/configuration.md), checks all of it at once and
// converts it into the typed configurations of the layers: admission's
// Policy, the cell pool's and the runner's Config, and plain
// fields for the scheduler, the load sampler, the HTTP server and the
// authenticator.
//
// # What it guarantees
//
// Parse (and Load, which reads at most MaxFileBytes from a file) returns a
// *Config only when every rule holds, and otherwise a *Error that lists
// every problem, one per line, "<key path>: <what to fix>":
//
//	node.listen: must be host:port, such as "127.0.0.1:8080" or ":8080"
//	principals[1].api_keys[0]: the same key hash belongs to principals[0]: a key authenticates exactly one principal
//	tenants.acme.limits.max_queued: missing required key: every limits table names all of its fields (0 grants no capacity)
//	tenants.acme.limits.max_queuedd: unknown key (did you mean max_queued?)
//
// Problems are sorted by key path (array indices numerically) and then by
// message, without duplicates, so the listing is stable and diffable.
// `latent-node check` prints err.Error() and exits 2.
//
// Decoding is strict: an unknown key, a value of the wrong type, a missing
// required key, a bad size or duration is a problem naming its key. Sizes
// are integers of bytes or strings such as "64MiB" (vocab.ParseByteSize);
// durations are Go duration strings; integers may use underscores.
//
// Required, with no default: [node.budget_ceiling] (all three keys),
// [node.limits] and every tenant's limits (all six keys), every trust
// class's limits (all four), each queue class's name, priorities and
// max_queued, each cell class's memory and parallelism, each tenant's four
// allowlists and each principal's subject, kind, tenant, roles and api_keys;
// node.data_dir unless the caller supplies it (WithDataDir). Zero in a limit
// grants no capacity; there is no silent unlimited and no wildcard. Every
// other key has the default documented on its field (the Default…
// constants): the values of the example configuration
// (testdata/design.toml), listen 127.0.0.1:8080, region and zone "local",
// architecture this host's (HostArchitecture).
//
// Then the rules: the admission policy's own (Policy.Validate:
// positive ceilings, queue classes named, non-overlapping and covering
// 0..node.limits.max_priority, references to configured cell and trust
// classes, thresholds in (0, 1], metadata bounds, placement names…), merged
// with this package's: listen is host:port; max_output_bytes is 1 byte to
// 1 GiB; cell memory is a multiple of 64 KiB up to 4 GiB and parallelism at
// most cellpool.MaxParallelism; the queue classes' reserved_cells sum to at
// most every cell class's parallelism (and less when a class reserves
// none); a tenant listing xlarge has a trust class that lists it too;
// sample_interval is shorter than max_observation_age; scheduler values are
// in range; principals name configured tenants, have a valid subject, a
// service identity exactly when kind = "service", at least one role and at
// least one well-formed key hash ("sha256:" + 64 lowercase hex digits), and
// no hash belongs to two principals, nor a (tenant, subject) pair to two
// entries. A value that failed to decode is not validated again (one
// problem per mistake).
//
// # Non-goals
//
// The package does not open the data directory, bind the address or start
// anything; it reads no clock. The one file it reads besides the
// configuration is [node.tls]'s: its certificate, key and client CAs, to
// report an unreadable one under its key. A principal whose subject is not in its
// tenant's subjects allowlist is accepted: the allowlist is how an operator
// disables a subject without removing its keys (admission refuses it).
//
// # Internal organization
//
//   - config.go: Config and its tables, Parse, Load, the options, and the
//     conversions AdmissionPolicy, CellPoolConfig and RunnerConfig.
//   - decode.go: the strict decoder over go-toml's generic tree (go-toml's
//     struct decoding stops at the first mistyped value and drops array
//     indices from key paths).
//   - validate.go: Problem, Error, the rules, and the merge of decoding,
//     node and admission problems.
//   - roles.go: Roles (invoke, deploy, admin), shared with node/auth.
//   - hardening.go: [deploy_limits], [catalog] and [ingress]: the runner's
//     deploy limits, the catalog's bounds and the ingress pools.
//   - tls.go: [node.tls] (NodeTLS, LoadClientCAs) and the check of the
//     principals' client_certificate_subjects.
//   - mapcount.go, mapcount_linux.go, mapcount_other.go: the warm
//     instances' share of vm.max_map_count (WarmInstanceBound,
//     HostMaxMapCount; nothing to read off Linux).
//   - demo.go, demo.toml: the embedded `serve --demo` configuration.
//
// # Usage
//
//	cfg, err := config.Load(path)
//	if err != nil {
//		fmt.Fprintln(os.Stderr, err) // every problem, one per line
//		os.Exit(2)
//	}
//	provider, err := admission.NewLocalQuotaProvider(cfg.AdmissionPolicy(), opts)
//	pool, err := cellpool.New(cfg.CellPoolConfig())
//	r, err := runner.New(ctx, cfg.RunnerConfig(cfg.Node.DataDir))
//	load := loadsource.NewState(cfg.Overload.MaxObservationAge)
package config
