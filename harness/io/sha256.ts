import { createHash } from "node:crypto";
import { createReadStream, statSync } from "node:fs";

const cache = new Map<string, string>();

/** sha256 of a file, streamed (model files can be tens of GB); memoised per path, size and mtime. */
export async function sha256File(path: string): Promise<string> {
  const stat = statSync(path);
  const key = `${path}\0${stat.size}\0${stat.mtimeMs}`;
  const known = cache.get(key);
  if (known !== undefined) return known;
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  const digest = hash.digest("hex");
  cache.set(key, digest);
  return digest;
}

export function sha256Bytes(data: Uint8Array | string): string {
  return createHash("sha256").update(data).digest("hex");
}
