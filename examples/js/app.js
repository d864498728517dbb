// A wasi:http handler in JavaScript, built into a WASI 0.2 component by
// componentize-js (examples/build.sh js). It answers:
//   GET  /                 a greeting
//   ANY  /echo             the request body, byte for byte, with its
//                          Content-Type, method, query and X-Echo
//   GET  /status/<code>    that status (204 and 304 without a body)
//   GET  /big?mib=<n>      n MiB (at most 16) of a repeating pattern
//   GET  /headers          the request's headers as JSON, sorted
// and 404 otherwise.
addEventListener('fetch', (event) => event.respondWith(handle(event.request)));

async function handle(req) {
  const url = new URL(req.url);
  const path = url.pathname;
  if (path === '/' || path === '') {
    return text(200, `hello from JavaScript: ${req.method} ${path}${url.search}\n`);
  }
  if (path === '/echo') {
    const body = new Uint8Array(await req.arrayBuffer());
    const headers = {
      'content-type': req.headers.get('content-type') || 'application/octet-stream',
      'x-example': 'js',
      'x-method': req.method,
      'x-query': url.search,
      'x-body-bytes': String(body.byteLength),
    };
    const echo = req.headers.get('x-echo');
    if (echo !== null) headers['x-echo'] = echo;
    return new Response(body, { status: 200, headers });
  }
  const m = /^\/status\/([1-5][0-9][0-9])$/.exec(path);
  if (m) {
    const code = Number(m[1]);
    if (code < 200) return text(400, 'informational statuses cannot be sent\n');
    if (code === 204 || code === 304) return new Response(null, { status: code, headers: { 'x-example': 'js' } });
    return text(code, `status ${code}\n`);
  }
  if (path === '/big') {
    const mib = Math.min(Number(url.searchParams.get('mib') || '1'), 16);
    // a..z repeated: one 26-byte run, then doubled in place (copyWithin
    // is one memmove, a JS loop per byte would be millions of steps).
    const out = new Uint8Array(mib * 1024 * 1024);
    for (let i = 0; i < 26 && i < out.length; i++) out[i] = 97 + i;
    for (let n = 26; n < out.length; n *= 2) out.copyWithin(n, 0, Math.min(n, out.length - n));
    return new Response(out, { status: 200, headers: { 'content-type': 'application/octet-stream', 'x-example': 'js' } });
  }
  if (path === '/headers') {
    const all = {};
    for (const [k, v] of req.headers) all[k] = v;
    const sorted = Object.fromEntries(Object.entries(all).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
    return new Response(JSON.stringify(sorted) + '\n', { status: 200, headers: { 'content-type': 'application/json', 'x-example': 'js' } });
  }
  return text(404, `no route ${path}\n`);
}

function text(status, body) {
  return new Response(body, { status, headers: { 'content-type': 'text/plain; charset=utf-8', 'x-example': 'js' } });
}
