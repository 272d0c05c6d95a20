import type { Conversation } from "../../../chat/conversations.js";
import type { ReferenceChatTemplate } from "../../../chat/reference-template.js";
import type { ChatTemplateArm, ChatTemplateSide, ChatTemplateSuite } from "../../../suites/chat-template-suite.js";
import type { LlamaCppTokenizerSut } from "../../../sut/llamacpp-tokenizer.js";
import type { CaseTimeout } from "../../../sut/with-timeout.js";
import type { ArmScope } from "../../check.js";
import type { CheckModule } from "../check-module.js";

/** A server whose /apply-template renders the conversations, or why this run has none. */
export type TemplateServer = { readonly baseUrl: string } | { readonly absent: string };

export interface ChatTemplateArmContext extends ArmScope {
  readonly suite: ChatTemplateSuite;
  readonly arm: ChatTemplateArm;
  /** The conversations this run renders, with their index in the corpus (`--prompt` selects them). */
  readonly conversations: ReadonlyArray<Conversation & { readonly index: number }>;
  /** The arm's model's llama.cpp tokenizer: every rendering is tokenized by it, so a difference is the template's. */
  readonly tokenizer: LlamaCppTokenizerSut;
  readonly reference: ReferenceChatTemplate;
  /** The model file's `tokenizer.chat_template` (undefined: it carries none). */
  readonly fileTemplate: string | undefined;
  readonly servers: Readonly<Record<ChatTemplateSide, TemplateServer>>;
  /** How long a server has for each request (the per-case timeout): one that never answers is an error, not a hung run. */
  readonly caseTimeout: CaseTimeout;
}

/** What the checks of one chat-template arm share: its context (each side's check keeps nothing for the other). */
export interface ChatTemplateArmState {
  readonly context: ChatTemplateArmContext;
}

/** A check of a chat-template arm (one module under checks/chat-template/, listed in checks/registry.ts). */
export type ChatTemplateCheckModule<Name extends string = string> = CheckModule<Name, ChatTemplateArmState, "chat-template">;
