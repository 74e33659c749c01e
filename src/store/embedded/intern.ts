/**
 * One copy of each stored string of 11 to 64 characters (identifiers, timestamps) for the whole
 * process, through V8's string table.
 */

/**
 * Stored strings are interned: a document's identifiers and timestamps (an agent's DID is in its
 * record, membership, session, certificate, token totals and actor snapshot; a fleet's timestamps
 * repeat by the thousand) otherwise each hold a copy of their own, one per document loaded from a
 * datafile (`JSON.parse` shares only strings of up to 10 characters) and one per code path that
 * built the value. Adding a string as a key of a dictionary-mode object makes V8 internalize it:
 * the string joins V8's (weak) string table in place, or, when an equal one is there already,
 * becomes a reference to that one, which the garbage collector then puts in its place everywhere,
 * also for the holders outside the store (an agent's connection state, its actor). The table is
 * dropped for a new one every 256 strings, so it holds nothing alive for long (deleting each key
 * again made V8 reallocate the table every few calls). The last 8 strings interned are checked
 * first: the values a batch repeats (its timestamp) then cost a comparison and are handed back as
 * the one copy. Strings of 11 to 64 characters only: shorter ones are small (and `JSON.parse`
 * shares them), longer ones (signatures, certificate and snapshot texts) are unique and would only
 * cost the hashing. This changes no value, only how many copies of it the process keeps.
 */
const INTERN_MIN = 11;
const INTERN_MAX = 64;
const INTERN_TABLE_MAX = 256;
const INTERN_RECENT = 8;
let internTable: Record<string, 0> = Object.create(null) as Record<string, 0>;
let internCount = 0;
const internRecent: string[] = new Array<string>(INTERN_RECENT).fill('');
let internNext = 0;
/** Internalizes `s` itself: every holder of this string object then shares the one copy. */
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

/**
 * Interns the strings of a document read from a datafile. The string objects themselves are
 * internalized (not swapped for the one copy), since nedb's indexes already hold them as keys.
 */
export function internStrings(v: unknown): void {
  if (typeof v === 'string') {
    if (v.length >= INTERN_MIN && v.length <= INTERN_MAX) internalize(v);
  } else if (Array.isArray(v)) for (const e of v) internStrings(e);
  else if (typeof v === 'object' && v !== null) for (const k of Object.keys(v)) internStrings((v as Record<string, unknown>)[k]);
}

