import { SeededRandom } from "../fixtures/seeded-random.js";

/** A multi-conversation workload's shape: more users than a server has slots, each coming back after the others. */
export interface ConversationShape {
  readonly users: number;
  readonly turns: number;
  /** The system prompt every conversation starts with. */
  readonly systemTokens: number;
  /** Each user message. */
  readonly messageTokens: number;
  /** Each recorded assistant reply the next turn carries in its history. */
  readonly replyTokens: number;
  /** Every this many (user, turn) pairs after the first turn, the user edits their last message instead of adding one (a divergence inside the conversation); 0: never. */
  readonly editEvery: number;
  /** Token ids are drawn from [10, idCeiling): inside every fixture's vocabulary. */
  readonly idCeiling: number;
  readonly seed: number;
}

/** One request of the workload: a user's whole history so far, as token ids. */
export interface ConversationRequest {
  readonly user: number;
  readonly turn: number;
  readonly prompt: readonly number[];
  /** This turn replaces the user's previous message rather than answering the reply to it. */
  readonly edit: boolean;
}

/**
 * The workload, turn by turn: every user's first turn, then every user's second, and so on, so
 * that each conversation comes back after all the others have had a turn. Replies in the history
 * are recorded (drawn once, the same for every server), as a replayed chat dataset carries them:
 * every server under test gets exactly the same prompts, and the cache's reuse is compared on
 * equal terms. An edit drops the user's last message and its reply and sends another in its place.
 */
export function conversationWorkload(shape: ConversationShape): ConversationRequest[][] {
  const random = new SeededRandom(shape.seed);
  const ids = (n: number) => Array.from({ length: n }, () => 10 + Math.floor(random.uniform() * (shape.idCeiling - 10)));
  const system = ids(shape.systemTokens);
  const histories: number[][][] = Array.from({ length: shape.users }, () => [system]);
  const rounds: ConversationRequest[][] = [];
  for (let turn = 0; turn < shape.turns; turn++) {
    const round: ConversationRequest[] = [];
    for (let user = 0; user < shape.users; user++) {
      const history = histories[user];
      const edit = turn > 0 && shape.editEvery > 0 && (user + turn * shape.users) % shape.editEvery === 0;
      if (edit) history.splice(-2, 2);
      const message = ids(shape.messageTokens);
      round.push({ user, turn, prompt: [...history.flat(), ...message], edit });
      history.push(message, ids(shape.replyTokens));
    }
    rounds.push(round);
  }
  return rounds;
}
