/** nedb's document checks (CommonJS, untyped): the same ones its own insert and update run. */
declare module '@seald-io/nedb/lib/model.js' {
  /** Throws when a field name starts with "$" or contains "." (recursively). */
  export function checkObject(obj: unknown): void;
  /** One document as the line nedb writes to its datafile (dates and special values encoded). */
  export function serialize(obj: unknown): string;
  /** nedb's total order of values (-1, 0, 1): the order and equality of its index keys. */
  export function compareThings(a: unknown, b: unknown): number;
  /** A document's index key for the fields of an index (an object for a compound index). */
  export function getDotValues(obj: unknown, fields: string[]): unknown;
}

/** nedb's index class (CommonJS, untyped); nedb-index.ts describes what it uses. */
declare module '@seald-io/nedb/lib/indexes.js' {
  const Index: new (options: { fieldName: string; unique?: boolean; sparse?: boolean }) => unknown;
  export default Index;
}
