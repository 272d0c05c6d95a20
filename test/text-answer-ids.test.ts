// test-tier: fast

import { test } from "uvu";
import * as assert from "uvu/assert";
import { choiceIds, choiceText, streamedAnswer } from "../harness/conformance/text/answer-ids.js";

/*
 * The text checks read the ids an answer says it is made of from whichever shape the server
 * writes; these are the shapes ours and llama-server's answers have (tools/server's
 * probs_vector_to_json: `logprobs.content[]` with `id`).
 */

test("a choice's ids: token_ids first, then logprobs.content[].id (llama-server), then the legacy logprobs' token_ids; none: undefined", () => {
  assert.equal(choiceIds({ text: "ab", token_ids: [1, 2], logprobs: { token_ids: [9, 9] } }), [1, 2]);
  assert.equal(choiceIds({ text: "ab", logprobs: { content: [{ id: 3, token: "a" }, { id: 4, token: "b" }] } }), [3, 4]);
  assert.equal(choiceIds({ message: { content: "ab" }, logprobs: { content: [{ id: 5 }] } }), [5]);
  assert.equal(choiceIds({ text: "ab", logprobs: { token_ids: [6, 7] } }), [6, 7]);
  assert.is(choiceIds({ text: "ab" }), undefined);
  assert.is(choiceIds({ text: "ab", logprobs: { content: [{ token: "a" }] } }), undefined, "an entry without an id states no ids");
});

test("a choice's text: completions text, chat message, or a streamed delta", () => {
  assert.is(choiceText({ text: "a" }), "a");
  assert.is(choiceText({ message: { content: "b" } }), "b");
  assert.is(choiceText({ delta: { content: "c" } }), "c");
  assert.is(choiceText({ delta: { role: "assistant" } }), "");
});

test("a stream adds up choice 0's pieces and ids; a piece of text without ids makes the ids unknown, an empty role chunk does not", () => {
  const event = (choice: object) => `data: ${JSON.stringify({ choices: [choice] })}`;
  const ours = streamedAnswer([
    event({ index: 0, text: "x ===", token_ids: [87, 2093] }), event({ index: 1, text: "other", token_ids: [1] }),
    event({ index: 0, text: " vs", token_ids: [6296] }), event({ index: 0, text: "", token_ids: [], finish_reason: "length" }), "data: [DONE]",
  ]);
  assert.equal(ours, { pieces: ["x ===", " vs", ""], ids: [87, 2093, 6296] });
  const llamaServerChat = streamedAnswer([
    event({ index: 0, delta: { role: "assistant", content: null } }),
    event({ index: 0, delta: { content: " !==" }, logprobs: { content: [{ id: 4475, token: " !==" }] } }),
    event({ index: 0, delta: {}, finish_reason: "length" }),
  ]);
  assert.equal(llamaServerChat, { pieces: ["", " !==", ""], ids: [4475] });
  assert.is(streamedAnswer([event({ index: 0, text: "a" })]).ids, undefined);
});

test.run();
