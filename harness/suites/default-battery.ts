/** The battery `bench run` runs with no --suite; `bench serve` accepts only a whole, unsubsetted run of it as validation. */
export const DEFAULT_BATTERY = ["parity16", "niah", "serve-conformance", "quant-kernels"] as const;
