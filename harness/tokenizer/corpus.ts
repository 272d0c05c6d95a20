import { BenchError } from "../errors.js";
import { readJsonFile } from "../io/json-schema.js";

/** One named text of a tokenizer corpus. */
export interface CorpusText {
  readonly name: string;
  readonly text: string;
}

/** Reads a corpus file (`{ "texts": [{ "name", "text" }] }`): names unique, texts strings (the empty one included). */
export function readCorpus(path: string): CorpusText[] {
  const raw = readJsonFile(path) as { texts?: unknown } | null;
  if (raw === null || !Array.isArray(raw.texts) || raw.texts.length === 0) {
    throw new BenchError("a corpus needs a non-empty \"texts\" array", { file: path, field: "texts", fix: "write { \"texts\": [{ \"name\": \"...\", \"text\": \"...\" }] }" });
  }
  const names = new Set<string>();
  return raw.texts.map((entry: unknown, index: number) => {
    const { name, text } = (entry ?? {}) as { name?: unknown; text?: unknown };
    if (typeof name !== "string" || name === "" || typeof text !== "string") {
      throw new BenchError(`text ${index} needs a non-empty string "name" and a string "text"`, { file: path, field: `texts[${index}]`, fix: "give each text a name and a text (\"\" is allowed)" });
    }
    if (names.has(name)) throw new BenchError(`two texts are named "${name}"`, { file: path, field: `texts[${index}].name`, fix: "give each text its own name" });
    names.add(name);
    return { name, text };
  });
}
