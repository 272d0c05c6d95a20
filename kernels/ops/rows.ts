import type { OpParams } from "./op.js";

/** Parameters of the row-wise ops: R rows of N values. */
export const ROW_PARAMS = {
  R: { type: "integer", minimum: 1, description: "rows" },
  N: { type: "integer", minimum: 1, description: "values per row" },
} as const;

export function rowShape(params: OpParams): [number, number] {
  return [params.R as number, params.N as number];
}
