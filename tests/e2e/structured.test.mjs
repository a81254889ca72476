// Structured outputs: response_format json_object / json_schema (and the
// guided_* extras) with the official client. Every sampled output (temperature
// 1, seeded) must parse and validate against its schema, streaming and not,
// n > 1, on stories260K (the server of run.sh) and on a synthetic model with
// the 32000-token Llama SPM vocabulary (a server of this test's own).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { client, postJson, BINARY, MODEL_PATH, MODEL } from './common.mjs';
import { validate } from './schema_check.mjs';

const SCHEMA = {
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 20 },
    age: { type: 'integer' },
    mood: { enum: ['happy', 'sad', 'calm'] },
    pets: {
      type: 'array', minItems: 1, maxItems: 3,
      items: {
        type: 'object',
        properties: { kind: { type: 'string', enum: ['cat', 'dog'] }, legs: { type: 'integer' } },
        required: ['kind', 'legs'], additionalProperties: false,
      },
    },
    code: { type: 'string', pattern: '^[A-Z]{3}-[0-9]{2}$' },
    score: { type: ['number', 'null'] },
    nick: { type: 'string' },
  },
  required: ['name', 'age', 'mood', 'pets', 'code', 'score'],
  additionalProperties: false,
};

const JSON_SCHEMA_FORMAT = { type: 'json_schema', json_schema: { name: 'person', strict: true, schema: SCHEMA } };

// 50 runs: 5 requests x n=5 non-streaming, 5 x n=5 streaming. Choice i of a
// request with seed s samples with seed s + i, so requests step seeds by 5.
async function fiftyRuns(api, model, responseFormat, maxTokens) {
  const outputs = [];
  for (let k = 0; k < 10; ++k) {
    const seed = 1 + 5 * k;
    const stream = k >= 5;
    const body = {
      model, messages: [{ role: 'user', content: 'Tell me about a person.' }], n: 5, seed,
      temperature: 1, max_tokens: maxTokens, response_format: responseFormat, stream,
    };
    if (!stream) {
      const r = await api.chat.completions.create(body);
      assert.equal(r.choices.length, 5);
      for (const c of r.choices) {
        assert.equal(c.message.refusal, null);
        outputs.push({ text: c.message.content, finish: c.finish_reason, seed });
      }
    } else {
      const texts = Array(5).fill('');
      const finish = Array(5).fill(null);
      for await (const chunk of await api.chat.completions.create(body)) {
        for (const c of chunk.choices) {
          texts[c.index] += c.delta.content ?? '';
          if (c.finish_reason) finish[c.index] = c.finish_reason;
        }
      }
      texts.forEach((text, i) => outputs.push({ text, finish: finish[i], seed }));
    }
  }
  assert.equal(outputs.length, 50);
  return outputs;
}

function checkAll(outputs, schema) {
  let forcedLooking = 0;
  for (const o of outputs) {
    let v;
    assert.doesNotThrow(() => { v = JSON.parse(o.text); }, `seed ${o.seed}: not JSON: ${o.text}`);
    if (schema) {
      assert.equal(validate(schema, v), null, `seed ${o.seed}: ${o.text}`);
    } else {
      assert.equal(typeof v, 'object');
      assert.ok(v !== null && !Array.isArray(v), o.text);
    }
    assert.equal(o.finish, 'stop', `a complete output stops: ${o.text}`);
    forcedLooking += o.text.startsWith('{"') ? 1 : 0;
  }
  return forcedLooking;
}

test('json_object: 50 seeded runs on stories260K all parse as objects', async () => {
  checkAll(await fiftyRuns(client(), MODEL, { type: 'json_object' }, 120), null);
});

test('json_schema: 50 seeded runs on stories260K all validate', async () => {
  const outputs = await fiftyRuns(client(), MODEL, JSON_SCHEMA_FORMAT, 200);
  checkAll(outputs, SCHEMA);
  // Different seeds sample different outputs.
  assert.ok(new Set(outputs.map((o) => o.text)).size > 40);
});

test('json_schema on /v1/completions, and guided_choice / guided_regex / guided_grammar', async () => {
  const api = client();
  const r = await api.completions.create({
    model: MODEL, prompt: 'Once upon a time', max_tokens: 200, n: 3, seed: 4, temperature: 1,
    response_format: JSON_SCHEMA_FORMAT,
  });
  for (const c of r.choices) assert.equal(validate(SCHEMA, JSON.parse(c.text)), null, c.text);
  const choice = await postJson('/v1/completions', {
    prompt: 'The cat was', max_tokens: 8, temperature: 1, seed: 3, n: 4, guided_choice: ['happy', 'very sad'],
  });
  assert.equal(choice.status, 200, choice.text);
  for (const c of choice.json.choices) assert.ok(['happy', 'very sad'].includes(c.text), c.text);
  const regex = await postJson('/v1/completions', {
    prompt: 'Call', max_tokens: 20, temperature: 1, seed: 5, guided_regex: '[0-9]{3}-[a-z]{2,4}',
  });
  assert.equal(regex.status, 200, regex.text);
  assert.match(regex.json.choices[0].text, /^[0-9]{3}-[a-z]{2,4}$/);
  const gbnf = await postJson('/v1/completions', {
    prompt: 'Once', max_tokens: 30, temperature: 1, seed: 6, n: 3,
    guided_grammar: 'root ::= "(" item (", " item){0,2} ")"\nitem ::= [a-z]{1,5} | [0-9]+',
  });
  assert.equal(gbnf.status, 200, gbnf.text);
  for (const c of gbnf.json.choices) assert.match(c.text, /^\((([a-z]{1,5}|[0-9]+)(, |\)))+$/);
});

test('bad schemas and budgets are 400s that name the problem; the server keeps serving', async () => {
  const ask = (extra) => postJson('/v1/chat/completions', {
    messages: [{ role: 'user', content: 'x' }], max_tokens: 50, ...extra,
  });
  const cases = [
    [{ response_format: { type: 'json_schema', json_schema: { name: 'a', schema: { type: 'integer', minimum: 3 } } } }, /'minimum'/],
    [{ response_format: { type: 'json_schema', json_schema: { name: 'a', schema: { type: 'strin' } } } }, /unknown type 'strin'/],
    [{ response_format: { type: 'xml' } }, /response_format.type/],
    [{ response_format: { type: 'json_schema' } }, /json_schema/],
    [{ response_format: { type: 'json_schema', json_schema: { name: 'a', schema: { type: 'string', pattern: '(?=x)' } } } }, /lookaround/],
    [{ guided_regex: 'a{5}', max_tokens: 3 }, /max_tokens/],
    [{ guided_grammar: 'root ::= "a" undefined-rule' }, /undefined-rule/],
    [{ response_format: { type: 'json_object' }, guided_regex: 'a' }, /cannot be combined/],
  ];
  for (const [extra, re] of cases) {
    const r = await ask(extra);
    assert.equal(r.status, 400, JSON.stringify(extra));
    assert.match(r.json.error.message, re);
  }
  const ok = await ask({ response_format: { type: 'json_object' } });
  assert.equal(ok.status, 200);
});

// ---- a synthetic model with a real 32000-token vocabulary ----------------

let synth = null;
before(async () => {
  const vocab = path.join(path.dirname(MODEL_PATH), 'vocab', 'ggml-vocab-llama-spm.gguf');
  if (!existsSync(vocab)) return;
  const dir = mkdtempSync(path.join(tmpdir(), 'tern-structured-'));
  const file = path.join(dir, 'synth.gguf');
  await promisify(execFile)(BINARY, ['model', 'synth', '--preset', 'tiny', '--n-vocab', '32000',
    '--vocab-from', vocab, '-o', file]);
  const proc = spawn(BINARY, ['serve', '-m', file, '--host', '127.0.0.1', '--port', '0', '-t', '1',
    '--chat-template', 'chatml', '--kv-cache-memory', '64MiB'], { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  const url = await new Promise((resolve, reject) => {
    proc.stderr.on('data', (d) => {
      log += d;
      const m = /ready on (http:\/\/\S+)/.exec(log) ?? /listening on (http:\/\/\S+)/.exec(log);
      if (m) resolve(m[1]);
    });
    proc.on('exit', (code) => reject(new Error(`synth server exited ${code}: ${log}`)));
  });
  synth = { proc, dir, api: new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0 }) };
  for (let i = 0; i < 200; ++i) {
    const r = await fetch(`${url}/health`).catch(() => null);
    if (r?.status === 200) break;
    await new Promise((res) => setTimeout(res, 50));
  }
});

after(() => {
  if (!synth) return;
  synth.proc.kill('SIGTERM');
  rmSync(synth.dir, { recursive: true, force: true });
});

test('json_object: 50 seeded runs on a 32k-vocabulary synthetic model all parse', async (t) => {
  if (!synth) return t.skip('vocab/ggml-vocab-llama-spm.gguf not found');
  checkAll(await fiftyRuns(synth.api, 'synth', { type: 'json_object' }, 120), null);
});

test('json_schema: 50 seeded runs on a 32k-vocabulary synthetic model all validate', async (t) => {
  if (!synth) return t.skip('vocab/ggml-vocab-llama-spm.gguf not found');
  checkAll(await fiftyRuns(synth.api, 'synth', JSON_SCHEMA_FORMAT, 200), SCHEMA);
});
