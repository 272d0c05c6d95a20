import { textOfIds } from "../text/completion-text.js";
import { echoText } from "../text/echo-text.js";
import { emptyPrompt, specialTokenPrompt } from "../text/prompt-parsing.js";
import { detokenizeText, tokenizeDialect } from "../text/token-endpoints.js";
import type { ConformanceGroup } from "../target.js";

/**
 * The text a server returns, held to llama.cpp's own text of the ids it returned (the served file's
 * vocabulary, loaded in the harness apart from the server), and its token endpoints to llama-server's
 * dialect. Each check is its own file under ../text/.
 */
export const TEXT_CHECKS: ConformanceGroup = {
  text_of_ids: textOfIds,
  echo_text: echoText,
  tokenize_dialect: tokenizeDialect,
  detokenize_text: detokenizeText,
  special_token_prompt: specialTokenPrompt,
  empty_prompt: emptyPrompt,
};
