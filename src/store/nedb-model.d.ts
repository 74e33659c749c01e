/** nedb's document checks (CommonJS, untyped): the same ones its own insert and update run. */
declare module '@seald-io/nedb/lib/model.js' {
  /** Throws when a field name starts with "$" or contains "." (recursively). */
  export function checkObject(obj: unknown): void;
  /** One document as the line nedb writes to its datafile (dates and special values encoded). */
  export function serialize(obj: unknown): string;
}
