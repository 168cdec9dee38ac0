// Exponential moving average as TensorBoard draws it: debiased, so the first points are not pulled toward 0.
export function ema(values: number[], weight: number): number[] {
  if (weight <= 0) return values;
  const out = new Array<number>(values.length);
  let average = 0;
  let count = 0;
  for (let i = 0; i < values.length; i++) {
    const value = values[i];
    if (!Number.isFinite(value)) {
      // a NaN or infinite figure is shown as it is and does not poison the rest
      out[i] = value;
      continue;
    }
    average = average * weight + (1 - weight) * value;
    count++;
    out[i] = average / (1 - weight ** count);
  }
  return out;
}
