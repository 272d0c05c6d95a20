/**
 * The battery `bench run` runs with no --suite: every family's F32 fixture embedded and through our
 * server, the needle, our server's conformance and every owned kernel, in about a minute on 2 cores
 * (docs/cli.md#the-default-battery). zoo-quick and niah-quick are the zoo and niah suites cut to fit
 * that minute; box/batteries.json names this battery as what validates tiny-random and copy-4k for `bench serve`.
 */
export const DEFAULT_BATTERY = ["parity16", "zoo-quick", "niah-quick", "serve-conformance", "owned-kernels"] as const;
