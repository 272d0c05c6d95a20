/**
 * Module resolve hook (node:module register) of a forced CPU variant: `node-llama-cpp` resolves as
 * if imported from the variant's folder, so its copy there is the one loaded (forced-variant.ts).
 */
let anchor = "";

export function initialize(data: { readonly anchor: string }): void {
  anchor = data.anchor;
}

interface ResolveContext {
  readonly parentURL?: string;
  readonly conditions: readonly string[];
  readonly importAttributes: Record<string, string>;
}
type NextResolve = (specifier: string, context: ResolveContext) => Promise<{ url: string }>;

export function resolve(specifier: string, context: ResolveContext, nextResolve: NextResolve): Promise<{ url: string }> {
  const ours = specifier === "node-llama-cpp" || specifier.startsWith("node-llama-cpp/");
  return nextResolve(specifier, ours ? { ...context, parentURL: anchor } : context);
}
