import { hasCapability, type TokenId } from "../../../sut/types.js";
import { askGreedy } from "../../../sut/answer-shape.js";
import { sortAnswers, type BrokenAnswer, type ParityCheck } from "./parity-arm-state.js";

/** The same requests asked again give the same ids (and, with teacher forcing, the same log-prob bytes). */
export const determinismCheck: ParityCheck<"determinism"> = {
  kind: "parity",
  name: "determinism",
  needs: ["greedy"],
  level: ({ context }) => context.suite.checks.determinism?.gate,
  async run(state, gate) {
    const { suite, arm, sut, goldens, prompts, vocabSize } = state.context;
    const reruns = suite.checks.determinism!.reruns;
    const requests = state.greedyRequests();
    // Each rerun's answers, by prompt; the greedy_parity pass counts as the first when it ran.
    const runs: Map<number, TokenId[]>[] = state.aloneIds === undefined ? [] : [state.aloneIds];
    const broken: BrokenAnswer[] = [];
    while (runs.length < reruns) {
      const sorted = sortAnswers(prompts, await askGreedy(sut, "greedy", requests, vocabSize));
      runs.push(sorted.valid);
      broken.push(...sorted.broken.filter((b) => !broken.some((seen) => seen.prompt === b.prompt)));
    }
    let logprobBytesDiffer = 0;
    if (hasCapability(sut, "teacherForcedTopK")) {
      const tf = () => sut.teacherForcedTopK!(prompts.map((p) => ({ promptIds: goldens.promptIds[p], continuationIds: goldens.greedyIds[p], k: 5 })));
      const [a, b] = [await tf(), await tf()];
      const bytes = (rows: typeof a) => Buffer.from(Float32Array.from(rows.flat().flatMap((row) => row.logprobs)).buffer).toString("hex");
      logprobBytesDiffer = a.map((_, i) => bytes([a[i]]) !== bytes([b[i]])).filter(Boolean).length;
    }
    const scored = prompts.filter((p) => !broken.some((b) => b.prompt === p) && runs.every((run) => run.has(p)));
    const unstable = scored.filter((p) => runs.some((run) => run.get(p)!.join(",") !== runs[0].get(p)!.join(",")));
    await state.record([...scored.map((p) => state.cell("determinism", gate, {
      prompt: p, status: unstable.includes(p) ? "fail" : "pass",
      detail: unstable.includes(p) ? `ids differ across ${reruns} reruns` : `identical ids across ${reruns} reruns`,
    })), ...state.brokenCells("determinism", gate, "greedy", broken)]);
    const ok = unstable.length === 0 && broken.length === 0 && logprobBytesDiffer === 0;
    return {
      status: ok ? "pass" : "fail",
      summary: `${arm.label} determinism: ${scored.length - unstable.length}/${prompts.length} prompts identical over ${reruns} reruns` +
        (broken.length === 0 ? "" : `, ${broken.length} answers rejected`) +
        (hasCapability(sut, "teacherForcedTopK") ? `; log-prob bytes ${logprobBytesDiffer === 0 ? "identical" : `differ on ${logprobBytesDiffer} prompts`}` : "") +
        (unstable.length === 0 && logprobBytesDiffer === 0 ? "" : " — the same request gives other answers: state leaking from earlier requests (a reused slot whose KV or recurrent/conv state was not cleared) or a race"),
      metrics: { reruns, unstable_prompts: unstable.length, rejected: broken.length, logprob_bytes_differ: logprobBytesDiffer },
    };
  },
};
