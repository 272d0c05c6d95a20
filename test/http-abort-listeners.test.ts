// test-tier: fast

import { test } from "uvu";
import * as assert from "uvu/assert";
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { setImmediate as nextTurn } from "node:timers/promises";
import { httpCall } from "../harness/sut/http-call.js";
import { openHttpSut } from "../harness/sut/http.js";

// Every HTTP request listens on a signal of its own (httpCall): a batch sent at once under one
// signal once piled its abort listeners on it, and every `bench run` printed Node's
// MaxListenersExceededWarning.

/** FAKE: a llama.cpp-dialect server that tokenizes every text to [1, 2, 3], holding each /tokenize answer while stalled. */
interface TokenizingServer {
  readonly url: string;
  stall(on: boolean): void;
  /** /tokenize requests it holds unanswered. */
  held(): number;
}

/** Runs `body` against a FAKE tokenizing server, closed afterwards whatever happened. */
async function withTokenizingServer(body: (server: TokenizingServer) => Promise<void>): Promise<void> {
  const held: ServerResponse[] = [];
  let stalled = false;
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      if (req.url === "/v1/models") return void res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ data: [{ id: "fake" }] }));
      if (req.url !== "/tokenize") return void res.writeHead(404).end("{}");
      if (stalled) return void held.push(res);
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ tokens: [1, 2, 3] }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  try {
    await body({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, stall: (on) => { stalled = on; }, held: () => held.length });
  } finally {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

/** The process warnings `work` causes (Node emits them on a later turn). */
async function warningsDuring(work: () => Promise<void>): Promise<string[]> {
  const warnings: string[] = [];
  const listen = (warning: Error) => warnings.push(`${warning.name}: ${warning.message}`);
  process.on("warning", listen);
  try {
    await work();
    await nextTurn();
  } finally {
    process.off("warning", listen);
  }
  return warnings;
}

/** Waits (5 s at most) until the FAKE server holds every request sent. */
async function waitUntil(reached: () => boolean): Promise<void> {
  for (let tries = 0; !reached() && tries < 500; tries++) await new Promise((resolve) => setTimeout(resolve, 10));
  assert.ok(reached(), "every request reached the server");
}

const texts = Array.from({ length: 16 }, (_, i) => `text ${i}`);

test("16 requests at once, under the boot timeout and an arm's stop, and after: no abort-listener warning", () => withTokenizingServer(async (server) => {
  const stop = new AbortController();
  const warnings = await warningsDuring(async () => {
    const sut = await openHttpSut(server.url, { label: "fake", bootTimeoutS: 60, signal: stop.signal });
    for (let round = 0; round < 3; round++) assert.equal(await sut.tokenize!(texts), texts.map(() => [1, 2, 3]));
  });
  assert.equal(warnings, []);
}));

test("httpCall: 24 requests at once under one caller's signal (a conformance burst) add no listener to it, and its abort still reaches each", () => withTokenizingServer(async (server) => {
  const caller = new AbortController();
  const ask = () => httpCall(`${server.url}/tokenize`, { body: { content: "x" }, signal: caller.signal });
  const warnings = await warningsDuring(async () => {
    assert.equal((await Promise.all(Array.from({ length: 24 }, ask))).map((a) => a.status), Array(24).fill(200));
  });
  assert.equal(warnings, []);
  server.stall(true);
  const outcomes = Array.from({ length: 12 }, () => ask().then(() => "answered", (error: Error) => error.name));
  await waitUntil(() => server.held() === 12);
  caller.abort();
  assert.equal(await Promise.all(outcomes), Array(12).fill("AbortError"));
}));

test("abandon aborts every request in flight at once; the next call goes out as usual", () => withTokenizingServer(async (server) => {
  const sut = await openHttpSut(server.url, { label: "fake" });
  server.stall(true);
  const outcome = sut.tokenize!(texts).then(() => "answered", (error: Error) => error.name);
  await waitUntil(() => server.held() === texts.length);
  sut.abandon!();
  assert.is(await outcome, "AbortError");
  server.stall(false);
  assert.equal(await sut.tokenize!(["again"]), [[1, 2, 3]]);
}));

test.run();
