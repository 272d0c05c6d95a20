/**
 * npm run bench:client — what one client core sustains against the built-in no-op streaming
 * server (run in its own process), and the latency the client adds itself, measured side by side
 * with a raw socket reader in one run. Tells users when the client, not the server, is the limit.
 */
import { spawn } from "node:child_process";
import { createConnection } from "node:net";
import { createInterface } from "node:readline";
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { streamRequest } from "../harness/load/sse-request.js";
import { PACKAGE_ROOT } from "../harness/paths.js";
import { describeMachine, machineInfo } from "../harness/results/machine.js";
import { distribution } from "../harness/stats/distribution.js";

const CONCURRENCY = 64;
const SECONDS = 3;

const serverProcess = spawn(process.execPath, [join(PACKAGE_ROOT, "dist", "harness", "load", "noop-server.js"), "--serve"], { stdio: ["ignore", "pipe", "inherit"] });
const port = await new Promise<number>((resolve) => createInterface({ input: serverProcess.stdout! }).on("line", (line) => {
  const match = /^noop listening on (\d+)$/.exec(line);
  if (match !== null) resolve(Number(match[1]));
}));
const base = `http://127.0.0.1:${port}/v1/completions`;

/** Closed loop at CONCURRENCY for SECONDS: requests/s and events/s through our client (full stamping and parsing). */
async function sustained(query: string): Promise<{ requestsPerSecond: number; eventsPerSecond: number }> {
  let requests = 0;
  let events = 0;
  const end = Date.now() + SECONDS * 1000;
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (Date.now() < end) {
      const sample = await streamRequest(0, `${base}?${query}`, { prompt: "x" }, process.hrtime.bigint());
      requests++;
      events += sample.contentEventsNs.length;
    }
  }));
  return { requestsPerSecond: requests / SECONDS, eventsPerSecond: events / SECONDS };
}

/** Added latency: client stamp minus the server's embedded send time, per event (one request at a time). */
async function clientLatencyUs(rounds: number): Promise<number[]> {
  const added: number[] = [];
  for (let i = 0; i < rounds; i++) {
    await streamRequest(0, `${base}?events=16&packets=1`, { prompt: "x" }, process.hrtime.bigint(), undefined, (payload, stampNs) => {
      const match = /"t":(\d+)/.exec(payload);
      if (match !== null) added.push(Number(stampNs - BigInt(match[1])) / 1000);
    });
  }
  return added;
}

/** The same measurement with a raw socket reader: the floor any client pays. */
async function rawSocketLatencyUs(rounds: number): Promise<number[]> {
  const added: number[] = [];
  for (let i = 0; i < rounds; i++) {
    await new Promise<void>((resolve) => {
      const socket = createConnection(port, "127.0.0.1", () => socket.write(`POST /v1/completions?events=16&packets=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`));
      socket.on("data", (chunk: Buffer) => {
        const stamp = process.hrtime.bigint();
        for (const match of chunk.toString().matchAll(/"t":(\d+)/g)) added.push(Number(stamp - BigInt(match[1])) / 1000);
      });
      socket.on("close", () => resolve());
    });
  }
  return added;
}

console.log(`machine: ${describeMachine(machineInfo())}; no-op server in its own process; concurrency ${CONCURRENCY}, ${SECONDS} s per measurement`);
const oneEvent = await sustained("events=1");
const burst = await sustained("events=256");
const packets = await sustained("events=256&packets=1");
console.log(`requests/s (1 event each):              ${oneEvent.requestsPerSecond.toFixed(0)}`);
console.log(`events/s (256 per response, one burst):  ${burst.eventsPerSecond.toFixed(0)}`);
console.log(`events/s (256 per response, one packet each): ${packets.eventsPerSecond.toFixed(0)}`);
const ours = distribution(await clientLatencyUs(200))!;
const raw = distribution(await rawSocketLatencyUs(200))!;
console.log(`event latency, client vs raw socket reader (µs): p50 ${ours.median.toFixed(1)} vs ${raw.median.toFixed(1)} (added ${(ours.median - raw.median).toFixed(1)}), p99 ${ours.p99.toFixed(1)} vs ${raw.p99.toFixed(1)} (added ${(ours.p99 - raw.p99).toFixed(1)})`);
console.log("targets (issue): ≥ 35,000 req/s, ≥ 800,000 events/s burst, ≤ 10 µs p50 / ≤ 150 µs p99 added");
/** wrk against the same server and concurrency: requests/s (wrk counts whole responses only). */
function wrkRequestsPerSecond(query: string): number | undefined {
  try {
    const out = execFileSync("wrk", ["-t1", `-c${CONCURRENCY}`, `-d${SECONDS}s`, `${base}?${query}`], { encoding: "utf8" });
    return Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1]);
  } catch {
    return undefined;
  }
}
const wrkOne = wrkRequestsPerSecond("events=1");
if (wrkOne === undefined) {
  console.log("wrk is not installed (Debian package wrk): no ratio to wrk printed");
} else {
  const wrkBurst = wrkRequestsPerSecond("events=256")! * 256;
  const wrkPackets = wrkRequestsPerSecond("events=256&packets=1")! * 256;
  console.log(`wrk, same server and concurrency: ${wrkOne.toFixed(0)} req/s, ${wrkBurst.toFixed(0)} events/s burst, ${wrkPackets.toFixed(0)} events/s one packet each`);
  console.log(`client/wrk: req/s ${(oneEvent.requestsPerSecond / wrkOne).toFixed(2)}, burst ${(burst.eventsPerSecond / wrkBurst).toFixed(2)}, packets ${(packets.eventsPerSecond / wrkPackets).toFixed(2)} (target: within 15% when each event is its own packet)`);
}
serverProcess.kill();
