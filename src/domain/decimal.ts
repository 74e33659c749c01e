/** Decimal digits written into a byte buffer, or read from text, without making a string (frames and ledger lines on hot paths). */

/** Writes a non-negative safe integer's decimal digits (ASCII) at `at`; returns the end. */
export function writeDigits(buf: Uint8Array, at: number, n: number): number {
  let digits = 1;
  for (let v = n; v >= 10; v = Math.floor(v / 10)) digits++;
  for (let i = at + digits - 1, v = n; i >= at; i--, v = Math.floor(v / 10)) buf[i] = 0x30 + (v % 10);
  return at + digits;
}

/** The number written in `text` from `from` up to `to` (decimal digits), without making a string of it. */
export function readDigits(text: string, from: number, to: number): number {
  let n = 0;
  for (let i = from; i < to; i++) n = n * 10 + (text.charCodeAt(i) - 0x30);
  return n;
}
