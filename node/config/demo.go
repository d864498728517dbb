package config

// The embedded configuration of `latent-node serve --demo`, and Demo, which
// parses it.

import _ "embed" // DemoTOML

// DemoTOML is the embedded configuration of `latent-node serve --demo`:
// tenant "demo"; one principal (subject "demo", kind user, roles invoke,
// deploy and admin) whose key hash is injected at start; cell classes tiny
// (16MiB ×2), small (64MiB ×2) and standard (256MiB ×1); queue classes batch
// (priorities 0–4) and interactive (5–9); trust class "untrusted"; listen
// 127.0.0.1:8080. It names no data_dir: the caller supplies one.
//
//go:embed demo.toml
var DemoTOML []byte

// Demo parses DemoTOML with opts. The caller supplies the data directory
// and the generated key's hash; without them validation fails:
//
//	key, hash, err := auth.Generate()
//	…
//	cfg, err := config.Demo(config.WithDataDir(tmp), config.WithDemoKey(hash),
//		config.WithListen(listenFlag)) // WithListen only when --listen is given
func Demo(opts ...Option) (*Config, error) {
	return Parse(DemoTOML, opts...)
}
