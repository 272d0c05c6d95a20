import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { writeFileAtomic } from "../io/atomic-write.js";
import { sha256Bytes } from "../io/sha256.js";
import { PACKAGE_ROOT } from "../paths.js";
import type { SystemUnderTest, TeacherForcedRequest, TopK } from "../sut/types.js";

/**
 * Teacher-forced oracle rows keyed by content hash (oracle artifact, settings, ids, k): the gap of
 * a divergent SUT path is computed once per distinct path, across runs. Wraps any oracle SUT.
 */
export class TeacherForcedCache {
  private readonly memory = new Map<string, TopK[]>();

  constructor(private readonly oracle: SystemUnderTest, private readonly directory = join(process.env.BENCH_CACHE_DIR ?? join(PACKAGE_ROOT, ".cache"), "oracle")) {}

  private key(request: TeacherForcedRequest): string {
    const { modelSha256, settings, engine } = this.oracle.provenance;
    return sha256Bytes(JSON.stringify({ modelSha256, settings, engine, prompt: request.promptIds, continuation: request.continuationIds, k: request.k }));
  }

  async rows(requests: readonly TeacherForcedRequest[]): Promise<TopK[][]> {
    const keys = requests.map((request) => this.key(request));
    const missing: number[] = [];
    for (const [i, key] of keys.entries()) {
      if (this.memory.has(key)) continue;
      const path = join(this.directory, `${key}.json`);
      if (existsSync(path)) this.memory.set(key, JSON.parse(readFileSync(path, "utf8")) as TopK[]);
      else missing.push(i);
    }
    if (missing.length > 0) {
      if (this.oracle.teacherForcedTopK === undefined) throw new Error(`${this.oracle.label} cannot teacher-force`);
      const computed = await this.oracle.teacherForcedTopK(missing.map((i) => requests[i]));
      for (const [j, i] of missing.entries()) {
        this.memory.set(keys[i], computed[j]);
        await writeFileAtomic(join(this.directory, `${keys[i]}.json`), JSON.stringify(computed[j]));
      }
    }
    return keys.map((key) => this.memory.get(key)!);
  }
}
