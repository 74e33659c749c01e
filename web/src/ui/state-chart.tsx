/**
 * An actor kind's state machine (XState's `machine.toJSON()`) drawn as SVG with dagre: every state
 * is a box (a compound or parallel state is joined to its children by a dotted line), every
 * transition an arrow labelled with its event. The states the actor is in are lit, and so are the
 * arrows of the last event it took.
 */
import { Graph, layout } from '@dagrejs/dagre';
import type { StateNodeDef, StateValue } from '../api/fleet';
import { GraphFrame, pathOf } from './dag';

interface StateInfo {
  path: string;
  name: string;
  parent: string | null;
  type: string;
}
interface Transition {
  from: string;
  to: string;
  event: string;
}

/** The states and transitions of a definition, states named by their dotted path under the machine. */
export function flatten(def: StateNodeDef): { states: StateInfo[]; transitions: Transition[] } {
  const states: StateInfo[] = [];
  const pending: Array<{ from: string; parent: string | null; event: string; target: string }> = [];
  const machineId = def.id ?? '';
  const walk = (node: StateNodeDef, path: string, parent: string | null) => {
    for (const [event, list] of Object.entries(node.on ?? {})) {
      for (const t of Array.isArray(list) ? list : [list]) {
        const targets = t.target === undefined ? [] : Array.isArray(t.target) ? t.target : [t.target];
        for (const target of targets) pending.push({ from: path, parent, event, target });
      }
    }
    for (const [name, child] of Object.entries(node.states ?? {})) {
      const childPath = path ? `${path}.${name}` : name;
      states.push({ path: childPath, name, parent: path || null, type: child.type ?? (child.states ? 'compound' : 'atomic') });
      walk(child, childPath, path || null);
    }
  };
  walk(def, '', null);
  const known = new Set(states.map((s) => s.path));
  const transitions: Transition[] = [];
  for (const p of pending) {
    let t = p.target.replace(/^#/, '');
    if (machineId && t.startsWith(`${machineId}.`)) t = t.slice(machineId.length + 1);
    else if (t.startsWith('.')) t = `${p.from}${t}`;
    else if (!known.has(t) && p.parent) t = `${p.parent}.${t}`;
    if (known.has(t) && p.from) transitions.push({ from: p.from, to: t, event: p.event });
  }
  return { states, transitions };
}

/** The dotted paths of every state a state value is in (ancestors included). */
export function activePaths(v: StateValue | null | undefined, prefix = ''): string[] {
  if (v === null || v === undefined) return [];
  if (typeof v === 'string') return [`${prefix}${v}`];
  return Object.entries(v).flatMap(([k, sub]) => [`${prefix}${k}`, ...activePaths(sub, `${prefix}${k}.`)]);
}

/** A state value in words: `active (connection: online, certificate: current)`. */
export function stateText(v: StateValue | null | undefined): string {
  if (v === null || v === undefined) return '—';
  if (typeof v === 'string') return v;
  return Object.entries(v)
    .map(([k, sub]) => (typeof sub === 'string' ? `${k}: ${sub}` : `${k} (${stateText(sub)})`))
    .join(', ');
}

const CHAR = 7.2;

/** XState's internal event names in short: `xstate.done.actor.0.agent.approving` is `done: approving`. */
export function eventText(event: string): string {
  const m = /^xstate\.(done|error)\.(?:actor|state)\.(?:\d+\.)?(.+)$/.exec(event);
  return m ? `${m[1]}: ${m[2]!.split('.').pop()}` : event;
}

export function StateChart({ definition, state, lastEvent, label }: { definition: StateNodeDef; state: StateValue | null | undefined; lastEvent?: string; label: string }) {
  const { states, transitions } = flatten(definition);
  const lit = new Set(activePaths(state));
  const g = new Graph({ multigraph: true });
  g.setGraph({ rankdir: 'LR', nodesep: 20, ranksep: 60, edgesep: 12, marginx: 12, marginy: 12 });
  for (const s of states) g.setNode(s.path, { width: Math.max(80, s.name.length * CHAR + 24), height: 34 });
  for (const s of states) if (s.parent) g.setEdge(s.parent, s.path, { width: 0, height: 0, contains: true }, `contains:${s.path}`);
  for (const t of transitions) g.setEdge(t.from, t.to, { width: eventText(t.event).length * 6.4 + 8, height: 14, labelpos: 'c', event: t.event }, `${t.event}:${t.from}:${t.to}`);
  layout(g);
  const info = g.graph();
  const width = Math.ceil(info.width ?? 100);
  const height = Math.ceil(info.height ?? 40);
  return (
    <GraphFrame width={width} height={height} label={label} arrowId="state-arrow" extraClass="state-chart">
      {g.edges().map((e) => {
        const edge = g.edge(e) as { points?: Array<{ x: number; y: number }>; x?: number; y?: number; contains?: boolean; event?: string };
        const d = pathOf(edge.points);
        if (edge.contains) return <path key={e.name} class="edge contains" d={d} />;
        const hot = edge.event === lastEvent && lit.has(e.w);
        return (
          <g key={e.name} class={hot ? 'transition hot' : 'transition'}>
            <title>{edge.event}</title>
            <path class="edge" d={d} marker-end="url(#state-arrow)" />
            <text x={edge.x} y={(edge.y ?? 0) + 4} text-anchor="middle" class="event">
              {eventText(edge.event ?? '')}
            </text>
          </g>
        );
      })}
      {states.map((s) => {
        const n = g.node(s.path);
        const on = lit.has(s.path);
        return (
          <g key={s.path} class={`node state ${s.type}${on ? ' current' : ''}`} transform={`translate(${n.x - n.width / 2},${n.y - n.height / 2})`} data-state={s.path} aria-current={on ? 'true' : undefined}>
            <title>{`${s.path}${on ? ' (current)' : ''}`}</title>
            <rect width={n.width} height={n.height} rx={s.type === 'atomic' ? 14 : 4} />
            <text x={n.width / 2} y="22" text-anchor="middle">
              {s.name}
            </text>
          </g>
        );
      })}
    </GraphFrame>
  );
}
