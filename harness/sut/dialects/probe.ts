import { checkGreedyAnswer, checkTeacherForcedAnswer } from "../answer-shape.js";
import type { Dialect, DialectCapability, DialectClient, DialectOffer } from "./dialect.js";
import type { TokenId } from "../types.js";

/** What probing found: for each capability the dialect that answered its probe well, and why every other one did not. */
export interface ProbeResult {
  readonly offer: DialectOffer;
  /** Capability → the dialect that serves it. */
  readonly found: Partial<Record<DialectCapability, string>>;
  /** Capability no dialect serves → each dialect's refusal, in one line. */
  readonly missing: Partial<Record<DialectCapability, string>>;
}

/** The file a slot-save probe writes in the server's slot directory (overwritten by every probe). */
const PROBE_SLOT_FILE = "bench-probe.slot";

/** Tokens a speculation probe asks for: past the first (the prompt's own), every step can draft. */
const SPECULATION_PROBE_TOKENS = 8;

/** Ids for probes when the server cannot tokenize: small ids exist in every vocabulary. */
const FALLBACK_PROBE_IDS: readonly TokenId[] = [1, 2, 3];
/** Two words: at least two ids in any vocabulary, BOS or not (a BPE vocabulary that adds none spells "Hello" in one id). */
const PROBE_TEXT = "Hello world";

function oneLine(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).split("\n")[0].slice(0, 160);
}

/**
 * Asks each capability of each dialect one small real request, in preference order, and keeps the
 * first whose answer has the request's shape. Nothing is taken from what a server advertises: a
 * capability is offered because the server just served it.
 */
export async function probeDialects(client: DialectClient, dialects: readonly Dialect[]): Promise<ProbeResult> {
  const offers = dialects.map((dialect) => ({ name: dialect.name, offer: dialect.offer(client) }));
  const offer: { -readonly [C in DialectCapability]?: DialectOffer[C] } = {};
  const found: Partial<Record<DialectCapability, string>> = {};
  const missing: Partial<Record<DialectCapability, string>> = {};
  let probeIds = FALLBACK_PROBE_IDS;
  const probes: { readonly [C in DialectCapability]: (candidate: NonNullable<DialectOffer[C]>) => Promise<void> } = {
    tokenize: async (tokenize) => {
      const ids = await tokenize(PROBE_TEXT);
      if (ids.length < 2) throw new Error(`"${PROBE_TEXT}" tokenized to ${JSON.stringify(ids)}: fewer than two ids`);
      probeIds = ids;
    },
    detokenize: async (detokenize) => {
      const text = await detokenize(probeIds);
      if (found.tokenize !== undefined && !text.includes(PROBE_TEXT)) throw new Error(`${JSON.stringify(probeIds)} detokenized to ${JSON.stringify(text)}, not "${PROBE_TEXT}"`);
    },
    inspectTokens: async (inspect) => {
      const kinds = await inspect(probeIds);
      if (kinds.length !== probeIds.length) throw new Error(`${kinds.length} kinds for ${probeIds.length} ids`);
    },
    greedy: async (greedy) => {
      const request = { promptIds: probeIds, maxTokens: 2 };
      const checked = checkGreedyAnswer(request, await greedy(request));
      if (!checked.ok) throw new Error(checked.reason);
    },
    teacherForced: async (teacherForced) => {
      const request = { promptIds: probeIds.slice(0, -1), continuationIds: probeIds.slice(-1), k: 2 };
      const checked = checkTeacherForcedAnswer(request, await teacherForced(request));
      if (!checked.ok) throw new Error(checked.reason);
    },
    cachedGreedy: async (cachedGreedy) => {
      const request = { promptIds: probeIds, maxTokens: 2, cachePrompt: false };
      const checked = checkGreedyAnswer(request, (await cachedGreedy(request)).ids);
      if (!checked.ok) throw new Error(checked.reason);
    },
    cachedChat: async (cachedChat) => {
      const { text } = await cachedChat({ messages: [{ role: "user", content: PROBE_TEXT }], maxTokens: 2, cachePrompt: false });
      if (typeof text !== "string") throw new Error("the chat answer has no text");
    },
    slotAction: async (slotAction) => slotAction(0, "save", PROBE_SLOT_FILE),
    speculativeGreedy: async (speculativeGreedy) => {
      const request = { promptIds: probeIds, maxTokens: SPECULATION_PROBE_TOKENS };
      const answer = await speculativeGreedy(request);
      const checked = checkGreedyAnswer(request, answer.ids);
      if (!checked.ok) throw new Error(checked.reason);
      if (answer.draftN === 0) throw new Error(`no token drafted in ${SPECULATION_PROBE_TOKENS}: the server does not speculate (started without a draft model or MTP)`);
    },
  };
  for (const capability of Object.keys(probes) as DialectCapability[]) {
    const refusals: string[] = [];
    for (const { name, offer: candidates } of offers) {
      const candidate = candidates[capability];
      if (candidate === undefined) continue;
      try {
        await (probes[capability] as (c: typeof candidate) => Promise<void>)(candidate);
        (offer as Record<DialectCapability, unknown>)[capability] = candidate;
        found[capability] = name;
        break;
      } catch (error) {
        refusals.push(`${name}: ${oneLine(error)}`);
      }
    }
    if (found[capability] === undefined) missing[capability] = refusals.length === 0 ? "no dialect has a word for it" : refusals.join("; ");
  }
  return { offer, found, missing };
}
