/**
 * Checks a workflow definition before it is sent, with the same rules Steward applies
 * (docs/workflows.md), so a person sees every problem at once; Steward checks again on save
 * (interpolation and CEL conditions only there).
 */
import type { WorkflowDefinition } from '../api/workflows';

const STEP_KEYS = new Set(['id', 'name', 'agentDid', 'action', 'params', 'dependsOn', 'condition', 'onError', 'retries']);

export function checkDefinition(text: string): { definition?: WorkflowDefinition; problems: string[] } {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (err) {
    return { problems: [`The definition is not valid JSON: ${(err as Error).message}`] };
  }
  const problems: string[] = [];
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return { problems: ['The definition must be a JSON object with a "steps" array.'] };
  const def = v as Record<string, unknown>;
  for (const k of Object.keys(def)) if (!['steps', 'triggers', 'variables'].includes(k)) problems.push(`unknown field '${k}' (allowed: steps, triggers, variables)`);
  if (!Array.isArray(def.steps) || def.steps.length === 0) return { problems: [...problems, '"steps" must be an array of 1 to 500 steps.'] };
  if (def.steps.length > 500) problems.push('at most 500 steps');
  if (def.variables !== undefined && (typeof def.variables !== 'object' || def.variables === null || Array.isArray(def.variables))) problems.push('"variables" must be an object');
  const ids = new Map<string, number>();
  def.steps.forEach((raw, i) => {
    const where = `steps[${i}]`;
    if (typeof raw !== 'object' || raw === null) return problems.push(`${where}: a step is an object`);
    const s = raw as Record<string, unknown>;
    const name = typeof s.id === 'string' ? `step '${s.id}' (${where})` : where;
    for (const k of Object.keys(s)) if (!STEP_KEYS.has(k)) problems.push(`${name}: unknown field '${k}'`);
    if (typeof s.id !== 'string' || !/^[A-Za-z0-9_-]{1,64}$/.test(s.id)) problems.push(`${name}: "id" is required: letters, digits, _ and -, at most 64`);
    else if (ids.has(s.id)) problems.push(`${name}: the id is used by more than one step`);
    else ids.set(s.id, i);
    if (typeof s.name !== 'string' || !s.name.trim()) problems.push(`${name}: "name" is required`);
    if (typeof s.action !== 'string' || !s.action) problems.push(`${name}: "action" is required`);
    if (typeof s.params !== 'object' || s.params === null || Array.isArray(s.params)) problems.push(`${name}: "params" is required (an object, may be {})`);
    if (s.dependsOn !== undefined && !(Array.isArray(s.dependsOn) && s.dependsOn.every((d) => typeof d === 'string'))) problems.push(`${name}: "dependsOn" is a list of step ids`);
    if (s.onError !== undefined && !['stop', 'continue', 'retry'].includes(s.onError as string)) problems.push(`${name}: "onError" is stop, continue or retry`);
    if (s.retries !== undefined && !(Number.isInteger(s.retries) && (s.retries as number) >= 0 && (s.retries as number) <= 100)) problems.push(`${name}: "retries" is a whole number from 0 to 100`);
    if (s.agentDid !== undefined && !(typeof s.agentDid === 'string' && s.agentDid.startsWith('did:'))) problems.push(`${name}: "agentDid" is a DID`);
    if (s.condition !== undefined && typeof s.condition !== 'string') problems.push(`${name}: "condition" is a CEL expression (text)`);
  });
  const steps = def.steps as Array<{ id: string; dependsOn?: string[] }>;
  for (const s of steps) for (const d of Array.isArray(s.dependsOn) ? s.dependsOn : []) if (typeof d === 'string' && !ids.has(d)) problems.push(`step '${s.id}': dependsOn names '${d}', which is not a step of this workflow`);
  if (problems.length === 0) {
    // Depth-first search for a cycle, reported with its path.
    const state = new Map<string, 1 | 2>();
    const byId = new Map(steps.map((s) => [s.id, s]));
    const visit = (id: string, path: string[]): string[] | null => {
      if (state.get(id) === 2) return null;
      if (state.get(id) === 1) return [...path.slice(path.indexOf(id)), id];
      state.set(id, 1);
      for (const d of byId.get(id)?.dependsOn ?? []) {
        const c = visit(d, [...path, id]);
        if (c) return c;
      }
      state.set(id, 2);
      return null;
    };
    for (const s of steps) {
      const c = visit(s.id, []);
      if (c) {
        problems.push(`step '${c[0]}': the dependencies form a cycle (${c.join(' -> ')})`);
        break;
      }
    }
  }
  return problems.length ? { problems } : { definition: def as unknown as WorkflowDefinition, problems };
}
