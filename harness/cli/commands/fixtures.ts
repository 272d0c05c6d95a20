import type { Command } from "commander";
import { statSync } from "node:fs";
import { ensureFixture, FIXTURE_NAMES, fixtureQuants } from "../../fixtures/registry.js";
import { sha256File } from "../../io/sha256.js";
import { progress, say } from "../output.js";

export function registerFixtures(program: Command): void {
  program
    .command("fixtures")
    .description("build the fixture models (deterministic tiny GGUF files) into the cache and list them")
    .option("--only <fixture>", "build one fixture (default: all)")
    .action(async (options: { only?: string }) => {
      const fixtures = options.only === undefined ? FIXTURE_NAMES : [options.only];
      for (const fixture of fixtures) {
        for (const quant of fixtureQuants(fixture)) {
          progress(`building ${fixture}:${quant}`);
          const path = await ensureFixture(fixture, quant);
          say(`${`${fixture}:${quant}`.padEnd(36)} ${(await sha256File(path)).slice(0, 16)}  ${String(statSync(path).size).padStart(9)} B  ${path}`);
        }
      }
    });
}
