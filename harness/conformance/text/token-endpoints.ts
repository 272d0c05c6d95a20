import { pieceAsJson } from "../../sut/token-pieces.js";
import type { TextReference } from "../text-reference.js";
import { referenceOf } from "./reference-of.js";
import { fail, pass, postJson, type CheckResult, type ConformanceTarget } from "../target.js";
import { HOSTILE_TEXTS } from "./hostile-texts.js";

/** The hostile texts, and each with a control token's text inside (where the file names one): what parse_special decides. */
function textsWithSpecials(reference: TextReference): string[] {
  const special = reference.controlTexts[0];
  return special === undefined ? [...HOSTILE_TEXTS] : [...HOSTILE_TEXTS, `Hi${special}`, `${special}${HOSTILE_TEXTS[1]}${special}`];
}

/** The flag sets asked, with what llama.cpp's tokenizer gives for each (llama-server's defaults: add_special false, parse_special true). */
const FLAG_SETS: readonly { readonly body: Record<string, boolean>; readonly addSpecial: boolean; readonly parseSpecial: boolean }[] = [
  { body: {}, addSpecial: false, parseSpecial: true },
  { body: { add_special: true }, addSpecial: true, parseSpecial: true },
  { body: { parse_special: false }, addSpecial: false, parseSpecial: false },
  { body: { add_special: true, parse_special: false }, addSpecial: true, parseSpecial: false },
];

/**
 * /tokenize speaks llama-server's dialect: its defaults (nothing added, special-token text parsed),
 * `add_special` and `parse_special` as llama_tokenize takes them, and `with_pieces` giving each
 * id's piece (text, or bytes where the piece is part of a character), each held to llama.cpp's own
 * tokenizer of the served file. SKIPPED where the server has no /tokenize (404).
 */
export async function tokenizeDialect(target: ConformanceTarget): Promise<CheckResult> {
  const reference = referenceOf(target);
  if ("status" in reference) return reference;
  const texts = textsWithSpecials(reference);
  const problems: string[] = [];
  let decisive = 0;
  for (const content of texts) {
    for (const flags of FLAG_SETS) {
      const { status, json } = await postJson(target, "/tokenize", { content, ...flags.body });
      if (status === 404) return { status: "skip", detail: "the server has no /tokenize" };
      const expected = reference.tokenize(content, flags.addSpecial, flags.parseSpecial);
      if (JSON.stringify(json.tokens) !== JSON.stringify(expected)) problems.push(`${JSON.stringify(content)} ${JSON.stringify(flags.body)}: ${status} ${JSON.stringify(json.tokens ?? json).slice(0, 100)}, llama.cpp gives ${JSON.stringify(expected).slice(0, 100)}`);
    }
    const withPieces = await postJson(target, "/tokenize", { content, with_pieces: true });
    const ids = reference.tokenize(content, false, true);
    const pieces = reference.pieces(ids, true).map(pieceAsJson);
    const expected = ids.map((id, i) => ({ id, piece: pieces[i] }));
    if (JSON.stringify(withPieces.json.tokens) !== JSON.stringify(expected)) problems.push(`${JSON.stringify(content)} with_pieces: ${JSON.stringify(withPieces.json.tokens).slice(0, 120)}, llama.cpp gives ${JSON.stringify(expected).slice(0, 120)}`);
    decisive += reference.tokenize(content, true, true).join() !== reference.tokenize(content, false, false).join() ? 1 : 0;
  }
  if (problems.length > 0) return fail(problems.slice(0, 3).join("; ") + (problems.length > 3 ? `; and ${problems.length - 3} more` : ""));
  if (decisive === 0) return { status: "skip", detail: "no text tokenizes differently under the flags on this vocabulary (it adds nothing and names no control token): the flags could not be told apart" };
  return pass(`${texts.length} texts × ${FLAG_SETS.length} flag sets and with_pieces: the ids and pieces llama.cpp gives (${decisive} texts where the flags change the ids)`);
}

/**
 * /detokenize gives the ids' pieces back to back, control tokens' text included, as llama-server's
 * does: no clean-up of spaces, the BOS's text where a BOS is given. The ids are llama.cpp's for the
 * hostile texts with their special tokens (so "x === vs !== y" must come back as it went in).
 */
export async function detokenizeText(target: ConformanceTarget): Promise<CheckResult> {
  const reference = referenceOf(target);
  if ("status" in reference) return reference;
  const problems: string[] = [];
  const texts = textsWithSpecials(reference);
  for (const content of texts) {
    const ids = reference.tokenize(content, true, true);
    const { status, json } = await postJson(target, "/detokenize", { tokens: ids });
    if (status === 404) return { status: "skip", detail: "the server has no /detokenize" };
    const expected = reference.text(ids, true);
    if (json.content !== expected) problems.push(`${JSON.stringify(ids).slice(0, 60)} (${JSON.stringify(content)}): ${status} ${JSON.stringify(json.content ?? json).slice(0, 100)}, llama.cpp's pieces give ${JSON.stringify(expected)}`);
  }
  if (problems.length > 0) return fail(problems.slice(0, 3).join("; ") + (problems.length > 3 ? `; and ${problems.length - 3} more` : ""));
  return pass(`${texts.length} id lists detokenized to llama.cpp's pieces back to back, special tokens' text included`);
}
