/*
 * The token ids an answer says it is made of, in the shapes servers give them: `token_ids` on a
 * choice (ours, vLLM's return_token_ids), `logprobs.content[].id` (llama-server, completions and
 * chat), or the legacy completions logprobs' `token_ids` (ours). Pure: parsed JSON in, ids out.
 */

type Choice = { index?: number; text?: unknown; delta?: { content?: unknown } | null; message?: { content?: unknown }; token_ids?: unknown; logprobs?: { content?: { id?: unknown }[] | null; token_ids?: unknown } | null };

const idList = (value: unknown): number[] | undefined => (Array.isArray(value) && value.every((id) => Number.isInteger(id)) ? value as number[] : undefined);

/** A choice's ids, or undefined where it states none. */
export function choiceIds(answer: object): number[] | undefined {
  const choice = answer as Choice;
  const content = choice.logprobs?.content;
  return idList(choice.token_ids) ?? (Array.isArray(content) ? idList(content.map((e) => e.id)) : undefined) ?? idList(choice.logprobs?.token_ids);
}

/** A choice's text: completions `text`, chat `message.content` or a streamed `delta.content`. */
export function choiceText(answer: object): string {
  const choice = answer as Choice;
  const text = choice.text ?? choice.message?.content ?? choice.delta?.content;
  return typeof text === "string" ? text : "";
}

/** What a stream of choice-0 events adds up to: the text pieces in order, and the ids (undefined where an event with text states none). */
export function streamedAnswer(dataEvents: readonly string[]): { pieces: string[]; ids: number[] | undefined } {
  const pieces: string[] = [];
  let ids: number[] | undefined = [];
  for (const event of dataEvents) {
    if (!event.startsWith("data: ") || event === "data: [DONE]") continue;
    const choices = (JSON.parse(event.slice(6)) as { choices?: Choice[] }).choices ?? [];
    for (const choice of choices.filter((c) => (c.index ?? 0) === 0)) {
      const text = choiceText(choice);
      const own = choiceIds(choice);
      pieces.push(text);
      if (own === undefined) {
        if (text !== "") ids = undefined;
      } else if (ids !== undefined) {
        ids.push(...own);
      }
    }
  }
  return { pieces, ids };
}
