import { basename } from "node:path";
import { resolveModel } from "../fixtures/registry.js";
import { sha256File } from "../io/sha256.js";
import type { GateLevel } from "../suites/parity-suite.js";
import { makeCell, type ArmScope, type CheckOutcome } from "./check.js";

/** The model file an arm's verdicts are about: its name, its sha256, and in words what it is (the goldens' model, the model the arm names). */
export interface ExpectedModel {
  readonly file: string;
  readonly sha256: string;
  readonly what: string;
}

/** The model file an arm names, as its identity check expects it (for arms held to no goldens: needles, sampling). */
export async function modelTheArmNames(arm: { readonly model: string }): Promise<ExpectedModel> {
  const model = await resolveModel(arm.model);
  return { file: basename(model.path), sha256: await sha256File(model.path), what: `the model the arm names (${arm.model})` };
}

/**
 * The one change that lets a SUT of this kind name its model. Runners written before the hello
 * carried the model are still protocol version 1: without it their arm exits 77, and the line says why.
 */
export function howToSayWhatWasLoaded(kind: string): string {
  if (kind === "stdio") return "pass model_path=PATH to bench_runner.serve(...) (it hashes the file into the hello), or send model_sha256 and model_file in the hello yourself";
  if (kind === "http") return "serve the model's sha256 as model_sha256 (and model_file) in /v1/models, or its path as model_path in /props";
  return "have the SUT report the sha256 of the model file it loaded";
}

/**
 * The SUT must run the artifact its verdicts are about: a mismatch is its own failure, named with
 * both files and hashes, not a parity or needle FAIL whose cause must be guessed. A SUT that cannot
 * say what it loaded is unverified: SKIPPED, never passed. `heldTo` ends a passing summary (what the
 * artifact is held to, e.g. "the goldens' artifact").
 */
export async function identityOutcome(scope: ArmScope, gate: GateLevel, expected: ExpectedModel, heldTo: string): Promise<CheckOutcome> {
  const { sut, arm, emit } = scope;
  const loaded = sut.provenance.loadedModel;
  const record = async (status: "pass" | "fail" | "skip", detail: string) => emit({ kind: "cells", cells: [makeCell(scope, "identity", gate, { status, detail })] });
  if (loaded === undefined) {
    const reason = `unverified: ${sut.label} does not say which model file it loaded (${expected.what} is ${expected.file}, sha256 ${expected.sha256}); fix: ${howToSayWhatWasLoaded(sut.provenance.kind)}`;
    await record("skip", reason);
    return { status: "skip", reason };
  }
  const metrics = { loaded_sha256: loaded.sha256, loaded_file: loaded.file, expected_sha256: expected.sha256, expected_file: expected.file, reported_by: loaded.reportedBy };
  if (loaded.sha256 !== expected.sha256) {
    const summary = `${arm.label} identity: MISMATCH — ${loaded.reportedBy} says it runs ${loaded.file} (sha256 ${loaded.sha256}); ${expected.what} is ${expected.file} (sha256 ${expected.sha256}): this arm's verdicts are about another artifact`;
    await record("fail", summary);
    return { status: "fail", summary, metrics };
  }
  const summary = `${arm.label} identity: runs ${loaded.file} (sha256 ${loaded.sha256.slice(0, 16)}…, per ${loaded.reportedBy}), ${heldTo}`;
  await record("pass", summary);
  return { status: "pass", summary, metrics };
}
