// test-tier: fast

import { test } from "uvu";
import * as assert from "uvu/assert";
import { OpenAiSseReader } from "../harness/load/sse-reader.js";

const event = (json: unknown) => `data: ${JSON.stringify(json)}\n\n`;
const token = (text: string, ids?: number[]) => event({ choices: [{ text, ...(ids === undefined ? {} : { token_ids: ids }) }] });

test("every event is stamped with the arrival of the read that held its first byte, not the read that completed it", () => {
  const reader = new OpenAiSseReader();
  const whole = token("a") + token("b") + token("c");
  const cut = token("a").length + 5; // the second event starts in read 1 and ends in read 2
  reader.push(Buffer.from(whole.slice(0, cut)), 100n);
  reader.push(Buffer.from(whole.slice(cut)), 200n);
  reader.push(Buffer.from("data: [DONE]\n\n"), 300n);
  assert.equal(reader.contentEventsNs, [100n, 100n, 200n]);
  assert.is(reader.doneNs, 300n);
  assert.is(reader.clientTokens, 3);
  assert.is(reader.failure, undefined);
});

test("a stream cut one byte at a time reads the same as in one piece", () => {
  const whole = token("x", [1, 2]) + event({ choices: [], usage: { prompt_tokens: 4, completion_tokens: 2 } }) + "data: [DONE]\n\n";
  const reader = new OpenAiSseReader();
  for (const [i, byte] of [...Buffer.from(whole)].entries()) reader.push(Buffer.from([byte]), BigInt(i));
  assert.equal(reader.contentEventsNs, [0n]);
  assert.is(reader.clientTokens, 2, "token_ids count, not events");
  assert.equal(reader.usage, { promptTokens: 4, completionTokens: 2 });
  assert.is(reader.doneNs, BigInt(whole.indexOf("data: [DONE]")));
});

test("usage's cached prompt tokens are read where the server gives them (prompt_tokens_details.cached_tokens), and left out where it does not or gives no number", () => {
  const read = (usage: unknown) => {
    const reader = new OpenAiSseReader();
    reader.push(Buffer.from(event({ choices: [], usage }) + "data: [DONE]\n\n"), 1n);
    return reader.usage;
  };
  assert.equal(read({ prompt_tokens: 9, completion_tokens: 2, prompt_tokens_details: { cached_tokens: 7 } }), { promptTokens: 9, completionTokens: 2, cachedTokens: 7 });
  assert.equal(read({ prompt_tokens: 9, completion_tokens: 2, prompt_tokens_details: { cached_tokens: "7" } }), { promptTokens: 9, completionTokens: 2 });
  assert.equal(read({ prompt_tokens: 9, completion_tokens: 2, prompt_tokens_details: null }), { promptTokens: 9, completionTokens: 2 });
});

test("CRLF line ends, comments, event/id/retry fields and multi-line data are SSE; role-only and empty chunks are not content", () => {
  const payloads: string[] = [];
  const reader = new OpenAiSseReader((payload) => payloads.push(payload));
  const text = [
    ": keep-alive\r\n\r\n",
    "event: message\r\nid: 1\r\nretry: 10\r\ndata: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\r\n\r\n",
    "data: {\"choices\":[{\"delta\":{\"content\":\"\"}}]}\n\n",
    "data: {\"choices\":\ndata: [{\"delta\":{\"content\":\"hi\"}}]}\n\n",
    "data:[DONE]\n\n",
  ].join("");
  reader.push(Buffer.from(text), 7n);
  assert.is(reader.failure, undefined);
  assert.is(reader.contentEventsNs.length, 1, "only the chunk with text is a token");
  assert.is(payloads[2], "{\"choices\":\n[{\"delta\":{\"content\":\"hi\"}}]}");
  assert.is(reader.doneNs, 7n);
});

test("malformed streams and error events become a classified failure, and reading stops there", () => {
  const notSse = new OpenAiSseReader();
  notSse.push(Buffer.from("this is not SSE\n\n"), 1n);
  assert.is(notSse.failure?.status, "malformed_sse");
  assert.match(notSse.failure?.error ?? "", /a line that is not SSE: "this is not SSE"/);
  const notJson = new OpenAiSseReader();
  notJson.push(Buffer.from("data: {oops\n\n"), 1n);
  assert.is(notJson.failure?.status, "malformed_sse");
  assert.match(notJson.failure?.error ?? "", /not JSON/);
  const errored = new OpenAiSseReader();
  errored.push(Buffer.from(event({ error: { message: "out of memory" } }) + token("late")), 1n);
  assert.equal(errored.failure, { status: "stream_error", error: "out of memory" });
  assert.is(errored.contentEventsNs.length, 0, "nothing is read after the failure");
});

test.run();
