#!/bin/sh
# build.sh rebuilds the component fixtures: each X.core.wat, a core module
# in WebAssembly text, becomes X.wasm, a WASI 0.2 component of the
# wasi:http proxy world (wit/world.wit). It needs Node.js and npm; it
# installs @bytecodealliance/jco (the reference tools: wasm-tools' parser,
# component embed and component new) into $JCO_DIR (default: a directory
# under /tmp) the first time. adapted.wasm is examples/rust/http.rs as
# examples/build.sh rust makes it (rustc for WASI preview 1 and the preview
# 1 adapter: four core modules, the shape of rustc's wasm32-wasip2 output),
# so that the tests flatten one without a Rust toolchain.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
JCO_DIR=${JCO_DIR:-/tmp/latent-jco}
export JCO_DIR
if [ ! -d "$JCO_DIR/node_modules/@bytecodealliance/jco" ]; then
	mkdir -p "$JCO_DIR"
	(cd "$JCO_DIR" && npm init -y >/dev/null && npm install @bytecodealliance/jco@1.35.0 >/dev/null)
fi
for f in "$here"/*.core.wat; do
	name=$(basename "$f" .core.wat)
	world=app
	[ "$name" = sockets ] && world=app-sockets
	(cd "$JCO_DIR" && npx jco parse "$f" -o "$JCO_DIR/$name.core.wasm")
	node "$here/embed.mjs" "$JCO_DIR/$name.core.wasm" "$here/wit" "$world" "$here/$name.wasm"
	echo "built $name.wasm"
done
out=$(mktemp -d)
JCO_DIR=$JCO_DIR sh "$here/../../examples/build.sh" rust "$out" >/dev/null
cp "$out/http.wasm" "$here/adapted.wasm"
rm -r "$out"
echo "built adapted.wasm"
