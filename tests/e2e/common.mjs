// Shared helpers for the end-to-end tests (run by run.sh, which starts the
// server and sets TERN_BASE_URL, TERN_BINARY, TERN_MODEL, TERN_MODEL_NAME).
import OpenAI from 'openai';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';

export const BASE_URL = process.env.TERN_BASE_URL ?? 'http://127.0.0.1:8080';
export const BINARY = process.env.TERN_BINARY ?? 'tern';
export const MODEL_PATH = process.env.TERN_MODEL ?? '';
export const MODEL = process.env.TERN_MODEL_NAME ?? 'stories260K';

export function client(options = {}) {
  return new OpenAI({ baseURL: `${BASE_URL}/v1`, apiKey: 'unused', maxRetries: 0, ...options });
}

export async function postJson(path, body, headers = {}) {
  const res = await fetch(`${BASE_URL}${path}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, json, text };
}

// `tern generate` greedy output for the same prompt and token budget.
export async function generateGreedy(prompt, numTokens) {
  const { stdout } = await promisify(execFile)(
    BINARY, ['generate', '-m', MODEL_PATH, '-p', prompt, '-n', String(numTokens), '--temp', '0', '-t', '1'],
    { maxBuffer: 1 << 20 });
  return stdout;
}

// A small Prometheus text-format parser: returns {samples: [{name, labels,
// value}], types: {family: type}, helps: {family: text}}; throws on a line
// that is not a comment, a blank, or a valid sample.
export function parsePrometheus(text) {
  const samples = [];
  const types = {};
  const helps = {};
  const sampleRe = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\d+)?$/;
  const labelRe = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*,?\s*/y;
  for (const line of text.split('\n')) {
    if (line === '') continue;
    if (line.startsWith('# TYPE ')) {
      const [name, type] = line.slice(7).split(' ');
      if (!['counter', 'gauge', 'histogram', 'summary', 'untyped'].includes(type)) {
        throw new Error(`bad TYPE line: ${line}`);
      }
      types[name] = type;
      continue;
    }
    if (line.startsWith('# HELP ')) {
      const rest = line.slice(7);
      const sp = rest.indexOf(' ');
      helps[rest.slice(0, sp)] = rest.slice(sp + 1);
      continue;
    }
    if (line.startsWith('#')) continue;
    const m = sampleRe.exec(line);
    if (!m) throw new Error(`bad sample line: ${line}`);
    const labels = {};
    if (m[3]) {
      labelRe.lastIndex = 0;
      let pos = 0;
      while (pos < m[3].length) {
        labelRe.lastIndex = pos;
        const l = labelRe.exec(m[3]);
        if (!l) throw new Error(`bad labels in: ${line}`);
        labels[l[1]] = l[2].replace(/\\n/g, '\n').replace(/\\"/g, '"').replace(/\\\\/g, '\\');
        pos = labelRe.lastIndex;
      }
    }
    const value = m[4] === '+Inf' ? Infinity : m[4] === '-Inf' ? -Infinity : Number(m[4]);
    if (Number.isNaN(value) && m[4] !== 'NaN') throw new Error(`bad value in: ${line}`);
    samples.push({ name: m[1], labels, value });
  }
  return { samples, types, helps };
}

export async function scrape() {
  const res = await fetch(`${BASE_URL}/metrics`);
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`);
  return parsePrometheus(await res.text());
}

// The value of one sample (labels must all match), or undefined.
export function metric(parsed, name, labels = {}) {
  const s = parsed.samples.find(
    (x) => x.name === name && Object.entries(labels).every(([k, v]) => x.labels[k] === v));
  return s?.value;
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// A second server of a test's own on a free port: {proc, url (a promise of
// the base URL, from the "listening on" log line), exited (a promise of the
// exit code), log() (stderr so far)}. env: variables added to this process's
// environment (a value of undefined removes one).
export function startServer(args, env = {}) {
  const childEnv = { ...process.env, ...env };
  for (const [k, v] of Object.entries(env)) if (v === undefined) delete childEnv[k];
  const proc = spawn(BINARY, ['serve', '-m', MODEL_PATH, '--host', '127.0.0.1', '--port', '0', '-t', '1',
    '--kv-cache-memory', '16MiB', ...args], { stdio: ['ignore', 'ignore', 'pipe'], env: childEnv });
  let log = '';
  const url = new Promise((resolve, reject) => {
    proc.stderr.on('data', (d) => {
      log += d;
      const m = /listening on (http:\/\/\S+)/.exec(log);
      if (m) resolve(m[1]);
    });
    proc.on('exit', (code) => reject(new Error(`server exited with ${code}: ${log}`)));
  });
  const exited = new Promise((resolve) => proc.on('exit', (code) => resolve(code)));
  return { proc, url, exited, log: () => log };
}

// Waits until the server's stderr so far matches re (the "ready on ... try:"
// line comes after /health turns 200: tern serve serves first, then says
// so) and returns the log; fails after ms.
export async function waitForLog(server, re, ms = 10000) {
  for (let waited = 0; !re.test(server.log()); waited += 50) {
    if (waited >= ms) assert.fail(`no log line matching ${re} within ${ms} ms:\n${server.log()}`);
    await sleep(50);
  }
  return server.log();
}

// Polls GET /health until 200 (503 is the only other answer allowed meanwhile).
export async function waitReady(base) {
  for (let i = 0; i < 200; ++i) {
    const r = await fetch(`${base}/health`).catch(() => null);
    if (r?.status === 200) return;
    if (r) assert.equal(r.status, 503, 'loading answers 503');
    await sleep(50);
  }
  throw new Error('not ready');
}
