// node embed.mjs CORE.wasm WITDIR WORLD OUT.wasm [ADAPTER.wasm] makes a
// component of a core module: wasm-tools' `component embed` and `component
// new` (with ADAPTER as the wasi_snapshot_preview1 adapter, for a module
// that imports WASI preview 1), through the API of
// @bytecodealliance/jco-transpile (installed in $JCO_DIR). jco
// 1.35's own CLI gives its wasm-tools no preopened directory, so it cannot
// read a WIT directory; here the whole filesystem is preopened.
import { readFile, writeFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const [core, wit, world, out, adapter] = process.argv.slice(2);
const base = resolve(process.env.JCO_DIR, 'node_modules/@bytecodealliance/jco-transpile');
const shim = await import(pathToFileURL(base + '/node_modules/@bytecodealliance/preview2-shim/dist/nodejs/filesystem.js'));
shim._setPreopens({ '/': '/' });
const tools = await import(pathToFileURL(base + '/dist/wasm-tools.js'));
const embedded = await tools.componentEmbed({ binary: await readFile(core), witPath: resolve(wit), world });
const adapters = adapter ? [['wasi_snapshot_preview1', await readFile(adapter)]] : [];
await writeFile(out, await tools.componentNew(embedded, adapters));
