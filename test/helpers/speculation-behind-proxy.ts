import { readFileSync } from "node:fs";
import { join } from "node:path";
import { SUITES_DIR } from "../../harness/paths.js";

interface SpeculativeSuiteFile {
  readonly arms: readonly { readonly label: string; readonly command: readonly string[] }[];
}

/**
 * The built-in speculative suite with one arm per FAKE fault, labelled `FAKE <fault>`: its "bench
 * serve draft model" arm (our server with a draft model) behind the FAKE proxy that plants the fault
 * (fake-speculation-proxy.ts), each arm with its own server and proxy. A test writes it to a file,
 * with its own fields over these.
 */
export function speculativeSuiteBehindProxy(faults: readonly string[]): Record<string, unknown> {
  const suite = JSON.parse(readFileSync(join(SUITES_DIR, "speculative.json"), "utf8")) as SpeculativeSuiteFile;
  const arm = suite.arms.find((a) => a.label === "bench serve draft model")!;
  const proxied = (fault: string) => ["node", "{bench}/dist/test/helpers/fake-speculation-proxy.js", "--listen", "{port}", "--fault", fault, "--", ...arm.command.map((part) => (part === "{port}" ? "{inner-port}" : part))];
  return { ...suite, $schema: undefined, arms: faults.map((fault) => ({ ...arm, label: `FAKE ${fault}`, command: proxied(fault) })) };
}
