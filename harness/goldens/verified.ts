import { existsSync } from "node:fs";
import { join } from "node:path";
import { BenchError } from "../errors.js";
import { resolveModel } from "../fixtures/registry.js";
import { suiteArgument } from "../suites/load.js";
import { goldensSuiteName, type ParitySuite } from "../suites/parity-suite.js";
import { goldensDir, promptTextsSha256, readGoldens } from "./goldens.js";
import { goldensModelDirName } from "./make.js";
import { assertGoldensMatchModel } from "./model-check.js";

/** Loads a suite's goldens on one of its oracle models (default: the suite's) and proves they belong to that model and the prompts. */
export async function loadVerifiedGoldens(suite: ParitySuite, oracleReference = suite.oracle.model) {
  const oracleModel = await resolveModel(oracleReference);
  const filedUnder = goldensSuiteName(suite);
  const directory = goldensDir(goldensModelDirName(oracleModel), filedUnder);
  // Borrowed goldens are made by the suite that lends them; a suite's own, by the name or path that finds it again.
  const makeWith = suite.goldens_of !== undefined ? filedUnder : suiteArgument(suite);
  if (!existsSync(join(directory, "manifest.json"))) {
    throw new BenchError(`no goldens for suite ${filedUnder} on ${oracleModel.id}`, { file: directory, fix: `make them: bench goldens make --suite ${makeWith}` });
  }
  const goldens = readGoldens(directory);
  await assertGoldensMatchModel(goldens, oracleModel);
  if (goldens.manifest.prompts.texts_sha256 !== null && goldens.manifest.prompts.texts_sha256 !== promptTextsSha256(suite.prompts)) {
    throw new BenchError("the suite's prompts changed since its goldens were made", { file: join(directory, "manifest.json"), field: "prompts.texts_sha256", fix: `re-make them: bench goldens make --suite ${makeWith}` });
  }
  if (goldens.manifest.T !== suite.max_tokens) {
    throw new BenchError(`goldens hold T=${goldens.manifest.T}, the suite asks ${suite.max_tokens}`, { file: join(directory, "manifest.json"), field: "T", fix: `re-make them: bench goldens make --suite ${makeWith}` });
  }
  return { goldens, oracleModel };
}
