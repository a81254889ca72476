// The model id as clients see it (models.list, models.retrieve, the "model"
// field), $TERN_API_KEY, and the max_tokens defaults of the two endpoints.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { client, postJson, startServer, waitForLog, waitReady, MODEL } from './common.mjs';

const plain = (x) => JSON.parse(JSON.stringify(x));

test('models.retrieve(id) returns the listed model; an unknown id is 404 model_not_found', async () => {
  const openai = client();
  const list = await openai.models.list();
  assert.deepEqual(list.data.map((m) => m.id), [MODEL]);
  const model = await openai.models.retrieve(MODEL);
  assert.equal(model.id, MODEL);
  assert.equal(model.object, 'model');
  assert.equal(typeof model.created, 'number');
  assert.equal(typeof model.owned_by, 'string');
  assert.deepEqual(plain(model), plain(list.data[0]), 'the same object as in the list');
  await assert.rejects(openai.models.retrieve('no-such-model'), (e) => {
    assert.ok(e instanceof OpenAI.NotFoundError, `${e}`);
    assert.equal(e.status, 404);
    assert.equal(e.code, 'model_not_found');
    assert.equal(e.param, 'model');
    assert.equal(e.type, 'invalid_request_error');
    return true;
  });
  // The id that lists and retrieves is the one requests name.
  const r = await openai.completions.create({ model: model.id, prompt: 'Once', max_tokens: 2 });
  assert.equal(r.model, model.id);
});

test('max_tokens absent: completions stop at 16 tokens, chat runs to the end of the context', async () => {
  const openai = client();
  const c = await openai.completions.create({ model: MODEL, prompt: 'Once upon a time', ignore_eos: true, temperature: 0 });
  assert.equal(c.usage.completion_tokens, 16);
  assert.equal(c.choices[0].finish_reason, 'length');
  const maxLen = (await postJson('/tokenize', { prompt: 'x' })).json.max_model_len;
  const chat = await openai.chat.completions.create({
    model: MODEL, messages: [{ role: 'user', content: 'Tell me a story.' }], ignore_eos: true, temperature: 0 });
  assert.equal(chat.usage.prompt_tokens + chat.usage.completion_tokens, maxLen);
  assert.equal(chat.choices[0].finish_reason, 'length');
});

test('$TERN_API_KEY guards the API when no key flag is given; retrieve finds an id with a slash', async () => {
  const server = startServer(['--served-model-name', 'org/tiny'], { TERN_API_KEY: 'env-key-456' });
  try {
    const base = await server.url;
    await waitReady(base);
    assert.match(server.log(), /API key: required, from \$TERN_API_KEY/);
    // The curl hint is in the "ready on" line, printed once the server serves.
    const log = await waitForLog(server, /ready on/);
    assert.match(log, /Authorization: Bearer \$TERN_API_KEY/, 'the curl hint names the variable');
    assert.equal((await fetch(`${base}/v1/models/org%2Ftiny`)).status, 401);
    const wrong = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'wrong', maxRetries: 0 });
    await assert.rejects(wrong.models.retrieve('org/tiny'), (e) => e.status === 401);
    const right = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'env-key-456', maxRetries: 0 });
    assert.equal((await right.models.retrieve('org/tiny')).id, 'org/tiny');
    assert.deepEqual((await right.models.list()).data.map((m) => m.id), ['org/tiny']);
    await assert.rejects(right.models.retrieve('tiny'), (e) => e.status === 404);
  } finally {
    server.proc.kill('SIGTERM');
    assert.equal(await server.exited, 0);
  }
});

test('--api-key wins over $TERN_API_KEY', async () => {
  const server = startServer(['--api-key', 'flag-key'], { TERN_API_KEY: 'env-key' });
  try {
    const base = await server.url;
    await waitReady(base);
    assert.match(server.log(), /API key: required, from --api-key/);
    const env = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'env-key', maxRetries: 0 });
    await assert.rejects(env.models.list(), (e) => e.status === 401);
    const flag = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'flag-key', maxRetries: 0 });
    assert.equal((await flag.models.list()).data.length, 1);
  } finally {
    server.proc.kill('SIGTERM');
    assert.equal(await server.exited, 0);
  }
});
