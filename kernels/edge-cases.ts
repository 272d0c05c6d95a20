import { parseEncoding } from "./ops/op.js";
import { KERNEL_OPS, type KernelCaseSpec } from "./ops/registry.js";

/** A suite's generated part: where its seeds start (suites/schema/kernels.schema.json `edges`). */
export interface EdgeGeneration {
  readonly first_seed: number;
}

/**
 * Kernel cases by construction: for every op of the registry and every encoding it has, one case
 * per edge its `edges` declares (the base case with that edge's parameters over it), in registry,
 * encoding and declaration order, seeds counting up from `first_seed`. Deterministic, so a case
 * index (`--case N`) names the same case on every machine; an edge that repeats an earlier case
 * of the same op and encoding is not repeated.
 */
export function edgeCases(generation: EdgeGeneration): KernelCaseSpec[] {
  const cases: KernelCaseSpec[] = [];
  const seen = new Set<string>();
  for (const op of KERNEL_OPS.values()) {
    for (const encoding of op.encodings) {
      const { base, axes } = op.edges(parseEncoding(encoding));
      for (const edges of Object.values(axes)) {
        for (const edge of edges) {
          const params = { ...base, ...edge.params };
          const key = JSON.stringify([op.name, encoding, Object.entries(params).sort()]);
          if (seen.has(key)) continue;
          seen.add(key);
          cases.push({ op: op.name, encoding, ...params, seed: generation.first_seed + cases.length });
        }
      }
    }
  }
  return cases;
}
