import type { Dialect, DialectClient, DialectOffer } from "./dialect.js";
import type { TokenKind } from "../types.js";

/**
 * Our own server's one extension no other dialect has a word for: /token_kinds, the kind of each
 * id (text, byte-fallback, unknown, control), which the needle suite needs to refuse needles a
 * tokenizer can only spell in byte pieces. Its /tokenize speaks llama.cpp's dialect.
 */
export const BRINGUP_BENCH_DIALECT: Dialect = {
  name: "bringup-bench",
  offer(client: DialectClient): DialectOffer {
    return {
      inspectTokens: async (ids) => {
        const { kinds } = await client.json<{ kinds?: unknown }>("/token_kinds", { tokens: ids });
        const known: readonly TokenKind[] = ["text", "byte", "unknown", "control"];
        if (!Array.isArray(kinds) || kinds.length !== ids.length || !kinds.every((k) => known.includes(k as TokenKind))) throw new Error(`/token_kinds answered ${JSON.stringify(kinds)?.slice(0, 80)}`);
        return kinds as TokenKind[];
      },
    };
  },
};
