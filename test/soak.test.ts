import { test } from "uvu";
import * as assert from "uvu/assert";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { PACKAGE_ROOT } from "../harness/paths.js";
import { parsePrometheusText } from "../harness/conformance/prometheus.js";
import { ServerMetrics } from "../server/metrics.js";
import { CLI_HANG_GUARD_MS, temporaryDirectory, withoutForceColor } from "./helpers/workspace.js";

const work = temporaryDirectory("soak");
test.after(() => work.remove());

test("a short soak (6 s, every request kind, 429 overload): both sides' books close exactly, slots and queue drain, memory stays bounded", () => {
  const figuresPath = join(work.path, "soak.json");
  const result = spawnSync(process.execPath, [join(PACKAGE_ROOT, "dist", "scripts", "soak.js"), "--duration", "6", "--json", figuresPath],
    { cwd: PACKAGE_ROOT, env: withoutForceColor(process.env), encoding: "utf8", timeout: CLI_HANG_GUARD_MS });
  assert.is(result.status, 0, result.stdout + result.stderr);
  const figures = JSON.parse(readFileSync(figuresPath, "utf8"));
  const { client, server } = figures;
  assert.is(figures.requests, client.done + client.cancelled + client.rejected + client.errored);
  assert.is(client.errored, 0);
  assert.is(server.submitted, server.done + server.cancelled + server.errored);
  assert.equal([server.slots_active, server.queue_depth, server.in_flight], [0, 0, 0]);
  assert.ok(client.done > 0 && client.cancelled > 0 && client.rejected_by_status["400"] > 0, JSON.stringify(client));
  assert.is(Object.keys(figures.by_kind).length, 8, "every request kind was sent");
  assert.ok(figures.rss_mib.growth_after_warm_up <= figures.rss_mib.bound);
  assert.match(result.stdout, /^soak: PASS client: submitted \d+ = done \d+ \+ cancelled \d+ \+ rejected \d+ \+ errored 0$/m);
});

test("regression: a request the engine fails is counted (bench_requests_errored_total), so submitted = done + cancelled + errored can close", async () => {
  const metrics = new ServerMetrics();
  metrics.observer.submitted();
  metrics.observer.errored();
  const samples = parsePrometheusText(await metrics.registry.metrics());
  assert.is(samples.get("bench_requests_submitted_total"), 1);
  assert.is(samples.get("bench_requests_errored_total"), 1);
  assert.is(samples.get("bench_requests_done_total"), 0);
});

test.run();
