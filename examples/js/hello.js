// The smallest JavaScript wasi:http handler, built into a WASI 0.2
// component by componentize-js (examples/build.sh js: hello.wasm). It is
// written against the wasi:http/incoming-handler export itself, not the
// fetch event of app.js: StarlingMonkey (componentize-js's engine) can
// dispatch a fetch event once per instance only, while a handler of the
// export serves request after request on one instance, so this one runs
// in every instance mode, reuse included. It answers every request with
// a greeting.
import { Fields, OutgoingBody, OutgoingResponse, ResponseOutparam } from 'wasi:http/types@0.2.10';

const encoder = new TextEncoder();
const greeting = encoder.encode('hello from JavaScript\n');
const contentType = encoder.encode('text/plain; charset=utf-8');

export const incomingHandler = {
  handle(_request, outparam) {
    const response = new OutgoingResponse(Fields.fromList([['content-type', contentType]]));
    response.setStatusCode(200);
    const body = response.body();
    const out = body.write();
    out.blockingWriteAndFlush(greeting);
    out[Symbol.dispose]();
    ResponseOutparam.set(outparam, { tag: 'ok', val: response });
    OutgoingBody.finish(body, undefined);
  },
};
