// Tool calling with the official client, on stories260K served with the real
// chat templates of three families (from src/jinja/chat_template_testdata.h):
// tool_choice "required" and a named function return tool_calls whose
// arguments validate against the function's parameters; streaming sends
// delta.tool_calls; a full round trip (call -> tool message -> assistant) is
// served; unknown function names are 400s.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { BINARY, MODEL_PATH } from './common.mjs';
import { validate } from './schema_check.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const TEMPLATES = { qwen25: 'kQwen25', llama31: 'kLlama31', mistral_nemo: 'kMistralNemo' };

const TOOLS = [
  { type: 'function', function: { name: 'get_weather', description: 'Current weather in a city',
    parameters: { type: 'object', properties: { location: { type: 'string', maxLength: 30 },
      unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } }, required: ['location', 'unit'],
      additionalProperties: false } } },
  { type: 'function', function: { name: 'get_time', description: 'Local time in a time zone',
    parameters: { type: 'object', properties: { tz: { type: 'string', pattern: '^[A-Z]{3}$' } },
      required: ['tz'], additionalProperties: false } } },
];
const SCHEMAS = Object.fromEntries(TOOLS.map((t) => [t.function.name, t.function.parameters]));

const servers = {};
let dir = null;

async function serve(file) {
  const proc = spawn(BINARY, ['serve', '-m', MODEL_PATH, '--host', '127.0.0.1', '--port', '0', '-t', '1',
    '--chat-template', file, '--kv-cache-memory', '32MiB'], { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  const url = await new Promise((resolve, reject) => {
    proc.stderr.on('data', (d) => {
      log += d;
      const m = /ready on (http:\/\/\S+)/.exec(log) ?? /listening on (http:\/\/\S+)/.exec(log);
      if (m) resolve(m[1]);
    });
    proc.on('exit', (code) => reject(new Error(`server exited ${code}: ${log}`)));
  });
  for (let i = 0; i < 200; ++i) {
    const r = await fetch(`${url}/health`).catch(() => null);
    if (r?.status === 200) break;
    await new Promise((res) => setTimeout(res, 50));
  }
  return { proc, url, api: new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0 }) };
}

before(async () => {
  const header = readFileSync(path.join(here, '../../src/jinja/chat_template_testdata.h'), 'utf8');
  dir = mkdtempSync(path.join(tmpdir(), 'tern-tools-'));
  for (const [name, symbol] of Object.entries(TEMPLATES)) {
    const m = new RegExp(`${symbol} = R"tmpl\\(([\\s\\S]*?)\\)tmpl";`).exec(header);
    const file = path.join(dir, `${name}.jinja`);
    writeFileSync(file, m[1]);
    servers[name] = await serve(file);
  }
});

after(() => {
  for (const s of Object.values(servers)) s.proc.kill('SIGTERM');
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const USER = [{ role: 'user', content: 'What is the weather in Paris?' }];

function checkCalls(message, allowed) {
  assert.ok(Array.isArray(message.tool_calls) && message.tool_calls.length >= 1, JSON.stringify(message));
  assert.equal(message.content, null);
  for (const call of message.tool_calls) {
    assert.equal(call.type, 'function');
    assert.match(call.id, /^call_/);
    assert.ok(allowed.includes(call.function.name), call.function.name);
    const args = JSON.parse(call.function.arguments);
    assert.equal(validate(SCHEMAS[call.function.name], args), null, call.function.arguments);
  }
}

for (const name of Object.keys(TEMPLATES)) {
  test(`${name}: tool_choice required and named return calls whose arguments validate`, async () => {
    const { api } = servers[name];
    for (let seed = 1; seed <= 5; ++seed) {
      const r = await api.chat.completions.create({
        messages: USER, tools: TOOLS, tool_choice: 'required', max_tokens: 150, temperature: 1, seed,
      });
      assert.equal(r.choices[0].finish_reason, 'tool_calls');
      checkCalls(r.choices[0].message, ['get_weather', 'get_time']);
    }
    const named = await api.chat.completions.create({
      messages: USER, tools: TOOLS, tool_choice: { type: 'function', function: { name: 'get_time' } },
      max_tokens: 150, temperature: 1, seed: 9, n: 3,
    });
    for (const c of named.choices) checkCalls(c.message, ['get_time']);
  });

  test(`${name}: streamed calls arrive as delta.tool_calls`, async () => {
    const { api } = servers[name];
    const stream = await api.chat.completions.create({
      messages: USER, tools: TOOLS, tool_choice: 'required', max_tokens: 150, temperature: 1, seed: 3, stream: true,
    });
    const calls = [];
    let finish = null;
    for await (const chunk of stream) {
      for (const c of chunk.choices) {
        for (const t of c.delta.tool_calls ?? []) calls.push(t);
        if (c.finish_reason) finish = c.finish_reason;
      }
    }
    assert.equal(finish, 'tool_calls');
    assert.ok(calls.length >= 1);
    assert.equal(calls[0].index, 0);
    const args = JSON.parse(calls[0].function.arguments);
    assert.equal(validate(SCHEMAS[calls[0].function.name], args), null);
  });

  test(`${name}: a round trip renders and is served; auto and none answer`, async () => {
    const { api } = servers[name];
    const first = await api.chat.completions.create({
      messages: USER, tools: TOOLS, tool_choice: 'required', max_tokens: 150, temperature: 0,
    });
    const call = first.choices[0].message.tool_calls[0];
    // Mistral's template wants 9-character alphanumeric ids.
    const id = name === 'mistral_nemo' ? 'abc123XYZ' : call.id;
    const r = await api.chat.completions.create({
      messages: [...USER,
        { role: 'assistant', content: null, tool_calls: [{ ...call, id }] },
        { role: 'tool', tool_call_id: id, content: '{"temp": 21}' }],
      tools: TOOLS, max_tokens: 20, temperature: 0,
    });
    assert.ok(r.usage.prompt_tokens > first.usage.prompt_tokens);
    assert.equal(r.choices[0].message.role, 'assistant');
    for (const choice of ['auto', 'none']) {
      const a = await api.chat.completions.create({ messages: USER, tools: TOOLS, tool_choice: choice, max_tokens: 10 });
      assert.equal(a.choices[0].message.refusal, null);
    }
  });
}

test('tools reach the template, and bad tool_choice names are 400s', async () => {
  const { api, url } = servers.qwen25;
  const without = await api.chat.completions.create({ messages: USER, max_tokens: 1 });
  const withTools = await api.chat.completions.create({ messages: USER, tools: TOOLS, max_tokens: 1 });
  assert.ok(withTools.usage.prompt_tokens > without.usage.prompt_tokens + 50);
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ messages: USER, tools: TOOLS, tool_choice: { type: 'function', function: { name: 'nope' } } }),
  });
  assert.equal(res.status, 400);
  const body = await res.json();
  assert.match(body.error.message, /'nope'/);
  assert.equal(body.error.param, 'tool_choice');
  const ok = await api.chat.completions.create({ messages: USER, max_tokens: 2 });
  assert.equal(ok.choices.length, 1);
});
