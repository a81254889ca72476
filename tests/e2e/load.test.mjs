// Load on 127.0.0.1: 256 concurrent streaming clients (the OpenAI client),
// one in five disconnecting mid-stream (AbortController). Every other request
// completes, the KV cache drains back to 0 and the server still answers.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { client, metric, scrape, sleep, BASE_URL, MODEL } from './common.mjs';

const NUM_CLIENTS = 256;
const MAX_TOKENS = 24;

test('256 concurrent streams, 20% disconnect, KV drains', { timeout: 300_000 }, async () => {
  const openai = client({ timeout: 240_000 });
  const run = async (i) => {
    const disconnect = i % 5 === 0;
    const controller = new AbortController();
    const stream = await openai.completions.create(
      { model: MODEL, prompt: `Once upon a time, story ${i}`, max_tokens: MAX_TOKENS, temperature: 0.8,
        seed: i, ignore_eos: true, stream: true },
      { signal: controller.signal });
    let chunks = 0;
    let finish = null;
    for await (const chunk of stream) {
      ++chunks;
      if (chunk.choices[0]?.finish_reason) finish = chunk.choices[0].finish_reason;
      if (disconnect && chunks === 2) {
        // Drop the connection and stop reading (reading on after an abort
        // can hang in the HTTP client when the body had already arrived).
        controller.abort();
        return 'disconnected';
      }
    }
    return { finish, chunks };
  };
  const started = Date.now();
  const results = await Promise.allSettled(Array.from({ length: NUM_CLIENTS }, (_, i) => run(i)));
  const failures = results.filter((r) => r.status === 'rejected');
  assert.equal(failures.length, 0, `failed: ${failures.slice(0, 3).map((f) => f.reason).join('; ')}`);
  const kept = results.filter((r, i) => i % 5 !== 0).map((r) => r.value);
  assert.equal(kept.length, NUM_CLIENTS - Math.ceil(NUM_CLIENTS / 5));
  for (const r of kept) {
    assert.equal(r.finish, 'length');
    assert.ok(r.chunks >= 1 && r.chunks <= MAX_TOKENS, `chunks ${r.chunks}`);
  }
  console.log(`# ${NUM_CLIENTS} streams in ${((Date.now() - started) / 1000).toFixed(1)} s`);

  let usage = 1;
  let busy = 1;
  for (let i = 0; i < 100 && (usage !== 0 || busy !== 0); ++i) {
    const m = await scrape();
    usage = metric(m, 'tern:kv_cache_usage_perc', { model_name: MODEL });
    busy = metric(m, 'tern:num_requests_running', { model_name: MODEL }) +
           metric(m, 'tern:num_requests_waiting', { model_name: MODEL });
    if (usage !== 0 || busy !== 0) await sleep(100);
  }
  assert.equal(usage, 0, 'kv_cache_usage_perc back to 0');
  assert.equal(busy, 0, 'no request left running or waiting');
  const health = await fetch(`${BASE_URL}/health`);
  assert.equal(health.status, 200);
  const after = await openai.completions.create({ model: MODEL, prompt: 'Once upon a time', max_tokens: 4 });
  assert.equal(after.choices.length, 1);
});

test('a client that disconnects mid-generation frees its KV at once', { timeout: 60_000 }, async () => {
  const before = await scrape();
  const abortedBefore = metric(before, 'tern:request_success_total', { model_name: MODEL, finished_reason: 'abort' });
  const controller = new AbortController();
  const stream = await client().completions.create(
    { model: MODEL, prompt: 'Once upon a time', max_tokens: 1900, ignore_eos: true, stream: true },
    { signal: controller.signal });
  let chunks = 0;
  for await (const chunk of stream) {
    if (++chunks === 3) {
      controller.abort();
      break;
    }
  }
  let m;
  for (let i = 0; i < 50; ++i) {
    m = await scrape();
    if (metric(m, 'tern:num_requests_running', { model_name: MODEL }) === 0 &&
        metric(m, 'tern:kv_cache_usage_perc', { model_name: MODEL }) === 0) break;
    await sleep(50);
  }
  assert.equal(metric(m, 'tern:num_requests_running', { model_name: MODEL }), 0);
  assert.equal(metric(m, 'tern:kv_cache_usage_perc', { model_name: MODEL }), 0);
  assert.equal(metric(m, 'tern:request_success_total', { model_name: MODEL, finished_reason: 'abort' }), abortedBefore + 1);
});
