import { mkdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { mkdir, rename, rm, writeFile } from "node:fs/promises";
import { dirname, join, basename } from "node:path";
import { randomBytes } from "node:crypto";

/** Writes a file so that readers see either the old content or the whole new content, never a part. */
export async function writeFileAtomic(path: string, data: Uint8Array | string): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  const temporary = join(dirname(path), `.${basename(path)}.tmp-${randomBytes(6).toString("hex")}`);
  try {
    await writeFile(temporary, data);
    await rename(temporary, path);
  } catch (error) {
    await rm(temporary, { force: true });
    throw error;
  }
}

/** The same, synchronously: for the last moment of a process ('exit' listeners cannot wait). */
export function writeFileAtomicSync(path: string, data: Uint8Array | string): void {
  mkdirSync(dirname(path), { recursive: true });
  const temporary = join(dirname(path), `.${basename(path)}.tmp-${randomBytes(6).toString("hex")}`);
  try {
    writeFileSync(temporary, data);
    renameSync(temporary, path);
  } catch (error) {
    rmSync(temporary, { force: true });
    throw error;
  }
}

/**
 * Fills a directory as a unit: `fill` writes into a sibling temporary directory, which then
 * replaces `path`. A crash leaves the previous directory (or nothing), never a half-written one.
 */
export async function writeDirectoryAtomic(path: string, fill: (directory: string) => Promise<void>): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  const temporary = join(dirname(path), `.${basename(path)}.tmp-${randomBytes(6).toString("hex")}`);
  const previous = `${temporary}-old`;
  await mkdir(temporary);
  try {
    await fill(temporary);
    await rename(path, previous).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== "ENOENT") throw error;
    });
    await rename(temporary, path);
    await rm(previous, { recursive: true, force: true });
  } catch (error) {
    await rm(temporary, { recursive: true, force: true });
    throw error;
  }
}
