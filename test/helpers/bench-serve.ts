/** The real `bench serve` as tests start it: a child on a free loopback port, and its health. */
import { setTimeout as sleep } from "node:timers/promises";
import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { httpCall } from "../../harness/sut/http-call.js";
import { PACKAGE_ROOT } from "../../harness/paths.js";
import { BENCH_BIN, withoutForceColor } from "./workspace.js";

export interface BenchServe {
  readonly child: ChildProcess;
  readonly url: string;
  readonly output: () => string;
  readonly exited: Promise<number | null>;
}

/** Starts `bench serve` reading validation runs from `runsDir`; resolves once it listens. */
export async function startBenchServe(runsDir: string, args: readonly string[]): Promise<BenchServe> {
  const child = spawn(process.execPath, [BENCH_BIN, "serve", "--port", "0", "--runs-dir", runsDir, ...args], { cwd: PACKAGE_ROOT, env: { ...withoutForceColor(process.env), CI: "1", NO_COLOR: "1" } });
  let output = "";
  child.stderr!.on("data", (chunk) => { output += chunk; });
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  const url = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on("line", (line) => {
      output += `${line}\n`;
      const match = /^listening on (\S+)$/.exec(line);
      if (match !== null) resolve(match[1]);
    });
    void exited.then((code) => reject(new Error(`bench serve exited ${code}: ${output}`)));
  });
  return { child, url, output: () => output, exited };
}

export async function waitHealthy(url: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if ((await httpCall(`${url}/health`)).status === 200) return;
    await sleep(50);
  }
  throw new Error("server never became healthy");
}
