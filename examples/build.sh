#!/bin/sh
# build.sh LANG OUTDIR builds the examples of LANG (go, rust or c), a stdio
# function and a WAGI handler, into OUTDIR/<name>.wasm with the toolchain
# found on this machine, and each again as a reactor (a module exporting
# _initialize and an entry function instead of _start, for the instance
# modes snapshot and reuse) into OUTDIR/<name>-reactor.wasm. LANG js builds
# the wasi:http handlers examples/js/app.js and hello.js into OUTDIR/app.wasm
# and hello.wasm, WASI 0.2 components, with componentize-js, which it installs from npm into $JCO_DIR
# (default: $XDG_CACHE_HOME/latent-node/jco) the first time.
# Exit status: 0 built; 3 the toolchain is missing (the message on stdout
# says what to install); anything else a failed build.
# Overrides: GO, RUSTC, WASI_CC, WASI_SYSROOT, JCO_DIR.
set -eu

lang=${1:?usage: build.sh go|rust|c|js OUTDIR}
out=${2:?usage: build.sh go|rust|c|js OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)

missing() {
	echo "examples/$lang: skipped, $*"
	exit 3
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# probe_rust RUSTC TARGET: does RUSTC build and link a program for TARGET?
probe_rust() {
	echo 'fn main() {}' >"$tmp/probe.rs"
	"$1" --target "$2" -o "$tmp/probe.wasm" "$tmp/probe.rs" >/dev/null 2>&1
}

# cc_wasi CC ARGS... compiles for wasm32-wasi, with --sysroot if one is set.
cc_wasi() {
	c=$1
	shift
	if [ -n "$sysroot" ]; then
		"$c" --target=wasm32-wasi --sysroot="$sysroot" "$@"
	else
		"$c" --target=wasm32-wasi "$@"
	fi
}

# probe_c CC: does CC build and link a C program against wasi-libc?
probe_c() {
	printf '#include <stdio.h>\nint main(void) { return puts("") < 0; }\n' >"$tmp/probe.c"
	cc_wasi "$1" -o "$tmp/probe.wasm" "$tmp/probe.c" >/dev/null 2>&1
}

# jco_dir prints the directory holding componentize-js and jco (wasm-tools),
# installing them from npm the first time (about 400 MB); when it cannot,
# it prints what to install and fails. Node.js 18 or later with npm.
jco_dir() {
	if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
		echo "no Node.js with npm; install them: apt-get install nodejs npm (Debian) or https://nodejs.org"
		return 1
	fi
	d=${JCO_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/latent-node/jco}
	if [ ! -d "$d/node_modules/@bytecodealliance/componentize-js" ] || [ ! -d "$d/node_modules/@bytecodealliance/jco" ]; then
		mkdir -p "$d"
		if ! (cd "$d" && npm init -y >/dev/null &&
			npm install --no-audit --no-fund @bytecodealliance/componentize-js@0.23.0 @bytecodealliance/jco@1.35.0 >/dev/null); then
			echo "npm could not install @bytecodealliance/componentize-js@0.23.0 and @bytecodealliance/jco@1.35.0 into $d (is npm's registry reachable?)"
			return 1
		fi
	fi
	echo "$d"
}
wit=$here/../testdata/components/wit

case $lang in
go)
	go=${GO:-go}
	command -v "$go" >/dev/null 2>&1 || missing "no Go toolchain ($go); install Go 1.24 or later (https://go.dev/dl)"
	cd "$here/go"
	GOOS=wasip1 GOARCH=wasm CGO_ENABLED=0 "$go" build -trimpath -ldflags=-buildid= -o "$out/greet.wasm" .
	GOOS=wasip1 GOARCH=wasm CGO_ENABLED=0 "$go" build -trimpath -ldflags=-buildid= -o "$out/router.wasm" ./router
	# The reactors: reactor.go exports the same function (greet) and handler
	# (web); Go 1.24 or later.
	GOOS=wasip1 GOARCH=wasm CGO_ENABLED=0 "$go" build -tags reactor -buildmode=c-shared -trimpath -ldflags=-buildid= -o "$out/greet-reactor.wasm" .
	GOOS=wasip1 GOARCH=wasm CGO_ENABLED=0 "$go" build -tags reactor -buildmode=c-shared -trimpath -ldflags=-buildid= -o "$out/router-reactor.wasm" ./router
	echo "examples/go: built $out/greet.wasm, $out/router.wasm and their -reactor.wasm"
	;;
rust)
	# The first rustc that links a WASI program: $RUSTC, rustc on PATH
	# (rustup: rustup target add wasm32-wasip1), Debian's /usr/bin/rustc
	# (apt-get install rustc libstd-rust-dev-wasm32; its target is wasm32-wasi).
	found=
	for rc in ${RUSTC:-} rustc /usr/bin/rustc; do
		command -v "$rc" >/dev/null 2>&1 || continue
		for target in wasm32-wasip1 wasm32-wasi; do
			if probe_rust "$rc" "$target"; then
				found="$rc $target"
				break 2
			fi
		done
	done
	[ -n "$found" ] || missing "no rustc that builds for wasm32-wasip1 or wasm32-wasi; install one: apt-get install rustc libstd-rust-dev-wasm32 (Debian) or rustup target add wasm32-wasip1"
	set -- $found
	"$1" --edition 2021 -O -C strip=debuginfo --target "$2" -o "$out/wordfreq.wasm" "$here/rust/wordfreq.rs"
	"$1" --edition 2021 -O -C strip=debuginfo --target "$2" -o "$out/count.wasm" "$here/rust/count.rs"
	# The reactors: the same sources with reactor.rs (exports wordfreq, web).
	"$1" --edition 2021 -O -C strip=debuginfo --cfg reactor --crate-type cdylib --target "$2" -o "$out/wordfreq-reactor.wasm" "$here/rust/wordfreq.rs"
	"$1" --edition 2021 -O -C strip=debuginfo --cfg reactor --crate-type cdylib --target "$2" -o "$out/count-reactor.wasm" "$here/rust/count.rs"
	echo "examples/rust: built $out/wordfreq.wasm, $out/count.wasm and their -reactor.wasm ($1 --target $2)"
	# The wasi:http component http.wasm: http.rs for the same WASI preview 1
	# target, made a component of the wasi:http proxy world by wasm-tools
	# (jco) with jco's preview 1 reactor adapter, the shape rustc's
	# wasm32-wasip2 target emits. Without Node.js it is skipped and the
	# rest stands.
	if ! jco=$(jco_dir); then
		echo "examples/rust: http.wasm skipped, $jco"
	else
		"$1" --edition 2021 -O -C strip=debuginfo --target "$2" --crate-type cdylib -o "$tmp/http.core.wasm" "$here/rust/http.rs"
		JCO_DIR=$jco node "$here/../testdata/components/embed.mjs" "$tmp/http.core.wasm" "$wit" app "$out/http.wasm" \
			"$jco/node_modules/@bytecodealliance/jco/lib/wasi_snapshot_preview1.reactor.wasm"
		echo "examples/rust: built $out/http.wasm, a wasi:http component"
	fi
	;;
c)
	# clang with the wasm32 back end, wasm-ld, compiler-rt's wasm32 builtins
	# and wasi-libc. Debian: apt-get install clang-14 lld-14 wasi-libc
	# libclang-rt-14-dev-wasm32 (Debian 12's wasi-libc lives in
	# /usr/lib/wasm32-wasi, which its clang finds without --sysroot).
	# Elsewhere set WASI_SYSROOT, e.g. to wasi-sdk's share/wasi-sysroot.
	sysroot=${WASI_SYSROOT:-}
	if [ -z "$sysroot" ] && [ -d /usr/share/wasi-sysroot ]; then
		sysroot=/usr/share/wasi-sysroot
	fi
	found=
	for c in ${WASI_CC:-} clang clang-19 clang-18 clang-17 clang-16 clang-15 clang-14; do
		command -v "$c" >/dev/null 2>&1 || continue
		if probe_c "$c"; then
			found=$c
			break
		fi
	done
	[ -n "$found" ] || missing "no clang that links for wasm32-wasi; install one: apt-get install clang-14 lld-14 wasi-libc libclang-rt-14-dev-wasm32 (or set WASI_CC and WASI_SYSROOT)"
	cc_wasi "$found" -O2 -Wall -Werror -o "$out/upper.wasm" "$here/c/upper.c"
	cc_wasi "$found" -O2 -Wall -Werror -o "$out/case.wasm" "$here/c/case.c"
	# The reactors: the same sources with reactor.h (exports upper, web).
	cc_wasi "$found" -O2 -Wall -Werror -DREACTOR -mexec-model=reactor -o "$out/upper-reactor.wasm" "$here/c/upper.c"
	cc_wasi "$found" -O2 -Wall -Werror -DREACTOR -mexec-model=reactor -o "$out/case-reactor.wasm" "$here/c/case.c"
	echo "examples/c: built $out/upper.wasm, $out/case.wasm and their -reactor.wasm ($found)"
	;;
js)
	jco=$(jco_dir) || missing "$jco"
	cp "$here/js/componentize.mjs" "$jco/componentize.mjs"
	# The world: wasi:http/proxy@0.2.10, the WIT of the component fixtures.
	(cd "$jco" && node componentize.mjs "$here/js/app.js" "$wit" app "$out/app.wasm")
	(cd "$jco" && node componentize.mjs "$here/js/hello.js" "$wit" app "$out/hello.wasm")
	echo "examples/js: built $out/app.wasm and $out/hello.wasm (componentize-js 0.23.0)"
	;;
*)
	echo "build.sh: unknown example language $lang (want go, rust, c or js)" >&2
	exit 2
	;;
esac
