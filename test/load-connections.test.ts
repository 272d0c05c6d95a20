import { test } from "uvu";
import * as assert from "uvu/assert";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { tableFromIPC } from "apache-arrow";
import { summarizeLoadPoint } from "../harness/load/aggregate.js";
import { requestMetrics } from "../harness/load/request-metrics.js";
import { runLoadPoint, warmupRequests, type LoadPointPlan } from "../harness/load/run-load.js";
import { encodeSamplesArrow } from "../harness/load/samples-arrow.js";
import { retriesOnFreshConnection } from "../harness/load/sse-request.js";
import { resolveModel } from "../harness/fixtures/registry.js";
import { builtLlamaServer } from "../harness/sut/llama-server-binary.js";
import { stopManagedServer } from "../harness/sut/managed-server.js";
import { startServerCommand } from "../harness/sut/server-command.js";
import { startScriptedServer } from "./helpers/scripted-server.js";
import { benchAsync, temporaryDirectory } from "./helpers/workspace.js";

// How the load client manages keep-alive connections (docs/load-client.md): never a request sent on a
// connection the server said it closes, a request lost to a closing connection sent once more on a
// fresh one, and every request exactly one sample either way.

const work = temporaryDirectory("load-connections");
test.after(() => work.remove());
const closed = (concurrency: number, requests: number): LoadPointPlan => ({ mode: { kind: "closed", concurrency }, requests, warmup: 0, maxErrorRate: 1, seed: 1 });
const body = (n: number) => ({ prompt: `x${n}`, stream: true });

test("a server that closes every connection after 3 requests (Connection: close on the 3rd, Node's own limit): nothing lost, nothing retried, nothing refused", async () => {
  const server = await startScriptedServer({ firstMs: 1, gapMs: 1, tokens: 3, requestsPerConnection: 3 });
  try {
    const sequential = await runLoadPoint({ url: `${server.url}/v1/completions`, body }, closed(1, 10));
    const parallel = await runLoadPoint({ url: `${server.url}/v1/completions`, body }, closed(4, 40));
    for (const result of [sequential, parallel]) {
      const summary = summarizeLoadPoint("p", result.samples, result.samples.map(requestMetrics), result.durationS, {});
      // A request sent on a connection past its announced last would get Node's 503, or be lost and retried.
      assert.equal([summary.requests, summary.completed, summary.errors, summary.retriedOnFreshConnection], [result === sequential ? 10 : 40, result === sequential ? 10 : 40, {}, 0]);
    }
    assert.is(server.served(), 50, "the server saw each request once");
    assert.ok(server.connections() >= Math.ceil(10 / 3) + Math.ceil(40 / 3), `${server.connections()} connections for 50 requests, at most 3 each`);
  } finally {
    await server.close();
  }
});

test("a closed loop warms up at its concurrency: every client's connection is open before the measured requests, and warm-ups are not kept", async () => {
  const server = await startScriptedServer({ firstMs: 1, gapMs: 1, tokens: 3 });
  try {
    let openWhenMeasuringBegan: number | undefined;
    const watchedBody = (n: number) => {
      if (n === 4) openWhenMeasuringBegan = server.connections();
      return body(n);
    };
    const result = await runLoadPoint({ url: `${server.url}/v1/completions`, body: watchedBody }, { ...closed(4, 8), warmup: 2 });
    assert.equal(warmupRequests({ mode: { kind: "closed", concurrency: 4 }, warmup: 2 }), { count: 4, atOnce: 4 });
    assert.equal(warmupRequests({ mode: { kind: "open", rate: 4, burstiness: 1 }, warmup: 2 }), { count: 2, atOnce: 1 });
    assert.equal(warmupRequests({ mode: { kind: "closed", concurrency: 4 }, warmup: 0 }), { count: 0, atOnce: 1 }, "no warm-up asked for stays none");
    assert.equal(result.samples.map((s) => s.index), [0, 1, 2, 3, 4, 5, 6, 7], "only the measured requests are samples");
    assert.is(server.served(), 4 + 8, "one warm-up per client (2 asked for, 4 clients), then the 8 measured");
    assert.is(openWhenMeasuringBegan, 4, "the four warm-ups, sent at once, opened the four clients' connections before the first measured request");
  } finally {
    await server.close();
  }
});

test("a request lost to a closing connection (reset, or closed, before a byte of the response) is sent once more on a fresh connection and counted once", async () => {
  const server = await startScriptedServer({ firstMs: 1, gapMs: 1, tokens: 3, fault: (n) => (n === 2 ? "drop-reset" : n === 5 ? "drop-close" : undefined) });
  try {
    const result = await runLoadPoint({ url: `${server.url}/v1/completions`, body }, closed(1, 8));
    // Arrivals 2 and 5 were dropped; their retries arrived as 3 and 6: 10 arrivals, 8 requests.
    assert.equal(result.samples.map((s) => [s.index, s.status, s.attempts]), [[0, "ok", 1], [1, "ok", 1], [2, "ok", 2], [3, "ok", 1], [4, "ok", 2], [5, "ok", 1], [6, "ok", 1], [7, "ok", 1]]);
    assert.is(server.served(), 10);
    const summary = summarizeLoadPoint("c1", result.samples, result.samples.map(requestMetrics), result.durationS, {});
    assert.equal([summary.requests, summary.completed, summary.retriedOnFreshConnection, summary.errors], [8, 8, 2, {}]);
    const rows = tableFromIPC(encodeSamplesArrow(result.samples.map((sample) => ({ point: "c1", sample, metrics: requestMetrics(sample) })))).toArray().map((r) => r.toJSON());
    assert.equal(rows.map((r) => r.attempts), [1, 1, 2, 1, 2, 1, 1, 1]);
  } finally {
    await server.close();
  }
});

test("bench load says how many requests were sent again, and samples.arrow and summary.json carry them", async () => {
  const server = await startScriptedServer({ firstMs: 1, gapMs: 1, tokens: 3, fault: (n) => (n === 1 ? "drop-close" : undefined) });
  try {
    const cli = await benchAsync(["load", "--url", server.url, "--concurrency", "1", "--requests", "4", "--warmup", "0", "--runs-dir", work.path, "--run-id", "retried"]);
    assert.is(cli.status, 0, cli.stdout + cli.stderr);
    assert.match(cli.stdout, /^concurrency 1: 1 request\(s\) sent again on a fresh connection \(the server closed a kept-alive connection as they went out; docs\/load-client\.md\); each counted once$/m);
    const rows = tableFromIPC(readFileSync(join(work.path, "retried", "samples.arrow"))).toArray().map((r) => r.toJSON());
    assert.equal(rows.map((r) => [r.status, r.attempts]), [["ok", 1], ["ok", 2], ["ok", 1], ["ok", 1]]);
    const summary = JSON.parse(readFileSync(join(work.path, "retried", "summary.json"), "utf8"));
    assert.equal([summary.load[0].summary.requests, summary.load[0].summary.completed, summary.load[0].summary.retriedOnFreshConnection], [4, 4, 1]);
  } finally {
    await server.close();
  }
});

test("a server that drops every request: one retry each, then connection_error — never a loop, never a pass", async () => {
  const server = await startScriptedServer({ firstMs: 1, gapMs: 1, tokens: 3, fault: () => "drop-reset" });
  try {
    const result = await runLoadPoint({ url: `${server.url}/v1/completions`, body }, closed(1, 3));
    assert.equal(result.samples.map((s) => [s.status, s.attempts]), [["connection_error", 2], ["connection_error", 2], ["connection_error", 2]]);
    assert.match(result.samples[0].error ?? "", /on a fresh connection, after the first was closed before any response/);
    assert.is(server.served(), 6);
    const summary = summarizeLoadPoint("c1", result.samples, result.samples.map(requestMetrics), result.durationS, {});
    assert.equal([summary.requests, summary.completed, summary.errors], [3, 0, { connection_error: 3 }]);
  } finally {
    await server.close();
  }
});

test("only a connection that ended before the response began is retried: not a refused connection, a timeout, or a broken stream", () => {
  const error = (code: string) => Object.assign(new Error(code), { code });
  assert.ok(retriesOnFreshConnection(error("ECONNRESET"), false));
  assert.ok(retriesOnFreshConnection(error("EPIPE"), false));
  assert.ok(retriesOnFreshConnection(error("UND_ERR_SOCKET"), false), "undici's 'other side closed'");
  assert.not.ok(retriesOnFreshConnection(error("ECONNRESET"), true), "the response had begun: the server answered it");
  assert.not.ok(retriesOnFreshConnection(error("ECONNREFUSED"), false), "nobody listening: the server's failure");
  assert.not.ok(retriesOnFreshConnection(error("UND_ERR_HEADERS_TIMEOUT"), false));
});

// The field case. llama.cpp's server (cpp-httplib) answers every streamed completion with
// `Keep-Alive: timeout=5, max=100` and then closes the connection (curl: "Connection 0 seems to be
// dead"; wrk: one read error per request), and answers a connection's 100th request with
// `Connection: close`. A closed loop that sends the next request the moment [DONE] arrives races
// that close; on a busy machine it loses, and the request must be sent again, not lost.
const llamaServer = builtLlamaServer();
const llamaServerRequired = llamaServer !== undefined || process.env.BENCH_REQUIRE_LLAMA_SERVER === "1";
(llamaServerRequired ? test : test.skip)("llama-server: 240 streamed requests at 4 clients over connections it closes after each stream — every one completed, each counted once", async () => {
  assert.ok(llamaServer !== undefined, "BENCH_REQUIRE_LLAMA_SERVER=1 (CI builds llama-server): it must be there");
  const model = await resolveModel("tiny-random:F32");
  const server = await startServerCommand([llamaServer, "-m", model.path, "--port", "{port}", "-t", "1", "-c", "512", "-np", "4", "--no-webui", "--no-warmup"], { label: "llama-server", bootTimeoutS: 120 });
  try {
    const result = await runLoadPoint({ url: `${server.baseUrl}/v1/completions`, body: (n) => ({ prompt: `x${n}`, max_tokens: 1, temperature: 0, stream: true }) }, closed(4, 240));
    const summary = summarizeLoadPoint("c4", result.samples, result.samples.map(requestMetrics), result.durationS, {});
    assert.equal([summary.requests, summary.completed, summary.errors], [240, 240, {}], `retried on a fresh connection: ${summary.retriedOnFreshConnection}`);
    assert.equal(result.samples.map((s) => s.index), Array.from({ length: 240 }, (_, i) => i), "each request exactly once");
  } finally {
    await stopManagedServer(server);
  }
});

test.run();
