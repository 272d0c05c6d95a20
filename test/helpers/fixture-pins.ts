import * as assert from "uvu/assert";
import { ensureFixture } from "../../harness/fixtures/registry.js";
import { sha256File } from "../../harness/io/sha256.js";
import type { QuantName } from "../../harness/quant/registry.js";

/** sha256 pins per fixture and quant: the fixtures are byte-identical on every machine. */
export type FixturePins = Record<string, Partial<Record<QuantName, string>>>;

/** Builds every pinned fixture variant in `cacheDir` and checks its bytes against its pin. */
export async function assertFixturesMatchPins(pins: FixturePins, cacheDir: string): Promise<void> {
  for (const [fixture, byQuant] of Object.entries(pins)) {
    for (const [quant, sha256] of Object.entries(byQuant)) {
      const path = await ensureFixture(fixture, quant as QuantName, cacheDir);
      assert.is(await sha256File(path), sha256, `${fixture}:${quant}`);
    }
  }
}
