/**
 * The datafile line writer (src/store/embedded/json-lines.ts) writes the same bytes as JSON.stringify,
 * checked on chosen edge cases and on random documents.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { JsonLineWriter } from '../src/store/embedded/json-lines.js';

const test = suite('json-lines');

/** The writer's text for values written one per line, starting from a buffer of `size` bytes. */
function written(values: unknown[], size = 1): string {
  const out = new JsonLineWriter(Buffer.alloc(size));
  for (const v of values) out.line(v);
  return out.buf.subarray(0, out.length).toString('utf8');
}

const expected = (values: unknown[]) => values.map((v) => JSON.stringify(v) + '\n').join('');

test('chosen values: escapes, surrogates, numbers, left-out members, toJSON, key order', () => {
  const values: unknown[] = [
    { _id: 'plain', n: 1, ok: true, no: false, nil: null },
    { s: 'quote " backslash \\ slash / tab \t newline \n nul \u0000 unit \u001f del \u007f' },
    { s: 'é € 𝄞 中文', [`key "with" \\ and é`]: 'v' },
    { lone: 'a\ud800b', low: '\udc00', pair: '\ud834\udd1e', reversed: '\udd1e\ud834' },
    { n: [0, -0, 1.5, -2.25, 1e21, 1e-7, 123456789012345680000, Number.MAX_SAFE_INTEGER, -Number.MAX_SAFE_INTEGER, 2 ** 53, -7, 10, 999999999999999, 5e-324, NaN, Infinity, -Infinity] },
    { gone: undefined, fn: () => 1, sym: Symbol('x'), kept: 1 },
    [undefined, () => 1, Symbol('y'), null, 'x'],
    { b: 1, a: 2, 10: 'ten', 2: 'two', '-1': 'minus' },
    { at: new Date(Date.UTC(2026, 10, 22, 1, 2, 3, 4)), nested: { list: [{ at: new Date(0) }] } },
    { empty: {}, none: [], deep: { a: { b: { c: [[[]], {}] } } } },
    { long: '{"a":"b\\c"}\n'.repeat(40), longOdd: 'x\ud800'.repeat(200), longPlain: 'é'.repeat(500) },
    'top-level string',
    42,
    null,
    [],
    {},
  ];
  assert.is(written(values), expected(values));
});

test('a value JSON cannot write throws as JSON.stringify does', () => {
  assert.throws(() => written([{ n: 1n }]), (err: unknown) => err instanceof TypeError);
});

test('random documents, written into a buffer that starts at one byte and grows', () => {
  let seed = 11;
  const rand = (n: number) => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed % n;
  };
  const alphabet = ['a', 'Z', '0', ' ', '"', '\\', '\n', '\u0001', 'é', '€', '\ud83d\ude00', '\ud800', '\udfff', '.', '$'];
  const str = () => Array.from({ length: rand(12) }, () => alphabet[rand(alphabet.length)]).join('');
  const num = () => [rand(1000), -rand(1e9), -rand(1000) / 7, rand(2) ? 1e300 * 10 : 0.1 + 0.2, -0][rand(5)];
  const value = (depth: number): unknown => {
    switch (rand(depth > 3 ? 5 : 8)) {
      case 0:
        return str();
      case 1:
        return num();
      case 2:
        return rand(2) === 0;
      case 3:
        return null;
      case 4:
        return undefined;
      case 5:
        return Array.from({ length: rand(4) }, () => value(depth + 1));
      default: {
        const o: Record<string, unknown> = {};
        for (let i = rand(5); i > 0; i--) o[str()] = value(depth + 1);
        return o;
      }
    }
  };
  const docs = Array.from({ length: 400 }, () => ({ _id: str(), ...(value(0) as object) }));
  assert.is(written(docs), expected(docs));
});

test.run();
