import { GgufValueType, type GgufFile } from "./types.js";

/** The model file's own chat template (`tokenizer.chat_template`, as llama.cpp's converter copies it from tokenizer_config.json), if it carries one. */
export function ggufChatTemplate(file: GgufFile): string | undefined {
  const entry = file.metadata.get("tokenizer.chat_template");
  return entry?.type === GgufValueType.STRING ? entry.value : undefined;
}
