/**
 * config.json as transformers reads it. Its configs are strict dataclasses that check each field's
 * declared type, and a whole number JSON writes as `30` is an int: transformers 5.17 refuses
 * `final_logit_softcapping: 30` ("expected float, got int"). A value wrapped in `float()` is always
 * written with a decimal point (30.0).
 */
export class FloatValue {
  constructor(readonly value: number) {}
}

export function float(value: number): FloatValue {
  return new FloatValue(value);
}

function floatText(value: number): string {
  return Number.isInteger(value) ? value.toFixed(1) : String(value);
}

/** The config as JSON text (2-space indent, trailing newline), floats with their decimal point. */
export function configJsonText(config: Record<string, unknown>): string {
  const floats: string[] = [];
  // JSON.stringify has no raw-text escape in Node 20: mark each float with a string no real value can hold, then swap it.
  const marked = JSON.stringify(config, (_key, value: unknown) => (value instanceof FloatValue ? `\u0000float:${floats.push(floatText(value.value)) - 1}` : value), 2);
  return marked.replace(/"\\u0000float:(\d+)"/g, (_match, index: string) => floats[Number(index)]) + "\n";
}
