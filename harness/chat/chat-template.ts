import { Template } from "@huggingface/jinja";

/** A tool call of an assistant turn, in the OpenAI chat API's shape (`arguments` a JSON text). */
export interface ChatToolCall {
  readonly id?: string;
  readonly type: "function";
  readonly function: { readonly name: string; readonly arguments: string };
}

/** One turn as chat templates read it: the OpenAI message shape, content always a string. */
export interface ChatTurn {
  readonly role: "system" | "user" | "assistant" | "tool";
  readonly content: string;
  readonly tool_calls?: readonly ChatToolCall[];
  /** On a `tool` turn: the call it answers. */
  readonly tool_call_id?: string;
  /** On a `tool` turn: the function that answered. */
  readonly name?: string;
}

/** What a chat template is rendered with, as Hugging Face's `apply_chat_template` passes it. */
export interface ChatTemplateInput {
  readonly messages: readonly ChatTurn[];
  /** The OpenAI `tools` list; absent means none (a template tests `if tools`). */
  readonly tools?: readonly unknown[];
  /** Whether the rendering ends with the opening of the assistant's next turn. */
  readonly addGenerationPrompt: boolean;
  /** The special tokens' texts (`{{ bos_token }}`); "" where the vocabulary has none. */
  readonly bosToken: string;
  readonly eosToken: string;
}

/** A template that does not parse, or that refuses (raise_exception) or fails on these messages. */
export class ChatTemplateError extends Error {
  constructor(message: string, readonly stage: "parse" | "render") {
    super(message);
    this.name = "ChatTemplateError";
  }
}

/** First line of an engine's message: a cell or a 400 carries one line. */
const oneLine = (error: unknown) => (error instanceof Error ? error.message : String(error)).split("\n")[0];

/**
 * A Jinja chat template (a tokenizer_config.json's `chat_template`, a GGUF's
 * `tokenizer.chat_template`) compiled once with @huggingface/jinja, the engine transformers.js
 * renders templates with: the reference of the chat-template suite and our server's renderer.
 */
export class ChatTemplate {
  private readonly template: Template;

  constructor(readonly source: string) {
    try {
      this.template = new Template(source);
    } catch (error) {
      throw new ChatTemplateError(`the chat template does not parse: ${oneLine(error)}`, "parse");
    }
  }

  /** The prompt text; variables as transformers passes them (tools only when given, so `if tools` is false without). */
  render(input: ChatTemplateInput): string {
    try {
      return this.template.render({
        messages: input.messages,
        ...(input.tools === undefined ? {} : { tools: input.tools }),
        add_generation_prompt: input.addGenerationPrompt,
        bos_token: input.bosToken,
        eos_token: input.eosToken,
      });
    } catch (error) {
      throw new ChatTemplateError(`the chat template fails on these messages: ${oneLine(error)}`, "render");
    }
  }
}
