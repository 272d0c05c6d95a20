/** The battery `bench run` runs with no --suite; box/batteries.json names it as what validates tiny-random and copy-4k for `bench serve`. */
export const DEFAULT_BATTERY = ["parity16", "niah", "serve-conformance", "quant-kernels"] as const;
