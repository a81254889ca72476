// Every invalid request gets the right status and an OpenAI error body; the
// server stays healthy afterwards.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { BASE_URL, MODEL, postJson } from './common.mjs';

const url = new URL(BASE_URL);

function assertErrorShape(json, context) {
  assert.ok(json && typeof json.error === 'object', `${context}: no error object`);
  assert.equal(typeof json.error.message, 'string', context);
  assert.ok(json.error.message.length > 0, context);
  assert.equal(typeof json.error.type, 'string', context);
  assert.ok('param' in json.error, context);
  assert.ok('code' in json.error, context);
}

// Sends raw bytes and returns the whole response (the server closes after an
// error it cannot recover from).
function raw(bytes) {
  return new Promise((resolve, reject) => {
    const sock = net.connect(Number(url.port), url.hostname);
    let data = '';
    sock.on('data', (d) => { data += d; });
    sock.on('end', () => resolve(data));
    sock.on('error', (e) => (data ? resolve(data) : reject(e)));
    sock.setTimeout(10000, () => { sock.destroy(); resolve(data); });
    sock.write(bytes);
  });
}

test('bad requests: status and error shape', async () => {
  const maxLen = (await postJson('/tokenize', { prompt: 'x' })).json.max_model_len;
  const cases = [
    ['/v1/completions', '{"prompt": "a",', 400],
    ['/v1/completions', '[1, 2]', 400],
    ['/v1/completions', {}, 400],
    ['/v1/completions', { prompt: 5 }, 400],
    ['/v1/completions', { prompt: [] }, 400],
    ['/v1/completions', { prompt: [1, 99999] }, 400],
    ['/v1/completions', { prompt: 'a', max_tokens: 0 }, 400],
    ['/v1/completions', { prompt: 'a', max_tokens: -3 }, 400],
    ['/v1/completions', { prompt: 'a', max_tokens: 'many' }, 400],
    ['/v1/completions', { prompt: 'a', max_tokens: 1e15 }, 400],
    ['/v1/completions', { prompt: 'a', max_tokens: maxLen }, 400],
    ['/v1/completions', { prompt: 'a', n: 1000 }, 400],
    ['/v1/completions', { prompt: 'a', stop: ['a', 'b', 'c', 'd', 'e'] }, 400],
    ['/v1/completions', { prompt: 'a', stop: 7 }, 400],
    ['/v1/completions', { prompt: 'a', temperature: -1 }, 400],
    ['/v1/completions', { prompt: 'a', top_p: 2 }, 400],
    ['/v1/completions', { prompt: 'a', logprobs: 100 }, 400],
    ['/v1/completions', { prompt: 'a', model: 'no-such-model' }, 404, 'model_not_found'],
    ['/v1/chat/completions', { messages: [] }, 400],
    ['/v1/chat/completions', { messages: 'hi' }, 400],
    ['/v1/chat/completions', { messages: [{ content: 'no role' }] }, 400],
    ['/v1/chat/completions', { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: {} }] }] }, 400],
    ['/v1/chat/completions', { model: MODEL, messages: [{ role: 'user', content: 'x' }], top_logprobs: 3 }, 400],
    ['/tokenize', { prompt: 1 }, 400],
    ['/detokenize', { tokens: [-1] }, 400],
    ['/v1/nowhere', {}, 404],
    ['/v1/models', {}, 405],
  ];
  for (const [path, body, status, code] of cases) {
    const r = await postJson(path, body);
    const context = `${path} ${typeof body === 'string' ? body : JSON.stringify(body)}`;
    assert.equal(r.status, status, `${context}: ${r.text}`);
    assertErrorShape(r.json, context);
    if (code) assert.equal(r.json.error.code, code, context);
  }
  const over = await postJson('/v1/completions', { prompt: 'a', max_tokens: maxLen });
  assert.match(over.json.error.message, new RegExp(`maximum context length is ${maxLen} tokens`));
  const get = await fetch(`${BASE_URL}/v1/completions`);
  assert.equal(get.status, 405);
  assertErrorShape(await get.json(), 'GET /v1/completions');
});

test('transport errors: 413, 501, 400, 431, chunked bodies, and the server stays up', async () => {
  const big = await raw('POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n' +
                        `Content-Length: ${9 * 1024 * 1024}\r\n\r\n`);
  assert.match(big, /^HTTP\/1\.1 413 /);
  assertErrorShape(JSON.parse(big.slice(big.indexOf('\r\n\r\n') + 4)), '413');
  // A chunked request body is decoded (here in two chunks); a transfer
  // coding other than chunked is 501.
  const json = JSON.stringify({ prompt: 'Once', max_tokens: 2 });
  const half = Math.floor(json.length / 2);
  const hex = (n) => n.toString(16);
  const chunked = await raw('POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n' +
                            'Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n' +
                            `${hex(half)}\r\n${json.slice(0, half)}\r\n` +
                            `${hex(json.length - half)}\r\n${json.slice(half)}\r\n0\r\n\r\n`);
  assert.match(chunked, /^HTTP\/1\.1 200 /);
  assert.equal(JSON.parse(chunked.slice(chunked.indexOf('\r\n\r\n') + 4)).object, 'text_completion');
  const gzip = await raw('POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n');
  assert.match(gzip, /^HTTP\/1\.1 501 /);
  const garbage = await raw('NOT HTTP AT ALL\r\n\r\n');
  assert.match(garbage, /^HTTP\/1\.1 400 /);
  const headers = await raw(`GET /health HTTP/1.1\r\nX-Big: ${'a'.repeat(70000)}\r\n\r\n`);
  assert.match(headers, /^HTTP\/1\.1 431 /);
  const health = await fetch(`${BASE_URL}/health`);
  assert.equal(health.status, 200);
  const ok = await postJson('/v1/completions', { prompt: 'Once', max_tokens: 3 });
  assert.equal(ok.status, 200);
});
