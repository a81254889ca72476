// The dashboard in headless Chromium (run by run.sh, which starts `tern serve`
// with an API key and sets the environment).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import path from "node:path";
import { chromium } from "playwright-core";

const base = process.env.TERN_BASE_URL;
const key = process.env.TERN_API_KEY_FOR_TEST;
const artifacts = process.env.TERN_ARTIFACTS_DIR;

let browser, page;
const consoleErrors = [];

before(async () => {
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
  page = await browser.newPage({ viewport: { width: 1400, height: 1500 } });
  page.on("console", (msg) => {
    // The playground's request without a key answers 401 on purpose; the
    // browser logs that failed fetch as a console error.
    if (msg.type() === "error" && !/401/.test(msg.text())) consoleErrors.push(msg.text());
  });
  page.on("pageerror", (err) => consoleErrors.push(String(err)));
  page.on("requestfailed", (req) => {
    if (!req.url().includes("/v1/chat/completions")) consoleErrors.push("request failed: " + req.url());
  });
});

after(async () => {
  if (browser) await browser.close();
});

async function polls() {
  return Number(await page.evaluate(() => document.body.dataset.polls || "0"));
}

async function waitFor(fn, what, timeoutMs = 30000) {
  const start = Date.now();
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() - start > timeoutMs) throw new Error("timed out waiting for " + what);
    await new Promise((r) => setTimeout(r, 150));
  }
}

test("the page loads from / and /dashboard and polls /stats without errors", async () => {
  const res = await page.goto(base + "/dashboard?interval_ms=300");
  assert.equal(res.status(), 200);
  assert.match(res.headers()["content-type"], /text\/html/);
  await waitFor(async () => (await polls()) >= 2, "two polls");
  assert.equal(await page.textContent("#status"), "ready");
  assert.equal(await page.textContent("#model"), "model: stories260K");
  assert.equal(await page.textContent("#t-spec"), "n/a");  // speculation off: counters stay 0
  const root = await fetch(base + "/");
  assert.equal(root.status, 200);
  assert.equal(await root.text(), await (await fetch(base + "/dashboard")).text());
  assert.deepEqual(consoleErrors, []);
});

test("the charts update while tern bench serve loads the server", async () => {
  const before = await page.evaluate(() => ({
    done: document.getElementById("t-done").textContent,
    steps: Number(document.getElementById("c-steps").dataset.points || 0),
  }));
  const bench = spawn(process.env.TERN_BINARY, [
    "bench", "serve", "-m", process.env.TERN_MODEL, "--base-url", base, "--api-key", key,
    "--dataset-name", "random", "--random-input-len", "64", "--random-output-len", "256",
    "--num-prompts", "48", "--max-concurrency", "8", "--request-rate", "12", "--ignore-eos",
    "--save-result", path.join(artifacts, "bench.json"),
  ], { stdio: ["ignore", "pipe", "pipe"] });
  let benchOut = "";
  bench.stdout.on("data", (d) => (benchOut += d));
  bench.stderr.on("data", (d) => (benchOut += d));
  const exited = new Promise((resolve) => bench.on("close", resolve));

  // While the load runs (about 4 s) the page sees tokens flowing.
  const seenBusy = await waitFor(() => page.evaluate(() => {
    const gen = Number(document.getElementById("t-gen").textContent.replace("k", "e3"));
    return gen > 0;
  }), "generated tok/s > 0 on the page");
  assert.ok(seenBusy);
  const code = await exited;
  assert.equal(code, 0, "tern bench serve failed:\n" + benchOut);
  const p = await polls();
  await waitFor(async () => (await polls()) >= p + 2, "two polls after the load");

  const afterLoad = await page.evaluate(() => ({
    done: Number(document.getElementById("t-done").textContent),
    steps: Number(document.getElementById("c-steps").dataset.points || 0),
    ttft: Number(document.getElementById("c-ttft").dataset.points || 0),
    tput: Number(document.getElementById("c-tput").dataset.points || 0),
    ttftLegend: document.getElementById("lg-ttft").textContent,
    kvNote: document.getElementById("kv-note").textContent,
    maxRunning: Math.max(...hist.running),
    maxKv: Math.max(...hist.kv),
  }));
  assert.ok(afterLoad.maxRunning > 0, "the running chart saw requests: " + JSON.stringify(afterLoad));
  assert.ok(afterLoad.maxKv > 0, "the KV chart saw blocks in use");
  assert.ok(afterLoad.done >= 48 + Number(before.done === "–" ? 0 : before.done), JSON.stringify(afterLoad));
  assert.ok(afterLoad.steps > before.steps, "step timeline grew: " + JSON.stringify(afterLoad));
  assert.ok(afterLoad.ttft > 0, "TTFT chart has points");
  assert.ok(afterLoad.tput > 0, "throughput chart has points");
  assert.match(afterLoad.ttftLegend, /p50 \d/);
  assert.match(afterLoad.kvNote, /capacity \d+ blocks x 16 = \d+ tokens/);
  assert.deepEqual(consoleErrors, []);
});

test("the playground asks for the API key, then streams a reply", async () => {
  await page.fill("#api-key", "");
  await page.dispatchEvent("#api-key", "change");
  await page.fill("#chat-input", "Tell me a story about a cat.");
  await page.click("#chat-send");
  await waitFor(() => page.evaluate(() => {
    const last = document.querySelector("#chat-log .msg-assistant:last-child");
    return last && last.dataset.state === "error";
  }), "the 401 answer");
  assert.match(await page.textContent("#key-msg"), /needs an API key/);

  await page.fill("#api-key", key);
  await page.dispatchEvent("#api-key", "change");
  await page.fill("#chat-input", "Tell me a story about a cat.");
  await page.fill("#chat-max", "40");
  await page.click("#chat-send");
  const reply = await waitFor(() => page.evaluate(() => {
    const last = document.querySelector("#chat-log .msg-assistant:last-child");
    return last && last.dataset.state !== "streaming" &&
      { state: last.dataset.state, chunks: Number(last.dataset.chunks || 0), text: last.textContent };
  }), "the streamed reply");
  assert.equal(reply.state, "done", JSON.stringify(reply));
  assert.ok(reply.chunks >= 2, "several stream chunks: " + JSON.stringify(reply));
  assert.ok(reply.text.length > 0);
  await page.screenshot({ path: path.join(artifacts, "dashboard.png"), fullPage: true });
  assert.deepEqual(consoleErrors, []);
});
