import { BenchError } from "../errors.js";
import { readJsonFile } from "../io/json-schema.js";
import type { ChatTurn } from "./chat-template.js";

/** One named conversation of a chat-template corpus, as a chat request would carry it. */
export interface Conversation {
  readonly name: string;
  readonly messages: readonly ChatTurn[];
  readonly tools?: readonly unknown[];
  readonly addGenerationPrompt: boolean;
}

const ROLES = new Set(["system", "user", "assistant", "tool"]);

/**
 * Reads a corpus file (`{ "conversations": [{ "name", "messages", "tools"?, "add_generation_prompt" }] }`):
 * names unique, every message a role and string content (tool calls with their arguments as JSON
 * text, as the OpenAI API sends them), so that every side renders exactly the same input.
 */
export function readConversations(path: string): Conversation[] {
  const raw = readJsonFile(path) as { conversations?: unknown } | null;
  if (raw === null || !Array.isArray(raw.conversations) || raw.conversations.length === 0) {
    throw new BenchError("a chat corpus needs a non-empty \"conversations\" array", { file: path, field: "conversations", fix: "write { \"conversations\": [{ \"name\": \"...\", \"messages\": [...], \"add_generation_prompt\": true }] }" });
  }
  const names = new Set<string>();
  return raw.conversations.map((entry: unknown, index: number): Conversation => {
    const field = `conversations[${index}]`;
    const { name, messages, tools, add_generation_prompt: addGenerationPrompt } = (entry ?? {}) as { name?: unknown; messages?: unknown; tools?: unknown; add_generation_prompt?: unknown };
    if (typeof name !== "string" || name === "") throw new BenchError(`conversation ${index} needs a non-empty string "name"`, { file: path, field: `${field}.name`, fix: "name each conversation" });
    if (names.has(name)) throw new BenchError(`two conversations are named "${name}"`, { file: path, field: `${field}.name`, fix: "give each conversation its own name" });
    names.add(name);
    if (typeof addGenerationPrompt !== "boolean") throw new BenchError(`conversation "${name}" needs "add_generation_prompt" true or false`, { file: path, field: `${field}.add_generation_prompt`, fix: "say whether the rendering opens the assistant's next turn" });
    if (tools !== undefined && !Array.isArray(tools)) throw new BenchError(`conversation "${name}": "tools" must be an array`, { file: path, field: `${field}.tools`, fix: "give the OpenAI tools list, or leave it out" });
    if (!Array.isArray(messages) || messages.length === 0) throw new BenchError(`conversation "${name}" needs a non-empty "messages" array`, { file: path, field: `${field}.messages`, fix: "give its turns as OpenAI chat messages" });
    messages.forEach((message: unknown, i) => {
      const m = (message ?? {}) as { role?: unknown; content?: unknown; tool_calls?: unknown };
      if (typeof m.role !== "string" || !ROLES.has(m.role) || typeof m.content !== "string") {
        throw new BenchError(`conversation "${name}" message ${i} needs a role (${[...ROLES].join(", ")}) and string content`, { file: path, field: `${field}.messages[${i}]`, fix: "write { \"role\": \"user\", \"content\": \"...\" } (\"\" for an assistant turn that only calls tools)" });
      }
      const calls = m.tool_calls;
      if (calls !== undefined && (!Array.isArray(calls) || calls.some((c: { function?: { name?: unknown; arguments?: unknown } }) => typeof c?.function?.name !== "string" || typeof c.function.arguments !== "string"))) {
        throw new BenchError(`conversation "${name}" message ${i}: each tool call needs function.name and function.arguments as JSON text`, { file: path, field: `${field}.messages[${i}].tool_calls`, fix: "write arguments as a string, as the OpenAI API sends them" });
      }
    });
    return { name, messages: messages as ChatTurn[], ...(tools === undefined ? {} : { tools }), addGenerationPrompt };
  });
}
