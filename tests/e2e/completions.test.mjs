// Completions and chat completions through the official OpenAI client.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { client, generateGreedy, postJson, MODEL, BASE_URL } from './common.mjs';

const openai = client();
const PROMPT = 'Once upon a time';
const N = 40;

async function streamText(stream, chat = false) {
  let text = '';
  const chunks = [];
  for await (const chunk of stream) {
    chunks.push(chunk);
    for (const c of chunk.choices) text += chat ? (c.delta?.content ?? '') : c.text;
  }
  return { text, chunks };
}

test('greedy: streamed == non-streamed == tern generate', async () => {
  const expected = await generateGreedy(PROMPT, N);
  assert.ok(expected.length > 10, `tern generate printed: ${JSON.stringify(expected)}`);
  const plain = await openai.completions.create({ model: MODEL, prompt: PROMPT, max_tokens: N, temperature: 0 });
  assert.equal(plain.object, 'text_completion');
  assert.match(plain.id, /^cmpl-/);
  assert.equal(plain.model, MODEL);
  assert.equal(plain.choices.length, 1);
  assert.equal(plain.choices[0].text, expected);
  const streamed = await streamText(await openai.completions.create(
    { model: MODEL, prompt: PROMPT, max_tokens: N, temperature: 0, stream: true }));
  assert.equal(streamed.text, expected);
  const last = streamed.chunks.at(-1);
  assert.ok(['stop', 'length'].includes(last.choices[0].finish_reason));
  assert.equal(last.choices[0].finish_reason, plain.choices[0].finish_reason);
});

test('usage counts tokens; include_usage sends a final usage chunk', async () => {
  const tok = await postJson('/tokenize', { prompt: PROMPT });
  assert.equal(tok.status, 200);
  const plain = await openai.completions.create({ model: MODEL, prompt: PROMPT, max_tokens: 8, temperature: 0, ignore_eos: true });
  assert.equal(plain.usage.prompt_tokens, tok.json.count);
  assert.equal(plain.usage.completion_tokens, 8);
  assert.equal(plain.usage.total_tokens, tok.json.count + 8);
  assert.equal(plain.choices[0].finish_reason, 'length');
  assert.equal(typeof plain.usage.prompt_tokens_details.cached_tokens, 'number');
  const { chunks } = await streamText(await openai.completions.create({
    model: MODEL, prompt: PROMPT, max_tokens: 8, temperature: 0, ignore_eos: true, stream: true,
    stream_options: { include_usage: true } }));
  const last = chunks.at(-1);
  assert.deepEqual(last.choices, []);
  assert.equal(last.usage.completion_tokens, 8);
  assert.equal(last.usage.prompt_tokens, tok.json.count);
  for (const c of chunks.slice(0, -1)) assert.equal(c.usage, null);
});

test('chat completions with chatml, streamed and not', async () => {
  const messages = [{ role: 'system', content: 'You tell stories.' }, { role: 'user', content: 'Tell me a story.' }];
  const plain = await openai.chat.completions.create({ model: MODEL, messages, max_tokens: 16, temperature: 0 });
  assert.equal(plain.object, 'chat.completion');
  assert.match(plain.id, /^chatcmpl-/);
  assert.equal(plain.choices[0].message.role, 'assistant');
  assert.equal(typeof plain.choices[0].message.content, 'string');
  assert.ok(plain.usage.prompt_tokens > 10);
  const { text, chunks } = await streamText(await openai.chat.completions.create(
    { model: MODEL, messages, max_tokens: 16, temperature: 0, stream: true }), true);
  assert.equal(chunks[0].object, 'chat.completion.chunk');
  assert.equal(chunks[0].choices[0].delta.role, 'assistant');
  assert.equal(text, plain.choices[0].message.content);
  // Content parts are joined like a plain string.
  const parts = await openai.chat.completions.create({ model: MODEL, max_tokens: 16, temperature: 0,
    messages: [messages[0], { role: 'user', content: [{ type: 'text', text: 'Tell me ' }, { type: 'text', text: 'a story.' }] }] });
  assert.equal(parts.choices[0].message.content, plain.choices[0].message.content);
  const tok = await postJson('/tokenize', { messages });
  assert.equal(tok.json.count, plain.usage.prompt_tokens);
});

test('stop strings are cut, never streamed, and finish with "stop"', async () => {
  const full = (await openai.completions.create({ model: MODEL, prompt: PROMPT, max_tokens: N, temperature: 0 })).choices[0].text;
  const cut = full.indexOf(' ', 8);
  assert.ok(cut > 0, full);
  const stop = full.slice(cut, cut + 3);
  const expected = full.slice(0, full.indexOf(stop));
  const plain = await openai.completions.create({ model: MODEL, prompt: PROMPT, max_tokens: N, temperature: 0, stop });
  assert.equal(plain.choices[0].text, expected);
  assert.equal(plain.choices[0].finish_reason, 'stop');
  const streamed = await streamText(await openai.completions.create(
    { model: MODEL, prompt: PROMPT, max_tokens: N, temperature: 0, stop: [stop, 'zzzz'], stream: true }));
  assert.equal(streamed.text, expected);
});

test('n choices, list prompts, token-id prompts, echo and logprobs', async () => {
  const many = await openai.completions.create({ model: MODEL, prompt: PROMPT, max_tokens: 6, n: 3, temperature: 0.9, seed: 5 });
  assert.deepEqual(many.choices.map((c) => c.index), [0, 1, 2]);
  const ids = (await postJson('/tokenize', { prompt: PROMPT })).json.tokens;
  const both = await openai.completions.create({ model: MODEL, prompt: [PROMPT, ids], max_tokens: 6, temperature: 0 });
  assert.equal(both.choices.length, 2);
  assert.equal(both.choices[0].text, both.choices[1].text);
  const echo = await openai.completions.create({ model: MODEL, prompt: PROMPT, max_tokens: 4, temperature: 0, echo: true, logprobs: 2 });
  assert.ok(echo.choices[0].text.startsWith(PROMPT));
  const lp = echo.choices[0].logprobs;
  assert.equal(lp.tokens.length, 4);
  assert.equal(lp.token_logprobs.length, 4);
  assert.ok(lp.token_logprobs.every((x) => x <= 0));
  assert.equal(lp.text_offset[0], PROMPT.length);
  const chat = await openai.chat.completions.create({ model: MODEL, max_tokens: 3, temperature: 0, logprobs: true, top_logprobs: 2,
    messages: [{ role: 'user', content: 'Hi' }] });
  const content = chat.choices[0].logprobs.content;
  assert.equal(content.length, 3);
  assert.equal(content[0].top_logprobs.length, 2);
  assert.ok(Array.isArray(content[0].bytes));
});

test('models, tokenize and detokenize', async () => {
  const models = await openai.models.list();
  assert.deepEqual(models.data.map((m) => m.id), [MODEL]);
  const tok = await postJson('/tokenize', { prompt: PROMPT, add_special_tokens: false });
  assert.equal(tok.status, 200);
  assert.equal(tok.json.count, tok.json.tokens.length);
  assert.ok(tok.json.max_model_len > 0);
  const detok = await postJson('/detokenize', { tokens: tok.json.tokens });
  assert.equal(detok.json.prompt, PROMPT);
  const health = await fetch(`${BASE_URL}/health`);
  assert.equal(health.status, 200);
});
