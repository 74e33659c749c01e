/**
 * What the admin commands print: tables with aligned columns for people, `--json` (the API's
 * answer, as it came) for scripts, and the small formatters both tables and detail views use.
 */
export interface Io {
  out: (s: string) => void;
  err: (s: string) => void;
}

export interface Column<T> {
  header: string;
  value: (row: T) => string;
  /** Longer values are cut to this many characters, ending in `…`. Identifiers have none: they are copied. */
  max?: number;
}

const EMPTY = '-';

/** Rows under a header line, each column as wide as its widest cell, two spaces apart, no trailing blanks. */
export function table<T>(columns: Column<T>[], rows: T[]): string {
  const cells = rows.map((r) => columns.map((c) => cut(oneLine(c.value(r)) || EMPTY, c.max)));
  const widths = columns.map((c, i) => Math.max(c.header.length, ...cells.map((row) => width(row[i]!))));
  const line = (values: string[]) =>
    values
      .map((v, i) => (i === values.length - 1 ? v : v + ' '.repeat(widths[i]! - width(v))))
      .join('  ')
      .trimEnd();
  return [line(columns.map((c) => c.header)), ...cells.map(line)].join('\n') + '\n';
}

/** `Label   value` lines, labels aligned; a value of several lines is indented under its label. */
export function details(pairs: Array<[string, string]>): string {
  const w = Math.max(...pairs.map(([k]) => k.length));
  return (
    pairs
      .map(([k, v]) => {
        const [first = '', ...rest] = (v || EMPTY).split('\n');
        return [`${k}${' '.repeat(w - k.length)}  ${first}`, ...rest.map((l) => `${' '.repeat(w + 2)}${l}`)].join('\n');
      })
      .join('\n') + '\n'
  );
}

export const json = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`;

/** An ISO time as `2026-11-26 17:03:12Z` (UTC, to the second); `-` when absent. */
export function time(iso: string | null | undefined): string {
  if (!iso) return EMPTY;
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return `${d.toISOString().slice(0, 19).replace('T', ' ')}Z`;
}

export const list = (xs: readonly string[] | null | undefined) => (xs && xs.length > 0 ? xs.join(',') : EMPTY);
export const yesNo = (b: boolean | null | undefined) => (b ? 'yes' : 'no');

/** A value in one line: strings as they are, anything else as compact JSON. */
export function compact(v: unknown): string {
  if (v === undefined || v === null) return EMPTY;
  return typeof v === 'string' ? v : JSON.stringify(v);
}

function oneLine(s: string): string {
  return s.replace(/\s*\n\s*/g, ' ');
}

/** Length in code points (what a terminal shows for the text these tables hold). */
function width(s: string): number {
  let n = 0;
  for (const _ of s) n++;
  return n;
}

function cut(s: string, max: number | undefined): string {
  if (max === undefined || width(s) <= max) return s;
  return `${[...s].slice(0, max - 1).join('')}…`;
}
