// Child process of forced-variant.ts: loads llama.cpp the way a run does and prints, as one JSON
// line, the ggml CPU library it mapped (or why it could not load).
import { loadedCpuVariant } from "./cpu-identity.js";

try {
  const { getLlama, LlamaLogLevel } = await import("node-llama-cpp");
  const llama = await getLlama({ gpu: false, build: "never", maxThreads: 1, logLevel: LlamaLogLevel.error });
  console.log(JSON.stringify({ loaded: loadedCpuVariant() ?? "none" }));
  await llama.dispose();
} catch (error) {
  console.log(JSON.stringify({ error: (error as Error).message.split("\n")[0] }));
}
