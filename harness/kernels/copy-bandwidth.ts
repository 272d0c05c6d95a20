/**
 * This machine's memory bandwidth, measured STREAM-style in the run that times the kernels: copy a
 * buffer far larger than any cache (TypedArray.set is a memcpy), count the bytes read plus the
 * bytes written, and keep the best of several copies, as STREAM reports its best rate.
 */
export interface CopyBandwidth {
  readonly gbps: number;
  readonly bytes: number;
  readonly copies: number;
}

export function measureCopyBandwidth(bytes = 64 * 2 ** 20, copies = 8): CopyBandwidth {
  const source = new Float64Array(bytes / 8).fill(1);
  const target = new Float64Array(bytes / 8);
  // One untimed copy faults every page in.
  target.set(source);
  let best = Infinity;
  for (let i = 0; i < copies; i++) {
    const start = process.hrtime.bigint();
    target.set(source);
    best = Math.min(best, Number(process.hrtime.bigint() - start));
  }
  return { gbps: (2 * bytes) / best, bytes, copies };
}
