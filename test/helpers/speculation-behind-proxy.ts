import { readFileSync } from "node:fs";
import { join } from "node:path";
import { SUITES_DIR } from "../../harness/paths.js";

interface SpeculativeSuiteFile {
  readonly arms: readonly { readonly label: string; readonly command: readonly string[] }[];
}

/** The built-in suite's arm of our server with a draft model, unproxied: the arm a proxied one is a copy of. */
export const OUR_DRAFT_ARM = "bench serve draft model";

/**
 * The built-in speculative suite with one arm per FAKE fault, labelled `FAKE <fault>`: its "bench
 * serve draft model" arm (our server with a draft model) behind the FAKE proxy that plants the fault
 * (fake-speculation-proxy.ts), each arm with its own server and proxy. With `heldOpenDirectory`, each
 * proxy writes `<fault>.held` there when stopped: how many requests it left unanswered were still
 * open. With `keepOurArm`, the unproxied arm runs last. A test writes it to a file, with its own fields over these.
 */
export function speculativeSuiteBehindProxy(faults: readonly string[], options: { readonly heldOpenDirectory?: string; readonly keepOurArm?: boolean } = {}): Record<string, unknown> {
  const suite = JSON.parse(readFileSync(join(SUITES_DIR, "speculative.json"), "utf8")) as SpeculativeSuiteFile;
  const arm = suite.arms.find((a) => a.label === OUR_DRAFT_ARM)!;
  const report = (fault: string) => (options.heldOpenDirectory === undefined ? [] : ["--held-open-file", join(options.heldOpenDirectory, `${fault}.held`)]);
  const proxied = (fault: string) => ["node", "{bench}/dist/test/helpers/fake-speculation-proxy.js", "--listen", "{port}", "--fault", fault, ...report(fault), "--", ...arm.command.map((part) => (part === "{port}" ? "{inner-port}" : part))];
  const arms = faults.map((fault) => ({ ...arm, label: `FAKE ${fault}`, command: proxied(fault) }));
  return { ...suite, $schema: undefined, arms: options.keepOurArm === true ? [...arms, arm] : arms };
}
