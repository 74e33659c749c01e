/**
 * Items grouped by a key, in the order they come (each group's items too); `value` picks what a
 * group holds of each item (the item itself by default).
 */
export function groupBy<T, V = T>(items: Iterable<T>, key: (item: T) => string, value: (item: T) => V = (item) => item as unknown as V): Map<string, V[]> {
  const out = new Map<string, V[]>();
  for (const item of items) {
    const k = key(item);
    const list = out.get(k);
    if (list) list.push(value(item));
    else out.set(k, [value(item)]);
  }
  return out;
}
