/**
 * JSON text written straight into a reused byte buffer, the embedded store's datafile lines: the
 * bytes `JSON.stringify` writes for stored values (test/json-lines.test.ts compares the two),
 * without the strings it builds on the way, a fleet's largest source of garbage (docs/store.md).
 */
import { writeDigits } from '../../domain/decimal.js';

/** Characters a JSON string must escape, and every surrogate (a lone one is escaped): such a string takes the slower path. */
const NEEDS_ESCAPE = /["\\\u0000-\u001f\ud800-\udfff]/;
/**
 * Longer strings to escape (certificate and snapshot texts hold quotes) go through the faster native
 * `JSON.stringify`: they come in bursts (a re-certification), not in a fleet's steady writes.
 */
const ESCAPE_IN_JS_MAX = 256;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
/** The escapes JSON writes as a backslash and one letter, by character code. */
const SHORT_ESCAPES: Record<number, number> = { 0x08: 0x62, 0x09: 0x74, 0x0a: 0x6e, 0x0c: 0x66, 0x0d: 0x72, 0x22: 0x22, 0x5c: 0x5c };
const HEX = Buffer.from('0123456789abcdef');
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
    if (NEEDS_ESCAPE.test(s)) return s.length > ESCAPE_IN_JS_MAX ? this.raw(JSON.stringify(s)) : this.escaped(s);
    this.room(s.length * 3 + 2);
    const buf = this.buf;
    buf[this.length++] = QUOTE;
    this.length += buf.write(s, this.length, 'utf8');
    buf[this.length++] = QUOTE;
  }

  /**
   * A string with something to escape, a character at a time, as JSON.stringify escapes it: the
   * short escapes, other control characters and lone surrogates as lowercase `\u00xx`, everything
   * else (a surrogate pair too) as UTF-8.
   */
  private escaped(s: string): void {
    this.room(s.length * 6 + 2); // the longest form of a UTF-16 unit is a six-byte \uXXXX
    const buf = this.buf;
    let n = this.length;
    buf[n++] = QUOTE;
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      if (c < 0x80) {
        if (c >= 0x20 && c !== QUOTE && c !== BACKSLASH) buf[n++] = c;
        else {
          buf[n++] = BACKSLASH;
          const short = SHORT_ESCAPES[c];
          if (short !== undefined) buf[n++] = short;
          else n = this.unicodeEscape(n, c);
        }
      } else if (c < 0x800) {
        buf[n++] = 0xc0 | (c >> 6);
        buf[n++] = 0x80 | (c & 0x3f);
      } else if (c >= 0xd800 && c <= 0xdfff) {
        const next = i + 1 < s.length ? s.charCodeAt(i + 1) : 0;
        if (c <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
          const cp = 0x10000 + ((c - 0xd800) << 10) + (next - 0xdc00);
          buf[n++] = 0xf0 | (cp >> 18);
          buf[n++] = 0x80 | ((cp >> 12) & 0x3f);
          buf[n++] = 0x80 | ((cp >> 6) & 0x3f);
          buf[n++] = 0x80 | (cp & 0x3f);
          i++;
        } else {
          buf[n++] = BACKSLASH;
          n = this.unicodeEscape(n, c);
        }
      } else {
        buf[n++] = 0xe0 | (c >> 12);
        buf[n++] = 0x80 | ((c >> 6) & 0x3f);
        buf[n++] = 0x80 | (c & 0x3f);
      }
    }
    buf[n++] = QUOTE;
    this.length = n;
  }

  /** Writes `uXXXX` (lowercase hex) at `n`, after the backslash; returns the new end. */
  private unicodeEscape(n: number, c: number): number {
    const buf = this.buf;
    buf[n++] = 0x75; // u
    for (let shift = 12; shift >= 0; shift -= 4) buf[n++] = HEX[(c >> shift) & 0xf]!;
    return n;
  }

  /** Writes a value. Undefined, a function or a symbol is written as null in an array, and not at all elsewhere. */
  private value(v: unknown, inArray: boolean): void {
    switch (typeof v) {
      case 'string':
        return this.string(v);
      case 'number':
        if (Number.isSafeInteger(v)) return this.integer(v);
        return this.raw(Number.isFinite(v) ? String(v) : 'null');
      case 'boolean':
        return this.raw(v ? 'true' : 'false');
      case 'object':
        if (v === null) return this.raw('null');
        if (Array.isArray(v)) return this.array(v);
        if (typeof (v as { toJSON?: unknown }).toJSON === 'function') return this.raw(JSON.stringify(v));
        return this.object(v as Record<string, unknown>);
      case 'bigint':
        return this.raw(JSON.stringify(v)); // throws its TypeError
      default: // undefined, functions, symbols
        if (inArray) this.raw('null');
    }
  }

  /** A safe integer's digits, written without making its string (token totals are most of a roll-up's numbers); -0 as 0, as JSON writes it. */
  private integer(n: number): void {
    this.room(17);
    if (n < 0) this.buf[this.length++] = 0x2d;
    this.length = writeDigits(this.buf, this.length, Math.abs(n));
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
