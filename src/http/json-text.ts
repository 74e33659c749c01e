/**
 * The JSON text of a response body. Bodies are plain JSON values, except that an exact count past
 * 2^53 is a bigint (src/domain/token-count.ts): it is written as a JSON integer with all its digits,
 * which JSON allows (a client that reads numbers as doubles gets the nearest one, a client that
 * reads integers exactly gets the count). JSON.stringify refuses bigints, so a body that holds one
 * is written a second time with each bigint as a marked string, and the marks are then taken off;
 * the mark holds a random part, so no string of the body can look like one.
 */
import { randomBase64Url } from '../domain/random.js';

export function jsonText(body: unknown): string {
  try {
    return JSON.stringify(body);
  } catch (err) {
    if (!(err instanceof TypeError) || !/bigint/i.test(err.message)) throw err;
  }
  const mark = `bigint-${randomBase64Url(12)}:`;
  const text = JSON.stringify(body, (_key, value: unknown) => (typeof value === 'bigint' ? mark + value.toString() : value));
  return text.replace(new RegExp(`"${mark}(-?\\d+)"`, 'g'), '$1');
}
