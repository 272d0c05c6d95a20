/**
 * npm run bench:budget-27b — writes Qwen3.6-27B's header-only GGUF (harness/budget/qwen36-27b-header.ts)
 * to the model cache and prints `bench budget` for it under each shipped policy on one 32 GB P150:
 * the seed's arithmetic (packed, twins, embedding/head, decode transient, trace demand per chain).
 */
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { encodeQwen36_27bHeader } from "../harness/budget/qwen36-27b-header.js";
import { writeFileAtomic } from "../harness/io/atomic-write.js";
import { modelCacheDir, PACKAGE_ROOT } from "../harness/paths.js";

const path = join(modelCacheDir(), "qwen36-27b.header-only.gguf");
await writeFileAtomic(path, encodeQwen36_27bHeader());
for (const policy of ["tt-twins", "tt-packed-chunked"]) {
  const result = spawnSync(process.execPath, [join(PACKAGE_ROOT, "bin", "bench.js"), "budget", path, "--policy", policy, "--device", "p150-32gb", "--context", "4096", "--slots", "1", "--batch", "32"], { encoding: "utf8" });
  process.stdout.write(`$ bench budget ${path.replace(PACKAGE_ROOT + "/", "")} --policy ${policy} --device p150-32gb --context 4096 --slots 1 --batch 32   (exit ${result.status})\n${result.stdout}${result.stderr}\n`);
}
