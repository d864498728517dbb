// node componentize.mjs APP.js WITDIR WORLD OUT.wasm builds a JavaScript
// wasi:http handler into a WASI 0.2 component with componentize-js
// (StarlingMonkey, a SpiderMonkey build for WebAssembly, initialised with
// the app by Wizer). examples/build.sh js runs it from the directory where
// it installed componentize-js ($JCO_DIR).
import { componentize } from '@bytecodealliance/componentize-js';
import { writeFile } from 'node:fs/promises';

const [src, witPath, worldName, out] = process.argv.slice(2);
const { component } = await componentize({ sourcePath: src, witPath, worldName });
await writeFile(out, component);
