import { BenchError } from "../harness/errors.js";

/**
 * FAULT switches of our server, for tests only: each plants one bug a bring-up server really has,
 * so that a test can show the harness catches it. Set through the environment (BENCH_SERVER_FAULT),
 * so a harness-started server inherits it and no user-facing flag exists.
 *
 * `skip-slot-clear`: a slot's sequence is not cleared when the slot takes its next request, so
 * the recurrent and conv state (and the KV cells) of the previous request leak into the next one:
 * "slot poisoning" of hybrid and recurrent models.
 */
export const SERVER_FAULTS = ["skip-slot-clear"] as const;
export type ServerFault = (typeof SERVER_FAULTS)[number];

export const SERVER_FAULT_ENV = "BENCH_SERVER_FAULT";

/** The planted fault the environment asks for, if any; an unknown name is an error, not ignored. */
export function serverFaultFromEnvironment(env: NodeJS.ProcessEnv = process.env): ServerFault | undefined {
  const value = env[SERVER_FAULT_ENV];
  if (value === undefined || value === "") return undefined;
  if (!(SERVER_FAULTS as readonly string[]).includes(value)) {
    throw new BenchError(`unknown server fault "${value}"`, { field: SERVER_FAULT_ENV, fix: `unset it, or use one of ${SERVER_FAULTS.join(", ")}` });
  }
  return value as ServerFault;
}
