/**
 * The SUT itself is gone (its process exited, or broke the protocol and was stopped): every later
 * request would fail the same way, so a check stops asking instead of erroring prompt by prompt.
 */
export class SutGoneError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "SutGoneError";
  }
}
