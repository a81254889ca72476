// A second server of our own: API keys, /health before the model is ready,
// and exit code 0 on SIGTERM.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { startServer, waitReady } from './common.mjs';

test('API key from a file guards the API; /health and /metrics stay open; SIGTERM exits 0', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'tern-e2e-'));
  writeFileSync(join(dir, 'key'), 'test-key-123\n');
  const server = startServer(['--api-key-file', join(dir, 'key'), '--served-model-name', 'tiny']);
  const base = await server.url;
  await waitReady(base);
  const noKey = await fetch(`${base}/v1/models`);
  assert.equal(noKey.status, 401);
  assert.equal((await noKey.json()).error.code, 'invalid_api_key');
  const wrong = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(wrong.models.list(), (e) => e.status === 401);
  const right = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'test-key-123', maxRetries: 0 });
  assert.deepEqual((await right.models.list()).data.map((m) => m.id), ['tiny']);
  const r = await right.completions.create({ model: 'tiny', prompt: 'Once', max_tokens: 3 });
  assert.equal(r.choices.length, 1);
  const chat = await fetch(`${base}/v1/chat/completions`, {
    method: 'POST', headers: { Authorization: 'Bearer test-key-123', 'Content-Type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }] }) });
  assert.equal(chat.status, 400, 'no chat template -> 400');
  assert.match((await chat.json()).error.message, /chat template/);
  assert.equal((await fetch(`${base}/health`)).status, 200);
  assert.equal((await fetch(`${base}/metrics`)).status, 200);
  server.proc.kill('SIGTERM');
  assert.equal(await server.exited, 0);
});

test('SIGTERM during a stream ends it and exits 0', async () => {
  const server = startServer(['--chat-template', 'chatml']);
  const base = await server.url;
  await waitReady(base);
  const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'x', maxRetries: 0 });
  const stream = await openai.completions.create({ prompt: 'Once', max_tokens: 1900, ignore_eos: true, stream: true, model: '' });
  let chunks = 0;
  let finish = null;
  try {
    for await (const chunk of stream) {
      if (++chunks === 2) server.proc.kill('SIGTERM');
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
  } catch { /* the connection may close first */ }
  assert.ok(chunks >= 2);
  assert.ok(finish === null || finish === 'abort', `finish ${finish}`);
  assert.equal(await server.exited, 0);
});
