import { ChatTemplateError } from "../../../chat/chat-template.js";
import type { Conversation } from "../../../chat/conversations.js";
import type { CellRecord } from "../../../results/types.js";
import { firstDivergence } from "../../../speculative/compare.js";
import { CHECK_OF_SIDE, type ChatTemplateSide, type KnownChatTemplateDifference } from "../../../suites/chat-template-suite.js";
import { httpCall } from "../../../sut/http-call.js";
import { endsTheSut, timedCall } from "../../../sut/with-timeout.js";
import { firstTextDifference } from "../../../tokenizer/first-text-difference.js";
import { ErrorsInCells, makeCell, type CheckOutcome } from "../../check.js";
import { judgeAgainstKnownList, type ReferenceComparison } from "../../known-differences.js";
import type { ChatTemplateArmContext, ChatTemplateCheckModule } from "./chat-template-arm-state.js";

/** A GET or POST to a server under the per-case timeout and the arm's stop; a failed call names the server and the endpoint. */
async function callServer(context: ChatTemplateArmContext, side: ChatTemplateSide, url: string, body?: unknown) {
  const path = new URL(url).pathname;
  try {
    return await timedCall(side, path, () => httpCall(url, { body, signal: context.signal }), context.caseTimeout, context.signal)();
  } catch (error) {
    if (endsTheSut(error)) throw error;
    throw new Error(`${side} ${path} gave no answer: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
}

/** A rendering and its ids, or the refusal (a template's raise_exception, a server's 4xx/5xx) with its one-line reason. */
type Rendering = { readonly text: string; readonly ids: readonly number[] } | { readonly refused: string };

const QUOTED = 40;
const MAX_REASON = 200;
/** A window of a rendering around a position, JSON-escaped so newlines and special-token text stay visible. */
const snippet = (text: string, at: number) => `${at > 12 ? "…" : ""}${JSON.stringify(text.slice(Math.max(0, at - 12), at + QUOTED))}${at + QUOTED < text.length ? "…" : ""}`;

/** The reference: the tokenizer_config.json template rendered by @huggingface/jinja, tokenized as apply_chat_template(tokenize=True) does (special text parsed, nothing added). */
function referenceRendering(context: ChatTemplateArmContext, conversation: Conversation): Rendering {
  const { template, bosToken, eosToken } = context.reference;
  try {
    const text = template.render({ messages: conversation.messages, tools: conversation.tools, addGenerationPrompt: conversation.addGenerationPrompt, bosToken, eosToken });
    return { text, ids: context.tokenizer.tokenizeText(text, "parsed") };
  } catch (error) {
    if (error instanceof ChatTemplateError) return { refused: error.message };
    throw error;
  }
}

/**
 * A server's rendering through /apply-template (llama-server's endpoint; ours answers it too).
 * Ours also says which ids its chat path feeds (`prompt_token_ids`): those are compared, so a
 * rendering it tokenizes otherwise is caught too; llama-server's text is tokenized here as it
 * tokenizes a chat prompt. An answer of the wrong shape throws (an error cell, never a pass).
 */
async function serverRendering(context: ChatTemplateArmContext, side: ChatTemplateSide, baseUrl: string, conversation: Conversation): Promise<Rendering> {
  const body = { messages: conversation.messages, ...(conversation.tools === undefined ? {} : { tools: conversation.tools }), add_generation_prompt: conversation.addGenerationPrompt };
  const response = await callServer(context, side, `${baseUrl}/apply-template`, body);
  let parsed: { prompt?: unknown; prompt_token_ids?: unknown; error?: { message?: unknown } };
  try {
    parsed = JSON.parse(response.text) as typeof parsed;
  } catch {
    throw new Error(`${side} /apply-template answered ${response.status} with no JSON: ${response.text.slice(0, 120)}`);
  }
  // llama-server's reasons run over several lines (the template source around the error): one line, cut, for the cell.
  const reason = (typeof parsed.error?.message === "string" ? parsed.error.message : response.text).replace(/\s+/g, " ").trim();
  if (response.status !== 200) return { refused: `HTTP ${response.status}: ${reason.length > MAX_REASON ? `${reason.slice(0, MAX_REASON)}…` : reason}` };
  if (typeof parsed.prompt !== "string") throw new Error(`${side} /apply-template answered 200 without a string "prompt"`);
  if (side === "llama-server") return { text: parsed.prompt, ids: context.tokenizer.chatPromptIds(parsed.prompt) };
  const ids = parsed.prompt_token_ids;
  if (!Array.isArray(ids) || !ids.every((id) => Number.isInteger(id) && id >= 0)) throw new Error(`${side} /apply-template answered 200 without "prompt_token_ids" (an array of token ids)`);
  return { text: parsed.prompt, ids: ids as number[] };
}


function compare(context: ChatTemplateArmContext, side: ChatTemplateSide, expected: Rendering, observed: Rendering): ReferenceComparison {
  if ("refused" in expected) {
    if ("refused" in observed) return { difference: undefined, agreement: `both refuse: reference "${expected.refused}", ${side} "${observed.refused}"` };
    return { difference: { position: null, expected_id: null, observed_id: null, detail: `the reference refuses (${expected.refused}), ${side} renders it` } };
  }
  if ("refused" in observed) return { difference: { position: null, expected_id: null, observed_id: null, detail: `${side} refuses (${observed.refused}), the reference renders it` } };
  const diff = firstDivergence(expected.ids, observed.ids);
  if (diff === undefined) return { difference: undefined, agreement: `${observed.ids.length} ids identical` };
  const piece = (id: number | null) => (id === null ? "(end)" : `${id} ${JSON.stringify(context.tokenizer.piece(id))}`);
  // The texts as the model reads them (the ids decoded, special tokens shown): llama-server cuts a BOS the template
  // prints and adds it as an id, so its raw text would differ at character 0 where its ids agree.
  const [read, seen] = [context.tokenizer.detokenizeIds(expected.ids), context.tokenizer.detokenizeIds(observed.ids)];
  const at = firstTextDifference(read, seen);
  const text = at === undefined ? "the decoded texts are equal (the ids differ in tokenization alone)"
    : `first differing character ${at}: reference ${snippet(read, at)} vs ${side} ${snippet(seen, at)}`;
  return {
    difference: {
      position: diff.position, expected_id: diff.expected, observed_id: diff.observed,
      detail: `first differing token ${diff.position}: reference ${piece(diff.expected)} vs ${side} ${piece(diff.observed)}; ${text}; ${expected.ids.length} vs ${observed.ids.length} ids`,
    },
  };
}

/** The entry of the suite's list that explains this difference on this arm, if any. */
function knownDifference(context: ChatTemplateArmContext, conversation: string, side: ChatTemplateSide): KnownChatTemplateDifference | undefined {
  return context.suite.known_differences.find((known) => known.conversation === conversation && known.side === side && (known.models === undefined || known.models.includes(context.arm.model)));
}

/** The server's /props must name the model file's template as the one it renders with (ours: `chat_template_origin` "gguf" too). */
async function propsCell(context: ChatTemplateArmContext, side: ChatTemplateSide, baseUrl: string): Promise<{ status: "pass" | "fail"; detail: string }> {
  if (context.fileTemplate === undefined) return { status: "fail", detail: `${context.arm.model} carries no tokenizer.chat_template: the servers render a default, nothing of the file's is compared` };
  const response = await callServer(context, side, `${baseUrl}/props`);
  const props = (response.status === 200 ? JSON.parse(response.text) : {}) as { chat_template?: unknown; chat_template_origin?: unknown };
  // llama-server reports the source less one trailing newline, which Jinja drops when rendering anyway (keep_trailing_newline off).
  const sameTemplate = props.chat_template === context.fileTemplate || `${String(props.chat_template)}\n` === context.fileTemplate;
  if (!sameTemplate) return { status: "fail", detail: `GET /props (HTTP ${response.status}): its chat_template is not the model file's tokenizer.chat_template` };
  if (side === "server" && props.chat_template_origin !== "gguf") return { status: "fail", detail: `GET /props: chat_template_origin ${JSON.stringify(props.chat_template_origin)}, the file carries a template ("gguf" expected)` };
  return { status: "pass", detail: "GET /props names the model file's tokenizer.chat_template" };
}

/**
 * One side held to the reference over every conversation: a cell per conversation (plus one for
 * /props). A difference the suite lists is an informational failure with its reason, an unlisted
 * one fails the check, and a listed one that no longer differs fails it too. Without the server
 * (llama-server not built) every cell is SKIPPED with the reason.
 */
function sideCheck<Side extends ChatTemplateSide>(side: Side, check: (typeof CHECK_OF_SIDE)[Side]): ChatTemplateCheckModule<(typeof CHECK_OF_SIDE)[Side]> {
  return {
    kind: "chat-template",
    name: check,
    needs: [],
    level: ({ context }) => context.suite.checks[check],
    async run({ context }, gate): Promise<CheckOutcome> {
      const server = context.servers[side];
      const cell = (conversation: { name: string; index: number } | undefined, fields: Partial<CellRecord> & Pick<CellRecord, "status" | "detail">, cellGate = gate) =>
        makeCell(context, check, cellGate, { prompt: conversation?.index ?? null, prompt_class: conversation?.name ?? "props", ...fields, detail: `${conversation?.name ?? "props"}: ${fields.detail}` },
          conversation === undefined ? "" : ` --prompt ${conversation.index}`);
      if ("absent" in server || context.conversations.length === 0) {
        const reason = "absent" in server ? server.absent : "no conversation selected: an empty corpus cannot fail";
        await context.emit({ kind: "cells", cells: context.conversations.length === 0 ? [cell(undefined, { status: "skip", detail: reason })] : context.conversations.map((c) => cell(c, { status: "skip", detail: reason })) });
        return { status: "skip", reason };
      }
      const props = await propsCell(context, side, server.baseUrl);
      await context.emit({ kind: "cells", cells: [cell(undefined, props)] });
      const counts = { agree: 0, known: 0, unexplained: 0, stale: 0, errored: 0 };
      const failing: string[] = props.status === "fail" ? ["props"] : [];
      // Set once the server stopped answering (a per-case timeout): the conversations after it are not asked, each an error saying why.
      let gone: string | undefined;
      let erroredFirst: string | undefined;
      for (const conversation of context.conversations) {
        if (context.signal.aborted) break;
        const { name } = conversation;
        let comparison: ReferenceComparison;
        try {
          if (gone !== undefined) throw new Error(`not asked: ${gone}`);
          comparison = compare(context, side, referenceRendering(context, conversation), await serverRendering(context, side, server.baseUrl, conversation));
        } catch (error) {
          counts.errored++;
          const reason = error instanceof Error ? error.message : String(error);
          if (endsTheSut(error)) gone = `the server stopped answering at ${name} (${reason})`;
          erroredFirst ??= `${name}: ${reason}`;
          await context.emit({ kind: "cells", cells: [cell(conversation, { status: "error", detail: reason })] });
          continue;
        }
        const judged = judgeAgainstKnownList(comparison, knownDifference(context, name, side),
          (agreement) => `listed as a known difference of ${side} but it agrees (${agreement}); remove the entry from ${context.suite.path}`);
        counts[judged.outcome]++;
        if (judged.outcome === "stale") failing.push(`${name} (listed but agrees)`);
        if (judged.outcome === "unexplained") failing.push(name);
        const record = cell(conversation, judged.fields, judged.informational ? "informational" : gate);
        await context.emit({ kind: "cells", cells: [record] });
      }
      const compared = counts.agree + counts.known + counts.unexplained + counts.stale;
      // As a parity prompt that errored: the server did not answer, so the check could not decide (exit 2), whatever else it found.
      if (counts.errored > 0) {
        throw new ErrorsInCells(`${counts.errored} conversation(s) errored (${erroredFirst}); see their cells${failing.length === 0 ? "" : `; also failing: ${failing.slice(0, 6).join(", ")}`}`);
      }
      if (compared === 0) return { status: "skip", reason: "the run was stopped before the first conversation" };
      const failed = failing.length;
      return {
        status: failed === 0 ? "pass" : "fail",
        summary: `${counts.agree}/${compared} conversations token-identical to the reference, ${counts.known} known difference(s) explained in the suite${failed === 0 ? "" : `; FAIL: ${failing.slice(0, 6).join(", ")}${failing.length > 6 ? ", …" : ""}`}`,
        metrics: { conversations: context.conversations.length, compared, agree: counts.agree, known: counts.known, unexplained: counts.unexplained, stale: counts.stale, errored: counts.errored, props: props.status },
      };
    },
  };
}

/** Our server's rendering held to the reference. */
export const chatTemplateServerCheck = sideCheck("server", CHECK_OF_SIDE.server);
/** llama-server's rendering held to the reference. */
export const chatTemplateLlamaServerCheck = sideCheck("llama-server", CHECK_OF_SIDE["llama-server"]);
