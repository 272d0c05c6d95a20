/**
 * Texts whose pieces llama.cpp's clean-up of spaces would change (Llama 3's vocabulary cleans: a
 * space before ?!., or around a lone apostrophe, before 's 'm 're 've), code whose spaces matter,
 * multi-byte characters split over byte tokens, and runs of whitespace.
 */
export const HOSTILE_TEXTS: readonly string[] = [
  "rock ' n ' roll ' s",
  "x === vs !== y",
  "Is it ? Yes ! No , maybe .",
  "he 's sure we 're done , they 've said I 'm",
  "naïve café — 日本語 🙂 Ωμέγα",
  "  two  spaces\tand\ttabs\n\n  indented",
];
