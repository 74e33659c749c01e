/**
 * A document's size as BSON, counted as the MongoDB driver's `calculateObjectSize` counts it
 * (test/store.test.ts compares them), so that both backends refuse the same documents.
 */

/** Bytes of a document (an object) as BSON. */
export function bsonDocumentSize(doc: object): number {
  return documentSize(doc, false);
}

function documentSize(value: object, isArray: boolean): number {
  let size = 4 + 1; // length prefix and terminator
  if (isArray) {
    const list = value as unknown[];
    for (let i = 0; i < list.length; i++) size += elementSize(String(i), list[i], true);
  } else {
    for (const key in value) {
      if (Object.hasOwn(value, key)) size += elementSize(key, (value as Record<string, unknown>)[key], false);
    }
  }
  return size;
}

/** Bytes of one element: type byte, key and its terminator, value; 0 when the element is not written. */
function elementSize(key: string, value: unknown, inArray: boolean): number {
  const head = 1 + Buffer.byteLength(key) + 1;
  switch (typeof value) {
    case 'string':
      return head + 4 + Buffer.byteLength(value) + 1;
    case 'number':
      return head + (Number.isInteger(value) && !Object.is(value, -0) && value >= -0x80000000 && value <= 0x7fffffff ? 4 : 8);
    case 'boolean':
      return head + 1;
    case 'bigint':
      return head + 8;
    case 'undefined':
      return inArray ? head : 0; // left out of documents (ignoreUndefined), null inside arrays
    case 'object':
      if (value === null) return head;
      if (value instanceof Date) return head + 8;
      if (ArrayBuffer.isView(value)) return head + 4 + 1 + value.byteLength;
      return head + documentSize(value, Array.isArray(value));
    default:
      return 0; // functions and symbols are not written
  }
}
