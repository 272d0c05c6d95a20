import { spawn, type ChildProcess } from "node:child_process";
import { createServer } from "node:net";
import { BenchError } from "../errors.js";
import { trackChild } from "./child-process.js";
import { waitHealthy, type ManagedServer } from "./managed-server.js";

/** A loopback port nobody listens on now (the server binds it a moment later; a race there fails its boot clearly). */
async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve, reject) => probe.once("error", reject).listen(0, "127.0.0.1", resolve));
  const port = (probe.address() as { port: number }).port;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

/**
 * Starts someone else's server from its argv (no shell), `{port}` filled with a free loopback port,
 * and waits for its /health to answer 200 — the convention llama.cpp's and vLLM's servers share.
 */
export async function startServerCommand(argv: readonly string[], options: {
  label: string; bootTimeoutS: number; onProgress?: (message: string) => void; onProcess?: (child: ChildProcess, commandLine: string) => void;
  /** The arm's stop: the boot is given up on at once and the server stopped (waitHealthy). */
  signal?: AbortSignal; shutdownGraceS?: number;
}): Promise<ManagedServer & { readonly argv: readonly string[] }> {
  const port = await freePort();
  const filled = argv.map((part) => part.replaceAll("{port}", String(port)));
  if (filled[0] === undefined || filled[0] === "") throw new BenchError(`arm "${options.label}": an empty server command`, { field: "command", fix: "give the server's argv, e.g. [\"llama-server\", \"-m\", \"{model}\", \"--port\", \"{port}\"]" });
  const child = trackChild(spawn(filled[0], filled.slice(1), { stdio: ["ignore", "ignore", "pipe"] }));
  options.onProcess?.(child, filled.join(" "));
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => { stderr = (stderr + chunk.toString()).slice(-4000); });
  const spawned = await new Promise<Error | undefined>((resolve) => {
    child.once("spawn", () => resolve(undefined));
    child.once("error", resolve);
  });
  if (spawned !== undefined) throw new BenchError(`arm "${options.label}": cannot start ${filled[0]}: ${spawned.message}`, { field: "command", fix: "check the server command's path" });
  const baseUrl = `http://127.0.0.1:${port}`;
  const bootObservations = await waitHealthy(child, baseUrl, {
    label: options.label, bootTimeoutS: options.bootTimeoutS, onProgress: options.onProgress, signal: options.signal, shutdownGraceS: options.shutdownGraceS,
    stderrTail: () => stderr.trim().split("\n").slice(-3).join(" | "), fix: `run it by hand to see why: ${filled.join(" ")}`,
  });
  return { child, baseUrl, bootObservations, argv: filled };
}
