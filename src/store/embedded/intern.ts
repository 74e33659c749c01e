/**
 * Interning: one copy of each stored identifier and timestamp for the whole process, where every
 * document loaded or written would otherwise hold its own (docs/store.md, "Interning").
 */

/** Shorter strings are small (and shared by JSON.parse); longer ones (signatures, texts) are unique. */
const INTERN_MIN = 11;
const INTERN_MAX = 64;
/** The table is replaced this often, so it keeps nothing alive for long. */
const INTERN_TABLE_MAX = 256;
/** Strings compared before the table: a batch repeats its timestamp. */
const INTERN_RECENT = 8;
let internTable: Record<string, 0> = Object.create(null) as Record<string, 0>;
let internCount = 0;
const internRecent: string[] = new Array<string>(INTERN_RECENT).fill('');
let internNext = 0;

/**
 * Internalizes `s` itself: a key of a dictionary-mode object joins V8's string table, or becomes
 * a reference to the equal string there, which the garbage collector then gives every holder.
 */
function internalize(s: string): void {
  internTable[s] = 0;
  if (++internCount >= INTERN_TABLE_MAX) {
    internTable = Object.create(null) as Record<string, 0>;
    internCount = 0;
  }
}

/** The one copy of a string about to be stored. */
export function intern(s: string): string {
  if (s.length < INTERN_MIN || s.length > INTERN_MAX) return s;
  for (let i = 0; i < INTERN_RECENT; i++) {
    const r = internRecent[i]!;
    if (r === s) return r;
  }
  internalize(s);
  internRecent[internNext] = s;
  internNext = (internNext + 1) % INTERN_RECENT;
  return s;
}

/** Interns the strings of a document read from a datafile, in place: nedb's indexes already hold them. */
export function internStrings(v: unknown): void {
  if (typeof v === 'string') {
    if (v.length >= INTERN_MIN && v.length <= INTERN_MAX) internalize(v);
  } else if (Array.isArray(v)) for (const e of v) internStrings(e);
  else if (typeof v === 'object' && v !== null) for (const k of Object.keys(v)) internStrings((v as Record<string, unknown>)[k]);
}
