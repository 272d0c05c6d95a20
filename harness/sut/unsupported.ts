/**
 * The SUT says it has no implementation for what was asked (a kernel plugin without a Q6_K
 * kernel, a runner told `"unsupported": true`): that one case is SKIPPED with the reason, never
 * passed, and never an error that stops the cases after it.
 */
export class UnsupportedRequestError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UnsupportedRequestError";
  }
}
