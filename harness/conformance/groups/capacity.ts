import { setTimeout as sleep } from "node:timers/promises";
import { fail, isErrorObject, metrics, pass, post, readEvents, type ConformanceGroup } from "../target.js";

/**
 * Gauges of requests being served now, by server family: how the disconnect check sees a slot free
 * without knowing whose server it is. The counter of cancellations only ours exports.
 */
const IN_FLIGHT_GAUGES = ["bench_slots_active", "llamacpp:requests_processing", "vllm:num_requests_running"] as const;
const CANCELLED_COUNTER = "bench_requests_cancelled_total";
/** Concurrent requests against a server that declares no bounds: more than a small server's slots. */
const UNDECLARED_BURST = 8;

/** A server at and past its capacity: a burst refused with 429, 503 while booting, a disconnected client's slot freed. */
export const CAPACITY_CHECKS: ConformanceGroup = {
  async overload_429(target) {
    const before = await metrics(target).catch(() => new Map<string, number>());
    const declared = target.queue !== undefined;
    const burst = declared ? (target.slots ?? 1) + target.queue! + 3 : UNDECLARED_BURST;
    const responses = await Promise.all(Array.from({ length: burst }, () => post(target, "/v1/completions", { model: target.model, prompt: "Load", max_tokens: 300, temperature: 0 })));
    const rejected = responses.filter((r) => r.status === 429);
    const served = responses.filter((r) => r.status === 200).length;
    const other = responses.filter((r) => r.status !== 200 && r.status !== 429);
    if (other.length > 0) return fail(`${burst} at once: ${other.length} answered neither 200 nor 429 (${[...new Set(other.map((r) => r.status))].join(", ")})`);
    if (!rejected.every((r) => isErrorObject(r.text))) return fail("a 429 without an OpenAI error object");
    // OpenAI's API allows a server to queue instead of refusing; only a server that declares a bounded queue promises 429 beyond it.
    if (rejected.length === 0 && declared) return fail(`${burst} concurrent requests against ${target.slots} slots + ${target.queue} queued: no 429`);
    if (rejected.length === 0) return pass(`${burst} at once: all ${served} served (the server queues instead of answering 429, as OpenAI's API allows)`);
    const after = await metrics(target).catch(() => new Map<string, number>());
    const counted = (after.get("bench_requests_rejected_total") ?? NaN) - (before.get("bench_requests_rejected_total") ?? NaN);
    return pass(`${burst} at once: ${served} served, ${rejected.length} answered 429 with an error object${Number.isFinite(counted) ? `; /metrics counted ${counted} rejections` : ""}`);
  },

  async booting_503(target) {
    const boot = target.managed?.bootObservations;
    if (boot === undefined) return { status: "skip", detail: "the harness did not start this server, so it could not watch it boot" };
    const booting = boot.find((o) => o.status === 503);
    const answeredWhileBooting = boot.filter((o) => o.status !== 0 && o.status !== 200);
    if (booting === undefined && answeredWhileBooting.length === 0) return { status: "skip", detail: `the server answered nothing before it was ready (${JSON.stringify(boot)}): it booted faster than it could be watched` };
    if (booting === undefined) return fail(`never saw 503 while booting: ${JSON.stringify(boot)}`);
    return pass(`/health during boot: ${boot.map((o) => `${o.status}${o.stage === undefined ? "" : ` (${o.stage})`}`).join(" → ")}`);
  },

  async disconnect_frees_slot(target) {
    const before = await metrics(target);
    const gauge = IN_FLIGHT_GAUGES.find((name) => before.has(name));
    if (gauge === undefined) return { status: "skip", detail: `/metrics has none of the in-flight gauges this check knows (${IN_FLIGHT_GAUGES.join(", ")}), so a freed slot cannot be seen` };
    const { events } = await readEvents(target, "/v1/completions", { model: target.model, prompt: "Disconnect", max_tokens: 1000, temperature: 0, stream: true }, 2);
    if (events.length < 2) return fail("the stream did not start");
    let after = await metrics(target);
    const deadline = Date.now() + 5000;
    while ((after.get(gauge) ?? 1) !== 0 && Date.now() < deadline) {
      await sleep(25);
      after = await metrics(target);
    }
    if (after.get(gauge) !== 0) return fail(`${gauge} is ${after.get(gauge)} 5 s after the client left`);
    const cancelled = (after.get(CANCELLED_COUNTER) ?? NaN) - (before.get(CANCELLED_COUNTER) ?? NaN);
    if (before.has(CANCELLED_COUNTER) && !(cancelled >= 1)) return fail(`${CANCELLED_COUNTER} rose by ${cancelled}`);
    const capacity = target.slots ?? 2;
    const answers = await Promise.all(Array.from({ length: capacity }, () => post(target, "/v1/completions", { model: target.model, prompt: "x", max_tokens: 2, temperature: 0 })));
    if (answers.some((r) => r.status !== 200)) return fail("full capacity was not available after the disconnect");
    return pass(`slot freed (${gauge} 0${Number.isFinite(cancelled) ? `, cancelled +${cancelled}` : ""}); ${capacity} concurrent requests then served`);
  },
};
