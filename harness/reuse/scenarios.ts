import { commonPrefixLength } from "../parity/common-prefix.js";
import { BenchError } from "../errors.js";
import type { ReuseScenarioKind, ReuseSuite } from "../suites/reuse-suite.js";
import type { ChatMessage, TokenId } from "../sut/types.js";
import type { SplitPoint } from "./split-points.js";

/** A scenario before its prompts exist: what it is, and the tag its prompts start with. */
export interface ScenarioShape {
  readonly kind: ReuseScenarioKind;
  readonly split: SplitPoint | undefined;
  /** Put before the suite's text: every scenario's prompts differ from the others' within a few tokens, so one scenario's cache can serve another's only those. */
  readonly tag: string;
}

/**
 * One scenario as requests: `warm` primes the cache (and, for slot-restore, is saved, evicted by
 * `evictor` and restored), then each of `finals` — built from the warm answer, as a chat client
 * resends history — is asked with the cache on (the hit) and off (the cold answer).
 */
export interface Scenario extends ScenarioShape {
  /** Scenario name, split point and its expression, e.g. `prefix k=64 (ubatch)`. */
  readonly label: string;
  readonly warm: readonly TokenId[];
  /** Slot every request of the scenario is pinned to (slot-restore), else the server chooses. */
  readonly slot: number | undefined;
  readonly evictor: readonly TokenId[] | undefined;
  readonly finals: (warmAnswer: readonly TokenId[]) => TokenId[][];
  /** Several finals in flight at once (concurrent), else one. */
  readonly together: boolean;
}

export function scenarioLabel(kind: ReuseScenarioKind, split: SplitPoint | undefined): string {
  return split === undefined ? kind : `${kind} k=${split.k}${split.expression === String(split.k) ? "" : ` (${split.expression})`}`;
}

/** Prefix and divergence once per split point, the others once each, in the suite's order. */
export function scenarioShapes(kinds: readonly ReuseScenarioKind[], points: readonly SplitPoint[]): ScenarioShape[] {
  const list = kinds.flatMap((kind): Omit<ScenarioShape, "tag">[] => kind === "prefix" || kind === "divergence" ? points.map((split) => ({ kind, split })) : [{ kind, split: undefined }]);
  // The tag names the scenario, split point first, so an arm at another ubatch asks the very same prompts for the scenarios it shares.
  return list.map((scenario) => ({ ...scenario, tag: `[${scenario.split === undefined ? "" : `${scenario.split.k} `}${scenario.kind}]` }));
}


/**
 * Prompt tokens of `final` a server could take from a cache that holds `warm` and its answer: their
 * common prefix, less the last prompt token, which must be evaluated for its logits (llama-server
 * backs off one token on a full match, and so must every server). The answer's last token is left
 * out: a server stops once it has sampled it, so it was never evaluated into the cache.
 */
export function reusableTokens(warm: readonly TokenId[], warmAnswer: readonly TokenId[], final: readonly TokenId[]): number {
  return Math.min(commonPrefixLength([...warm, ...warmAnswer.slice(0, -1)], final), final.length - 1);
}

/** Concurrent requests' suffixes start this many tokens apart in `other`, so each request differs from the others right after the prefix. */
const CONCURRENT_STRIDE = 3;

/**
 * A scenario's requests from its base prompt (BOS, tag, text: at least `prompt_tokens` ids) and
 * the other text's ids (no BOS). Too short a text is the suite's error, named.
 */
export function buildScenario(shape: ScenarioShape, base: readonly TokenId[], other: readonly TokenId[], suite: Pick<ReuseSuite, "prompt_tokens" | "turn_tokens" | "concurrency" | "path">): Scenario {
  const L = suite.prompt_tokens;
  if (base.length < L) throw new BenchError(`text gives ${base.length} tokens after the tag ${shape.tag}, prompt_tokens asks ${L}`, { file: suite.path, field: "text", fix: "lengthen text or lower prompt_tokens" });
  const prompt = base.slice(0, L);
  const needOther = Math.max(L, suite.turn_tokens + CONCURRENT_STRIDE * suite.concurrency);
  if (other.length < needOther) throw new BenchError(`other_text gives ${other.length} tokens, the scenarios need ${needOther}`, { file: suite.path, field: "other_text", fix: "lengthen other_text" });
  const turn = other.slice(0, suite.turn_tokens);
  const common = { ...shape, label: scenarioLabel(shape.kind, shape.split), slot: undefined, evictor: undefined, together: false };
  const k = shape.split?.k ?? 0;
  switch (shape.kind) {
    case "prefix":
      return { ...common, warm: prompt.slice(0, k), finals: () => [prompt] };
    case "divergence":
      return { ...common, warm: prompt, finals: () => [[...prompt.slice(0, k), ...other.slice(0, L - k)]] };
    case "multi-turn":
      return { ...common, warm: prompt, finals: (answer) => [[...prompt, ...answer, ...turn]] };
    case "concurrent":
      return {
        ...common, warm: prompt, together: true,
        finals: () => Array.from({ length: suite.concurrency }, (_, j) => [...prompt, ...other.slice(CONCURRENT_STRIDE * j, CONCURRENT_STRIDE * j + suite.turn_tokens)]),
      };
    case "slot-restore":
      return { ...common, warm: prompt, slot: 0, evictor: [prompt[0], ...other.slice(0, L - 1)], finals: (answer) => [[...prompt, ...answer, ...turn]] };
    case "multi-turn-chat":
      throw new Error("multi-turn-chat is asked in messages, not ids: see chatTurns");
  }
}

/**
 * The chat scenario's two requests: the first user message (tag and text, cut to about
 * `prompt_tokens` characters: the fixtures' vocabularies are character-level), then the history
 * with the answer and a new user message, as chat clients resend it.
 */
export function chatTurns(shape: ScenarioShape, suite: Pick<ReuseSuite, "text" | "other_text" | "prompt_tokens" | "turn_tokens">): { first: ChatMessage[]; then: (answer: string) => ChatMessage[] } {
  const first: ChatMessage[] = [{ role: "user", content: `${shape.tag} ${suite.text}`.slice(0, suite.prompt_tokens) }];
  return { first, then: (answer) => [...first, { role: "assistant", content: answer }, { role: "user", content: suite.other_text.slice(0, suite.turn_tokens) }] };
}
