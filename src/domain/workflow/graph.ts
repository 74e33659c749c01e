/**
 * The dependency graph of a workflow's steps (`dependsOn`, interface §4.10 rule 1).
 */
interface Node {
  id: string;
  dependsOn?: string[];
}

/** A cycle as a list of step ids (each depends on the next, the last on the first); null when none. */
export function findCycle(steps: readonly Node[]): string[] | null {
  const deps = new Map(steps.map((s) => [s.id, s.dependsOn ?? []]));
  const state = new Map<string, 'visiting' | 'done'>();
  const stack: string[] = [];
  const visit = (id: string): string[] | null => {
    const st = state.get(id);
    if (st === 'done') return null;
    if (st === 'visiting') return stack.slice(stack.indexOf(id));
    state.set(id, 'visiting');
    stack.push(id);
    for (const d of deps.get(id) ?? []) {
      if (!deps.has(d)) continue;
      const found = visit(d);
      if (found) return found;
    }
    stack.pop();
    state.set(id, 'done');
    return null;
  };
  for (const s of steps) {
    const found = visit(s.id);
    if (found) return found;
  }
  return null;
}

/** For each step, every step it depends on directly or indirectly. The graph must be acyclic. */
export function ancestorsOf(steps: readonly Node[]): Map<string, Set<string>> {
  const deps = new Map(steps.map((s) => [s.id, s.dependsOn ?? []]));
  const memo = new Map<string, Set<string>>();
  const of = (id: string): Set<string> => {
    const hit = memo.get(id);
    if (hit) return hit;
    const out = new Set<string>();
    for (const d of deps.get(id) ?? []) {
      out.add(d);
      for (const a of of(d)) out.add(a);
    }
    memo.set(id, out);
    return out;
  };
  for (const s of steps) of(s.id);
  return memo;
}
