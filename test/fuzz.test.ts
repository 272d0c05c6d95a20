// test-tier: fast

import fc from "fast-check";
import { test } from "uvu";
import * as assert from "uvu/assert";
import { copyFileSync, cpSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { BenchError } from "../harness/errors.js";
import { readGguf } from "../harness/gguf/read.js";
import { encodeGguf, type TensorToWrite } from "../harness/gguf/write.js";
import { GGML_BLOCK, GgmlType, GgufValueType, tensorByteSize, type GgufScalarType, type GgufValue } from "../harness/gguf/types.js";
import { validateLlamaMetadata } from "../harness/gguf/llama-metadata.js";
import { tokenizerFingerprint } from "../harness/gguf/tokenizer-fingerprint.js";
import { resolveModel } from "../harness/fixtures/registry.js";
import { encodeNpy, readNpyFloat32, readNpyInt32 } from "../harness/goldens/npy.js";
import { readGoldens } from "../harness/goldens/goldens.js";
import { loadSuite } from "../harness/suites/load.js";
import { readBaseline } from "../harness/gates/baseline.js";
import { OpenAiSseReader } from "../harness/load/sse-reader.js";
import { checkHello, parseRunnerLine, readAnswer, RUNNER_PROTOCOL, RUNNER_PROTOCOL_VERSION } from "../harness/sut/runner-lines.js";
import { BadRequest, parseChat, parseCompletion } from "../server/requests.js";
import { parsePrometheusText } from "../harness/conformance/prometheus.js";
import { GOLDENS_DIR, KERNELS_DIR, PACKAGE_ROOT, SUITES_DIR } from "../harness/paths.js";
import { httpCall } from "../harness/sut/http-call.js";
import { startServer } from "../server/start.js";
import { applyMutation, fuzz, fuzzAsync, mutatedJson, mutation, printFuzzFigures, valueOrBenchError } from "./helpers/fuzz.js";
import { temporaryDirectory } from "./helpers/workspace.js";

const work = temporaryDirectory("fuzz");
test.after(() => {
  work.remove();
  printFuzzFigures();
});
const scratch = (name: string, bytes: Uint8Array | string): string => {
  const path = join(work.path, name);
  writeFileSync(path, bytes);
  return path;
};

// ---- GGUF ---------------------------------------------------------------------------------------

const SCALARS: Record<GgufScalarType, fc.Arbitrary<number | bigint | boolean | string>> = {
  [GgufValueType.UINT8]: fc.integer({ min: 0, max: 255 }),
  [GgufValueType.INT8]: fc.integer({ min: -128, max: 127 }),
  [GgufValueType.UINT16]: fc.integer({ min: 0, max: 65535 }),
  [GgufValueType.INT16]: fc.integer({ min: -32768, max: 32767 }),
  [GgufValueType.UINT32]: fc.nat(),
  [GgufValueType.INT32]: fc.integer(),
  [GgufValueType.FLOAT32]: fc.float(),
  [GgufValueType.FLOAT64]: fc.double(),
  [GgufValueType.UINT64]: fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }),
  [GgufValueType.INT64]: fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }),
  [GgufValueType.BOOL]: fc.boolean(),
  [GgufValueType.STRING]: fc.string({ unit: "grapheme", maxLength: 24 }),
};
const scalarType = fc.constantFrom(...(Object.keys(SCALARS).map(Number) as GgufScalarType[]));
const ggufValue: fc.Arbitrary<GgufValue> = fc.oneof(
  scalarType.chain((type) => SCALARS[type].map((value) => ({ type, value }) as GgufValue)),
  scalarType.chain((itemType) => fc.array(SCALARS[itemType], { maxLength: 8 }).map((value) => ({ type: GgufValueType.ARRAY, itemType, value }) as GgufValue)),
);
const tensorToWrite: fc.Arbitrary<Omit<TensorToWrite, "name">> = fc.constantFrom(GgmlType.F32, GgmlType.F16, GgmlType.Q8_0).chain((type) =>
  fc.tuple(fc.integer({ min: 1, max: 3 }), fc.array(fc.integer({ min: 1, max: 3 }), { maxLength: 3 })).chain(([blocks, rest]) => {
    const dims = [blocks * GGML_BLOCK[type].elements, ...rest];
    return fc.uint8Array({ minLength: tensorByteSize(type, dims.reduce((a, b) => a * b, 1)), maxLength: tensorByteSize(type, dims.reduce((a, b) => a * b, 1)) })
      .map((data) => ({ dims, type, data }));
  }));
const ggufContents = fc.tuple(
  fc.uniqueArray(fc.tuple(fc.string({ unit: "grapheme", minLength: 1, maxLength: 16 }).filter((k) => k !== "general.alignment"), ggufValue), { selector: ([key]) => key, maxLength: 8 }),
  fc.uniqueArray(fc.tuple(fc.string({ unit: "grapheme", minLength: 1, maxLength: 16 }), tensorToWrite), { selector: ([name]) => name, maxLength: 4 }),
  fc.constantFrom(undefined, 8, 32, 64),
).map(([metadata, tensors, alignment]) => ({
  metadata: [...metadata, ...(alignment === undefined ? [] : [["general.alignment", { type: GgufValueType.UINT32, value: alignment }] as const])] as [string, GgufValue][],
  tensors: tensors.map(([name, tensor]) => ({ name, ...tensor })),
}));

test("GGUF: any header the writer can write reads back the same (metadata, tensor table, offsets)", () => {
  fuzz("GGUF write→read round trip", 150, [ggufContents], ({ metadata, tensors }) => {
    const file = readGguf(scratch("roundtrip.gguf", encodeGguf(metadata, tensors)));
    assert.equal([...file.metadata.entries()].map(([key, value]) => [key, value.type, value.value]), metadata.map(([key, value]) => [key, value.type, value.value]));
    assert.equal(file.tensors.map((t) => [t.name, t.dims, t.type]), tensors.map((t) => [t.name, t.dims, t.type]));
  });
});

test("GGUF: a cut, overwritten, stretched or padded header is read or refused with a BenchError, never a crash", () => {
  const valid = encodeGguf([["general.architecture", { type: GgufValueType.STRING, value: "llama" }], ["a.list", { type: GgufValueType.ARRAY, itemType: GgufValueType.UINT32, value: [1, 2, 3] }]],
    [{ name: "t", dims: [32, 2], type: GgmlType.Q8_0, data: new Uint8Array(tensorByteSize(GgmlType.Q8_0, 64)) }]);
  fuzz("GGUF header bytes (synthetic file)", 300, [fc.oneof(mutation(valid.length), fc.uint8Array({ maxLength: 64 }))], (edit) => {
    const bytes = edit instanceof Uint8Array ? edit : applyMutation(valid, edit);
    valueOrBenchError(() => readGguf(scratch("mutated.gguf", bytes)));
  });
});

test("GGUF: a real fixture model with a damaged header: readGguf, the llama metadata check and the tokenizer fingerprint answer or refuse", async () => {
  const model = readFileSync((await resolveModel("tiny-random:F32")).path);
  const headerBytes = readGguf((await resolveModel("tiny-random:F32")).path).dataOffset;
  const header = new Uint8Array(model.subarray(0, headerBytes));
  fuzz("GGUF metadata of a real model (llama checks, tokenizer)", 200, [mutation(header.length)], (edit) => {
    const path = scratch("model.gguf", Buffer.concat([applyMutation(header, edit), model.subarray(headerBytes)]));
    valueOrBenchError(() => {
      const file = readGguf(path);
      validateLlamaMetadata(file, path);
      return tokenizerFingerprint(file);
    });
  });
});

// ---- .npy ---------------------------------------------------------------------------------------

const npyArray = fc.tuple(fc.constantFrom("<i4" as const, "<f4" as const), fc.array(fc.integer({ min: 0, max: 4 }), { minLength: 1, maxLength: 3 })).chain(([dtype, shape]) => {
  const count = shape.reduce((a, b) => a * b, 1);
  const values = dtype === "<i4" ? fc.array(fc.integer(), { minLength: count, maxLength: count }).map((v) => Int32Array.from(v))
    : fc.array(fc.float(), { minLength: count, maxLength: count }).map((v) => Float32Array.from(v));
  return values.map((data) => ({ dtype, shape, data }));
});
const readNpy = (path: string, dtype: "<i4" | "<f4", rank: number) => (dtype === "<i4" ? readNpyInt32(path, rank) : readNpyFloat32(path, rank));

test(".npy: every array encodeNpy writes reads back bit for bit with its shape", () => {
  fuzz(".npy write→read round trip", 200, [npyArray], ({ dtype, shape, data }) => {
    const read = readNpy(scratch("a.npy", encodeNpy(data, shape)), dtype, shape.length);
    assert.equal(read.shape, shape);
    assert.equal(new Uint8Array(read.data.buffer, read.data.byteOffset, read.data.byteLength), new Uint8Array(data.buffer));
  });
});

/** A .npy built around a header dict we choose: unaligned data, odd shapes, other dtypes and versions. */
const npyWithHeader = fc.record({
  major: fc.constantFrom(0, 1, 2, 3, 4),
  descr: fc.constantFrom("<i4", "<f4", ">i4", "|u1", "<f8", "<U3"),
  fortran: fc.constantFrom("True", "False", "maybe"),
  shape: fc.oneof(fc.array(fc.integer({ min: -2, max: 5 }).map(String), { maxLength: 3 }), fc.array(fc.constantFrom("2.5", "1e1", "0x2", "", " ", "NaN"), { maxLength: 3 })),
  pad: fc.nat({ max: 7 }),
  data: fc.uint8Array({ maxLength: 64 }),
}).map(({ major, descr, fortran, shape, pad, data }) => {
  const dict = `{'descr': '${descr}', 'fortran_order': ${fortran}, 'shape': (${shape.join(", ")}${shape.length === 1 ? "," : ""}), }${" ".repeat(pad)}\n`;
  const size = major === 1 ? [dict.length & 0xff, dict.length >> 8] : [dict.length & 0xff, dict.length >> 8, 0, 0];
  return new Uint8Array([0x93, ...Buffer.from("NUMPY"), major, 0, ...size, ...Buffer.from(dict, "latin1"), ...data]);
});

test(".npy: damaged files and odd headers (unaligned data, fractional shapes, other dtypes and versions) are read or refused with a BenchError", () => {
  const valid = encodeNpy(Int32Array.from([1, 2, 3, 4, 5, 6]), [2, 3]);
  fuzz(".npy bytes and headers", 400, [fc.oneof(mutation(valid.length), npyWithHeader, fc.uint8Array({ maxLength: 40 })), fc.constantFrom("<i4" as const, "<f4" as const), fc.integer({ min: 1, max: 3 })], (edit, dtype, rank) => {
    const bytes = edit instanceof Uint8Array ? edit : applyMutation(valid, edit);
    const read = valueOrBenchError(() => readNpy(scratch("m.npy", bytes), dtype, rank));
    if (read instanceof BenchError) return;
    assert.is(read.data.length, read.shape.reduce((a, b) => a * b, 1), "the values fill the shape exactly");
    assert.ok(read.shape.every((d) => Number.isInteger(d) && d >= 0), "whole-number dims");
  });
});

test("regression: a .npy whose header does not pad the data to a multiple of 4 reads (npyjs threw a RangeError)", () => {
  const dict = "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }  \n";
  const bytes = new Uint8Array([0x93, ...Buffer.from("NUMPY"), 1, 0, dict.length, 0, ...Buffer.from(dict), 1, 0, 0, 0, 2, 0, 0, 0]);
  assert.is.not((10 + dict.length) % 4, 0);
  assert.equal([...readNpyInt32(scratch("unaligned.npy", bytes), 1).data], [1, 2]);
});

test("regression: a .npy shape of (2.5, 2) is refused, not read as 5 values", () => {
  const dict = "{'descr': '<i4', 'fortran_order': False, 'shape': (2.5, 2), }      \n";
  const bytes = new Uint8Array([0x93, ...Buffer.from("NUMPY"), 1, 0, dict.length, 0, ...Buffer.from(dict), ...new Uint8Array(20)]);
  assert.throws(() => readNpyInt32(scratch("fraction.npy", bytes), 2), (error: Error) => error instanceof BenchError && /not a tuple of whole numbers/.test(error.message));
});

// ---- suites, baselines, goldens manifests -------------------------------------------------------

const builtInSuites = [...readdirSync(SUITES_DIR).filter((f) => f.endsWith(".json")).map((f) => join(SUITES_DIR, f)),
  ...readdirSync(KERNELS_DIR).filter((f) => f.endsWith(".json")).map((f) => join(KERNELS_DIR, f))];
const json = (path: string): unknown => JSON.parse(readFileSync(path, "utf8"));

test("suite JSON: every built-in suite, edited anywhere (values replaced, keys dropped or added), loads or is refused with a BenchError", () => {
  for (const path of builtInSuites) {
    const name = path.split("/").pop()!;
    fuzz("suite JSON (all built-in suites, mutated)", 40, [mutatedJson(json(path))], (document) => {
      const suite = valueOrBenchError(() => loadSuite(scratch(name, JSON.stringify(document))));
      if (!(suite instanceof BenchError)) assert.ok(Array.isArray(suite.arms));
    });
  }
  fuzz("suite JSON (arbitrary text)", 100, [fc.oneof(fc.string(), fc.json())], (text) => {
    valueOrBenchError(() => loadSuite(scratch("any.json", text)));
  });
});

test("baselines: the shipped baseline, edited anywhere, is read or refused with a BenchError", () => {
  const shipped = join(PACKAGE_ROOT, "reports", "baselines", "embedded-default.json");
  fuzz("baseline JSON (mutated)", 200, [fc.oneof(mutatedJson(json(shipped)), fc.json().map((text) => JSON.parse(text) as unknown))], (document) => {
    valueOrBenchError(() => readBaseline(scratch("baseline.json", JSON.stringify(document))));
  });
});

test("goldens: an edited manifest (hashes, shapes, counts, file list) is read or refused with a BenchError", () => {
  const source = join(GOLDENS_DIR, "tiny-random.F32", "parity16");
  const directory = join(work.path, "goldens");
  cpSync(source, directory, { recursive: true });
  const manifest = json(join(source, "manifest.json"));
  assert.ok(!(valueOrBenchError(() => readGoldens(directory)) instanceof BenchError), "the shipped goldens read");
  fuzz("goldens manifest (mutated, read with its arrays)", 150, [mutatedJson(manifest)], (document) => {
    writeFileSync(join(directory, "manifest.json"), JSON.stringify(document));
    valueOrBenchError(() => readGoldens(directory));
  });
  copyFileSync(join(source, "manifest.json"), join(directory, "manifest.json"));
});

// ---- SSE ----------------------------------------------------------------------------------------

const sseEvent = fc.oneof(
  fc.record({ text: fc.string({ maxLength: 6 }), ids: fc.option(fc.array(fc.nat(), { maxLength: 3 }), { nil: undefined }) })
    .map(({ text, ids }) => ({ choices: [{ index: 0, text, ...(ids === undefined ? {} : { token_ids: ids }) }] })),
  fc.string({ maxLength: 6 }).map((content) => ({ choices: [{ index: 0, delta: { content } }] })),
  fc.record({ prompt_tokens: fc.nat(), completion_tokens: fc.nat() }).map((usage) => ({ choices: [], usage })),
);
const sseStream = fc.tuple(fc.array(sseEvent, { maxLength: 8 }), fc.constantFrom("\n", "\r\n"), fc.boolean()).map(([events, eol, comments]) =>
  `${events.map((e) => `${comments ? `: keep-alive${eol}` : ""}data: ${JSON.stringify(e)}${eol}${eol}`).join("")}data: [DONE]${eol}${eol}`);
const cuts = (length: number) => fc.uniqueArray(fc.integer({ min: 1, max: Math.max(1, length - 1) }), { maxLength: 6 }).map((c) => c.sort((a, b) => a - b));

function readStream(chunks: readonly Buffer[]): OpenAiSseReader {
  const reader = new OpenAiSseReader();
  chunks.forEach((chunk, i) => reader.push(chunk, BigInt(i)));
  return reader;
}
const split = (bytes: Buffer, at: readonly number[]) => [0, ...at].map((from, i) => bytes.subarray(from, [...at, bytes.length][i]));

test("SSE: a valid stream cut into any chunks reads the same tokens, usage and [DONE] as in one piece", () => {
  fuzz("SSE stream (valid, re-chunked)", 300, [sseStream.chain((text) => fc.tuple(fc.constant(Buffer.from(text)), cuts(Buffer.byteLength(text))))], ([bytes, at]) => {
    const whole = readStream([bytes]);
    const chunked = readStream(split(bytes, at));
    assert.is(whole.failure, undefined);
    assert.is(chunked.failure, undefined);
    assert.is(chunked.clientTokens, whole.clientTokens);
    assert.equal(chunked.usage, whole.usage);
    assert.is(chunked.contentEventsNs.length, whole.contentEventsNs.length);
    assert.ok(chunked.doneNs !== null);
  });
});

test("SSE: any bytes, any JSON in data lines, in any chunks: the reader reports a failure or reads on, and never throws", () => {
  const dataLine = fc.jsonValue({ maxDepth: 3 }).map((v) => `data: ${JSON.stringify(v)}\n\n`);
  const shaped = fc.oneof(fc.constantFrom("null", "[]", "3", '{"error":null}', '{"choices":[null]}', '{"choices":"x"}', '{"usage":1}', '{"choices":[{"delta":null}]}').map((p) => `data: ${p}\n\n`), dataLine);
  const bytes = fc.oneof(fc.array(shaped, { maxLength: 5 }).map((lines) => Buffer.from(lines.join(""))), fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b)));
  fuzz("SSE stream (arbitrary bytes and events)", 400, [bytes.chain((b) => fc.tuple(fc.constant(b), cuts(b.length)))], ([raw, at]) => {
    const reader = readStream(split(raw, at));
    if (reader.failure !== undefined) assert.ok(["malformed_sse", "stream_error"].includes(reader.failure.status) && typeof reader.failure.error === "string");
    assert.ok(Number.isFinite(reader.clientTokens));
  });
});

test("regression: SSE events whose JSON is null, or whose choice or error is null, are a malformed stream, not a TypeError", () => {
  for (const payload of ["null", '{"choices":[null]}', '{"error":null,"choices":[{"text":"a"}]}', '{"usage":{"prompt_tokens":"3"}}']) {
    const reader = readStream([Buffer.from(`data: ${payload}\n\n`)]);
    if (payload.startsWith('{"error"')) assert.is(reader.clientTokens, 1, payload);
    else assert.is(reader.failure?.status, "malformed_sse", payload);
  }
});

// ---- runner protocol lines ----------------------------------------------------------------------

const hello = fc.record({
  protocol: fc.oneof(fc.constant(RUNNER_PROTOCOL), fc.jsonValue({ maxDepth: 1 })),
  version: fc.oneof(fc.constant(RUNNER_PROTOCOL_VERSION), fc.jsonValue({ maxDepth: 1 })),
  capabilities: fc.oneof(fc.array(fc.constantFrom("tokenize", "greedy", "kernel", "kernel_time")), fc.jsonValue({ maxDepth: 2 })),
  engine: fc.jsonValue({ maxDepth: 1 }),
  settings: fc.jsonValue({ maxDepth: 2 }),
  kernel_ops: fc.jsonValue({ maxDepth: 3 }),
  error: fc.oneof(fc.constant(undefined), fc.jsonValue({ maxDepth: 1 })),
}, { requiredKeys: ["protocol", "version", "capabilities"] });

test("runner protocol: any stdout line is a JSON object or a BenchError; any hello is accepted or refused with a BenchError; any answer is read", () => {
  const line = fc.oneof(fc.string(), fc.json(), hello.map((h) => JSON.stringify(h)),
    fc.jsonValue().map((v) => JSON.stringify({ id: 1, result: v }).replace(/"(NaN|-?Infinity)"/g, "$1")),
    fc.constantFrom('{"id": 1, "result": [NaN, Infinity, -Infinity]}', '{"id": 1, "error": null}', '{"id": null}', "[]", "null"));
  fuzz("runner protocol lines", 600, [line], (text) => {
    const message = valueOrBenchError(() => parseRunnerLine(text));
    if (message instanceof BenchError) return;
    valueOrBenchError(() => checkHello(message));
    const answer = readAnswer(message);
    if (answer.kind === "error") assert.type(answer.message, "string");
  });
});

test("runner protocol: an answer object round-trips through its line, and Python's bare NaN/Infinity arrive as strings", () => {
  fuzz("runner protocol answers (round trip)", 300, [fc.nat(), fc.jsonValue()], (id, result) => {
    const answer = readAnswer(parseRunnerLine(JSON.stringify({ id, result })));
    assert.equal(answer, { id, kind: "result", result: JSON.parse(JSON.stringify(result)) });
  });
  assert.equal(readAnswer(parseRunnerLine('{"id": 2, "result": {"lp": [NaN, -Infinity]}}')), { id: 2, kind: "result", result: { lp: ["NaN", "-Infinity"] } });
});

test("regression: a runner answer with \"error\": null is an error answer, not a TypeError that kills the harness", () => {
  assert.equal(readAnswer(parseRunnerLine('{"id": 4, "error": null}')), { id: 4, kind: "error", message: "null", unsupported: false });
});

// ---- HTTP request bodies ------------------------------------------------------------------------

const validCompletion = { prompt: "Hello", max_tokens: 2, temperature: 0, stream: false, stop: ["x"], logprobs: 2, echo: true, seed: 1, stream_options: { include_usage: true } };
const validChat = { messages: [{ role: "user", content: "Hi" }], max_tokens: 2, temperature: 0 };
const requestBody = fc.oneof(mutatedJson(validCompletion), mutatedJson(validChat), fc.jsonValue({ maxDepth: 3 }));

test("server request validation: any JSON body is parsed or refused with a BadRequest naming a reason, for completions and chat", () => {
  fuzz("HTTP request bodies (validator)", 600, [requestBody], (body) => {
    for (const parse of [parseCompletion, parseChat]) {
      try {
        const parsed = parse(body, { maxTokensCap: 64 });
        assert.ok(Number.isInteger(parsed.maxTokens) && parsed.maxTokens >= 0 && parsed.maxTokens <= 64);
      } catch (error) {
        if (!(error instanceof BadRequest)) throw error;
        assert.ok(error.message.length > 0 && (error.param === null || typeof error.param === "string"));
      }
    }
  });
});

test("server over HTTP: arbitrary bodies to every POST route are answered 200 or 4xx with an error object, never 500, never a hang", async () => {
  const model = await resolveModel("tiny-random:F32");
  const server = await startServer({
    host: "127.0.0.1", port: 0, modelId: "tiny-random:F32", maxPromptTokens: 64, maxTokensCap: 4,
    validation: { validated: false, note: "fuzz" }, modelPath: model.path, slots: 2, maxQueue: 2, contextSize: 128,
    threads: 1, flashAttention: false, kvCacheType: "F32", batchSize: 64, promptCache: true, prefillChunk: 64, hostCacheMiB: 64, simulateBootSeconds: 0,
  });
  try {
    await server.ready;
    const base = `http://127.0.0.1:${server.port}`;
    // Regression: one id outside the vocabulary made llama.cpp abort the whole server (std::out_of_range).
    for (const [route, tokens] of [["/detokenize", [4294967295]], ["/token_kinds", [-1]], ["/detokenize", [354, 1]]] as const) {
      const response = await httpCall(`${base}${route}`, { body: { tokens } });
      assert.is(response.status, 400, `${route} ${JSON.stringify(tokens)}: ${response.text}`);
      assert.match(response.text, /tokens must be an array of ids from 0 to \d+/);
    }
    assert.is((await httpCall(`${base}/health`)).status, 200, "the server survived");
    const routes = ["/v1/completions", "/v1/chat/completions", "/apply-template", "/tokenize", "/detokenize", "/token_kinds"];
    const tokenBody = fc.oneof(fc.jsonValue({ maxDepth: 2 }), fc.record({ content: fc.jsonValue({ maxDepth: 1 }) }), fc.record({ tokens: fc.array(fc.oneof(fc.integer({ min: -5, max: 400 }), fc.integer(), fc.double())) }));
    const raw = fc.oneof(requestBody.map((b) => JSON.stringify(b)), tokenBody.map((b) => JSON.stringify(b)), fc.string({ maxLength: 40 }));
    await fuzzAsync("HTTP request bodies (real server, loopback)", 40, [fc.constantFrom(...routes), raw], async (route, rawBody) => {
      const response = await httpCall(`${base}${route}`, { rawBody, signal: AbortSignal.timeout(10_000) });
      assert.ok([200, 400, 413, 429].includes(response.status), `${route} ${rawBody} → ${response.status} ${response.text}`);
      if (response.status !== 200) assert.type((JSON.parse(response.text) as { error: { message: unknown } }).error.message, "string");
    });
    const text = (await httpCall(`${base}/metrics`)).text;
    assert.ok(parsePrometheusText(text).size > 0, "our own /metrics parses");
  } finally {
    await server.shutdown();
  }
});

// ---- Prometheus text ----------------------------------------------------------------------------

const metricName = fc.stringMatching(/^[a-zA-Z_:][a-zA-Z0-9_:]{0,12}$/);
const labelValue = fc.string({ maxLength: 8 }).map((v) => v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n"));
const sample = fc.tuple(metricName, fc.array(fc.tuple(fc.stringMatching(/^[a-zA-Z_][a-zA-Z0-9_]{0,6}$/), labelValue), { maxLength: 3 }), fc.oneof(fc.double({ noNaN: true }), fc.constant(NaN)), fc.option(fc.integer(), { nil: undefined }))
  .map(([name, labels, value, timestamp]) => ({
    key: `${name}${labels.length === 0 ? "" : `{${labels.map(([k, v]) => `${k}="${v}"`).join(",")}}`}`,
    value,
    line: (key: string) => `${key} ${value === Infinity ? "+Inf" : value === -Infinity ? "-Inf" : String(value)}${timestamp === undefined ? "" : ` ${timestamp}`}`,
  }));

test("/metrics text: any exposition we write reads back sample for sample (labels with } and escaped quotes included)", () => {
  fuzz("/metrics text (round trip)", 300, [fc.uniqueArray(sample, { selector: (s) => s.key, maxLength: 8 })], (samples) => {
    const text = ["# HELP x y", "# TYPE x counter", ...samples.map((s) => s.line(s.key))].join("\n");
    const parsed = parsePrometheusText(text);
    assert.equal([...parsed.keys()], samples.map((s) => s.key));
    for (const s of samples) assert.ok(Object.is(parsed.get(s.key), s.value) || parsed.get(s.key) === s.value, s.key);
  });
});

test("/metrics text: any text is parsed or refused with a BenchError naming the line", () => {
  fuzz("/metrics text (arbitrary)", 400, [fc.oneof(fc.string(), fc.array(fc.oneof(fc.string({ maxLength: 30 }), sample.map((s) => s.line(s.key))), { maxLength: 6 }).map((l) => l.join("\n")))], (text) => {
    valueOrBenchError(() => parsePrometheusText(text));
  });
});

test("regression: a label value holding } reads (the old pattern refused valid Prometheus text)", () => {
  assert.is(parsePrometheusText('requests_total{path="/a}b",q="say \\"hi\\""} 3').get('requests_total{path="/a}b",q="say \\"hi\\""}'), 3);
});

test.run();
