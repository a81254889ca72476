// /metrics is valid Prometheus text and its counters follow the requests served.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { client, metric, scrape, MODEL } from './common.mjs';

const openai = client();
const label = { model_name: MODEL };

function successTotal(parsed) {
  return ['stop', 'length', 'abort']
    .map((r) => metric(parsed, 'tern:request_success_total', { ...label, finished_reason: r }) ?? 0)
    .reduce((a, b) => a + b, 0);
}

test('metrics parse and count the requests served', async () => {
  const before = await scrape();
  for (const name of ['time_to_first_token_seconds', 'time_per_output_token_seconds', 'inter_token_latency_seconds',
    'e2e_request_latency_seconds', 'request_queue_time_seconds']) {
    assert.equal(before.types[`tern:${name}`], 'histogram', name);
    assert.ok(before.helps[`tern:${name}`], name);
    const inf = metric(before, `tern:${name}_bucket`, { ...label, le: '+Inf' });
    assert.equal(inf, metric(before, `tern:${name}_count`, label), name);
  }
  for (const name of ['num_requests_running', 'num_requests_waiting', 'kv_cache_usage_perc',
    'kv_cache_capacity_tokens']) {
    assert.equal(before.types[`tern:${name}`], 'gauge', name);
  }
  assert.ok(metric(before, 'tern:kv_cache_capacity_tokens', label) > 0, 'KV capacity in tokens');
  for (const name of ['prompt_tokens_total', 'generation_tokens_total', 'prefix_cache_queries_total',
    'prefix_cache_hits_total', 'num_preemptions_total', 'request_success_total']) {
    assert.equal(before.types[`tern:${name}`], 'counter', name);
  }

  const num = 5;
  let completionTokens = 0;
  let promptTokens = 0;
  for (let i = 0; i < num; ++i) {
    const r = await openai.completions.create({ model: MODEL, prompt: `Tom had a dog number ${i}`, max_tokens: 7, temperature: 0, ignore_eos: true });
    completionTokens += r.usage.completion_tokens;
    promptTokens += r.usage.prompt_tokens;
  }
  const after = await scrape();
  const delta = (name, extra = {}) => metric(after, name, { ...label, ...extra }) - metric(before, name, { ...label, ...extra });
  assert.equal(successTotal(after) - successTotal(before), num);
  assert.equal(delta('tern:request_success_total', { finished_reason: 'length' }), num);
  assert.equal(delta('tern:generation_tokens_total'), completionTokens);
  assert.equal(delta('tern:prompt_tokens_total'), promptTokens);
  assert.equal(delta('tern:e2e_request_latency_seconds_count'), num);
  assert.equal(delta('tern:time_to_first_token_seconds_count'), num);
  assert.equal(delta('tern:inter_token_latency_seconds_count'), num * 6);
  // Buckets are cumulative.
  const buckets = after.samples.filter((s) => s.name === 'tern:e2e_request_latency_seconds_bucket');
  for (let i = 1; i < buckets.length; ++i) assert.ok(buckets[i].value >= buckets[i - 1].value);
});
