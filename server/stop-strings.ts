/**
 * Where generated text must end for OpenAI's `stop` semantics, and how much of it may be streamed
 * now: text that could still become a stop string (a suffix that is a stop string's prefix) is held
 * back until the next token decides, so a stop string never reaches a client, even one that spans
 * tokens.
 */
export function scanStops(text: string, stops: readonly string[]): { readonly stopAt: number | undefined; readonly safeEnd: number } {
  let stopAt: number | undefined;
  for (const stop of stops) {
    const at = text.indexOf(stop);
    if (at >= 0 && (stopAt === undefined || at < stopAt)) stopAt = at;
  }
  if (stopAt !== undefined) return { stopAt, safeEnd: stopAt };
  let safeEnd = text.length;
  for (const stop of stops) {
    for (let length = Math.min(stop.length - 1, text.length); length > 0; length--) {
      if (text.endsWith(stop.slice(0, length))) {
        safeEnd = Math.min(safeEnd, text.length - length);
        break;
      }
    }
  }
  return { stopAt: undefined, safeEnd };
}
