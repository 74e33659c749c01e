/**
 * JSON text written straight into a byte buffer: the embedded store's datafile appends.
 *
 * `JSON.stringify` builds its result from string parts of growing size, joins them and then
 * flattens the join: for a 350-byte document about 1 KB of heap, before the text is encoded into
 * a buffer for the write. A held fleet rewrites thousands of such documents a minute (token
 * totals, lastSeen, the ledger), and that garbage is what keeps V8's young generation large. This
 * writer walks the value and encodes it into a buffer it reuses: strings without anything to
 * escape are encoded as they are, and only numbers (through V8's number-string cache) and strings
 * that need escaping (through `JSON.stringify` of that string alone) make small temporary strings.
 *
 * It writes exactly the text `JSON.stringify(value)` would for the values a store holds: plain
 * objects and arrays, strings, finite and non-finite numbers, booleans and null; undefined (and
 * functions and symbols) are left out of objects and written as null in arrays; a value with a
 * `toJSON` method (a Date) is written as `JSON.stringify` writes it. test/json-lines.test.ts
 * compares the two on random and chosen values.
 */

/** Characters a JSON string must escape, and every surrogate (a lone one is escaped; let JSON.stringify decide). */
const NEEDS_ESCAPE = /["\\\u0000-\u001f\ud800-\udfff]/;
const QUOTE = 0x22;
const COMMA = 0x2c;
const COLON = 0x3a;

export class JsonLineWriter {
  /** Bytes written so far (the text is `buf.subarray(0, length)`). */
  length = 0;

  constructor(public buf: Buffer) {}

  /** Appends `JSON.stringify(value)` and a newline. */
  line(value: unknown): void {
    this.value(value, false);
    this.room(1);
    this.buf[this.length++] = 0x0a;
  }

  /** Appends text as it is (UTF-8). */
  raw(text: string): void {
    this.room(text.length * 3);
    this.length += this.buf.write(text, this.length, 'utf8');
  }

  private room(n: number): void {
    const need = this.length + n;
    if (need <= this.buf.length) return;
    const bigger = Buffer.allocUnsafeSlow(Math.max(need, this.buf.length * 2));
    this.buf.copy(bigger, 0, 0, this.length);
    this.buf = bigger;
  }

  private string(s: string): void {
    if (NEEDS_ESCAPE.test(s)) return this.raw(JSON.stringify(s));
    this.room(s.length * 3 + 2);
    const buf = this.buf;
    buf[this.length++] = QUOTE;
    this.length += buf.write(s, this.length, 'utf8');
    buf[this.length++] = QUOTE;
  }

  /** Writes a value. Undefined, a function or a symbol is written as null in an array, and not at all elsewhere (false). */
  private value(v: unknown, inArray: boolean): boolean {
    switch (typeof v) {
      case 'string':
        this.string(v);
        return true;
      case 'number':
        this.raw(Number.isFinite(v) ? String(v) : 'null');
        return true;
      case 'boolean':
        this.raw(v ? 'true' : 'false');
        return true;
      case 'object':
        if (v === null) this.raw('null');
        else if (Array.isArray(v)) this.array(v);
        else if (typeof (v as { toJSON?: unknown }).toJSON === 'function') this.raw(JSON.stringify(v));
        else this.object(v as Record<string, unknown>);
        return true;
      case 'bigint':
        this.raw(JSON.stringify(v)); // throws its TypeError
        return true;
      default: // undefined, functions, symbols
        if (inArray) this.raw('null');
        return inArray;
    }
  }

  private array(a: readonly unknown[]): void {
    this.room(1);
    this.buf[this.length++] = 0x5b;
    for (let i = 0; i < a.length; i++) {
      if (i > 0) {
        this.room(1);
        this.buf[this.length++] = COMMA;
      }
      this.value(a[i], true);
    }
    this.room(1);
    this.buf[this.length++] = 0x5d;
  }

  private object(o: Record<string, unknown>): void {
    this.room(1);
    this.buf[this.length++] = 0x7b;
    let first = true;
    for (const key in o) {
      if (!Object.hasOwn(o, key)) continue;
      const v = o[key];
      if (v === undefined || typeof v === 'function' || typeof v === 'symbol') continue; // left out, as JSON does
      if (!first) {
        this.room(1);
        this.buf[this.length++] = COMMA;
      }
      first = false;
      this.string(key);
      this.room(1);
      this.buf[this.length++] = COLON;
      this.value(v, false);
    }
    this.room(1);
    this.buf[this.length++] = 0x7d;
  }
}
