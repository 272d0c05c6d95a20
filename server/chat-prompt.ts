import { ChatTemplate, ChatTemplateError } from "../harness/chat/chat-template.js";
import type { ChatParams } from "./requests.js";

/** Where the server's chat template comes from: the model file's own, or the server's plain one for a file that carries none. */
export type ChatTemplateOrigin = "gguf" | "builtin";

/** The texts of the vocabulary's special tokens a template may print, and whether tokenizing adds BOS itself (the file's add_bos_token). */
export interface ChatSpecialTokens {
  readonly bosToken: string;
  readonly eosToken: string;
  readonly addsBos: boolean;
}

/** A rendering the server cannot make: `status` 400 for messages the template refuses, 500 for a template that does not parse. */
export class ChatPromptError extends Error {
  constructor(message: string, readonly status: 400 | 500) {
    super(message);
  }
}

/**
 * The plain template of a file with no chat template (the fixture vocabularies can spell it:
 * printable ASCII and spaces): each turn as "Role: content", turns joined by " | ", and
 * " | Assistant:" for the model to continue. It has no way to write tool calls.
 */
function renderBuiltin(params: Pick<ChatParams, "messages" | "tools" | "addGenerationPrompt">): string {
  if (params.tools !== undefined || params.messages.some((m) => m.tool_calls !== undefined)) {
    throw new ChatPromptError("this model file carries no chat template, and the server's plain one cannot write tools or tool calls", 400);
  }
  const name = (role: string) => role[0].toUpperCase() + role.slice(1);
  const turns = params.messages.map((m) => `${name(m.role)}: ${m.content}`).join(" | ");
  return params.addGenerationPrompt ? `${turns} | Assistant:` : turns;
}

/**
 * Renders chat requests into prompt text the way llama-server does: with the GGUF's own
 * `tokenizer.chat_template` (run by @huggingface/jinja) when the file carries one, else with the
 * plain built-in template. As in llama-server, a BOS the template writes is cut from the text
 * when tokenizing adds BOS itself, so a prompt never starts with two.
 * `renderOwn` is the FAULT `chat-template-own` (faults.ts): the built-in template is used although
 * the file carries one, and `origin` still says "gguf", as a server with this bug would.
 */
export class ChatPrompter {
  readonly origin: ChatTemplateOrigin;
  private readonly template: ChatTemplate | ChatPromptError | undefined;

  constructor(ggufTemplate: string | undefined, readonly specials: ChatSpecialTokens, private readonly renderOwn = false) {
    this.origin = ggufTemplate === undefined ? "builtin" : "gguf";
    if (ggufTemplate === undefined) return;
    try {
      this.template = new ChatTemplate(ggufTemplate);
    } catch (error) {
      // A broken template in the file fails chat requests with the reason; completions still serve.
      if (!(error instanceof ChatTemplateError)) throw error;
      this.template = new ChatPromptError(`${error.message} (the model file's tokenizer.chat_template)`, 500);
    }
  }

  /** The template's source as /props reports it ("" for the built-in one, which is code). */
  get source(): string {
    return this.template instanceof ChatTemplate ? this.template.source : "";
  }

  render(params: Pick<ChatParams, "messages" | "tools" | "addGenerationPrompt">): string {
    if (this.template === undefined || this.renderOwn) return renderBuiltin(params);
    if (this.template instanceof ChatPromptError) throw this.template;
    let text: string;
    try {
      text = this.template.render({ messages: params.messages, tools: params.tools, addGenerationPrompt: params.addGenerationPrompt, bosToken: this.specials.bosToken, eosToken: this.specials.eosToken });
    } catch (error) {
      if (error instanceof ChatTemplateError) throw new ChatPromptError(error.message, 400);
      throw error;
    }
    const { bosToken, addsBos } = this.specials;
    return addsBos && bosToken !== "" && text.startsWith(bosToken) ? text.slice(bosToken.length) : text;
  }
}
