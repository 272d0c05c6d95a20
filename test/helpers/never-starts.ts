/**
 * FAKE, for hang tests only: imported ahead of a process's own code (`NODE_OPTIONS=--import <this file>`),
 * it holds the process before its first line of work, alive and silent — a server wedged before it
 * listens, which no real one becomes on demand.
 */
setInterval(() => undefined, 2 ** 30);
await new Promise<never>(() => undefined);
