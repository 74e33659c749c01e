/**
 * One page of a list in sorted order without sorting the whole list: items [from, to) of `n` items
 * ordered by `before`, which must be a strict total order on item numbers (break ties by an id).
 *
 * A first page of a large list keeps the `to` smallest items in a bounded max-heap, O(n log to),
 * and sorts only those; a page deep in the list (to > n / 4) sorts every item, as cheap there.
 */
export function selectPage(n: number, from: number, to: number, before: (a: number, b: number) => boolean): number[] {
  to = Math.min(to, n);
  if (from >= to) return [];
  if (to * 4 > n) {
    const all = Array.from({ length: n }, (_, i) => i);
    all.sort((a, b) => (before(a, b) ? -1 : before(b, a) ? 1 : 0));
    return all.slice(from, to);
  }
  // heap[0] is the largest of the `to` smallest seen so far.
  const heap: number[] = [];
  const up = (i: number) => {
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!before(heap[p]!, heap[i]!)) break;
      [heap[p], heap[i]] = [heap[i]!, heap[p]!];
      i = p;
    }
  };
  const down = (i: number) => {
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let top = i;
      if (l < heap.length && before(heap[top]!, heap[l]!)) top = l;
      if (r < heap.length && before(heap[top]!, heap[r]!)) top = r;
      if (top === i) return;
      [heap[top], heap[i]] = [heap[i]!, heap[top]!];
      i = top;
    }
  };
  for (let i = 0; i < n; i++) {
    if (heap.length < to) {
      heap.push(i);
      up(heap.length - 1);
    } else if (before(i, heap[0]!)) {
      heap[0] = i;
      down(0);
    }
  }
  heap.sort((a, b) => (before(a, b) ? -1 : 1));
  return heap.slice(from, to);
}
