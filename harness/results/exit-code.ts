/**
 * The exit-code contract of `bench run` / `bench gate` (DESIGN.md): 0 every required gate passed;
 * 1 a gate failed; 2 bad input, configuration or infrastructure error; 77 nothing failed but a
 * required gate did not run ("SKIPPED — NOT A PASS").
 */
export const EXIT = { pass: 0, gateFailed: 1, error: 2, requiredSkipped: 77 } as const;
export type ExitCode = (typeof EXIT)[keyof typeof EXIT];
