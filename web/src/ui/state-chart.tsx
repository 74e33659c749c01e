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
const NODE_FONT_PX = 12;
const EVENT_FONT_PX = 11;
const LINE = 14;

let ruler: CanvasRenderingContext2D | null | undefined;
/** The width a text takes in the page's font (canvas measureText), or an estimate where there is no canvas. */
function textWidth(text: string, px: number, bold = false): number {
  if (ruler === undefined) ruler = typeof document === 'undefined' ? null : document.createElement('canvas').getContext('2d');
  if (!ruler) return text.length * CHAR * (px / 12);
  ruler.font = `${bold ? '700 ' : ''}${px}px ${getComputedStyle(document.body).fontFamily}`;
  return ruler.measureText(text).width;
}

/** XState's internal event names in short: `xstate.done.actor.0.agent.approving` is `done: approving`. */
export function eventText(event: string): string {
  const m = /^xstate\.(done|error)\.(?:actor|state)\.(?:\d+\.)?(.+)$/.exec(event);
  return m ? `${m[1]}: ${m[2]!.split('.').pop()}` : event;
}

export function StateChart({ definition, state, lastEvent, label }: { definition: StateNodeDef; state: StateValue | null | undefined; lastEvent?: string; label: string }) {
  const { states, transitions } = flatten(definition);
  const lit = new Set(activePaths(state));
  // A transition back into its own state is written inside the state's box (↻ EVENT), not drawn
  // as a loop: dagre puts loops outside the graph's bounds, where they overlapped and were cut.
  const loops = new Map<string, string[]>();
  for (const t of transitions) if (t.from === t.to) loops.set(t.from, [...(loops.get(t.from) ?? []), t.event]);
  const boxOf = (s: StateInfo) => {
    const lines = (loops.get(s.path) ?? []).map((e) => `↻ ${eventText(e)}`);
    const width = Math.max(80, textWidth(s.name, NODE_FONT_PX, true) + 28, ...lines.map((l) => textWidth(l, EVENT_FONT_PX) + 20));
    return { lines, width, height: 34 + lines.length * LINE };
  };
  const g = new Graph({ multigraph: true });
  g.setGraph({ rankdir: 'LR', nodesep: 24, ranksep: 70, edgesep: 16, marginx: 0, marginy: 0 });
  for (const s of states) g.setNode(s.path, boxOf(s));
  for (const s of states) if (s.parent) g.setEdge(s.parent, s.path, { width: 0, height: 0, contains: true }, `contains:${s.path}`);
  for (const t of transitions) {
    if (t.from === t.to) continue;
    const w = textWidth(eventText(t.event), EVENT_FONT_PX) + 12;
    g.setEdge(t.from, t.to, { width: w, height: 18, labelpos: 'c', event: t.event, labelWidth: w }, `${t.event}:${t.from}:${t.to}`);
  }
  layout(g);
  // The drawing's bounds: every box, every edge's points and every label, so nothing is cut.
  const xs: number[] = [];
  const ys: number[] = [];
  for (const s of states) {
    const n = g.node(s.path);
    xs.push(n.x - n.width / 2, n.x + n.width / 2);
    ys.push(n.y - n.height / 2, n.y + n.height / 2);
  }
  for (const e of g.edges()) {
    const edge = g.edge(e) as { points?: Array<{ x: number; y: number }>; x?: number; y?: number; labelWidth?: number };
    for (const p of edge.points ?? []) xs.push(p.x), ys.push(p.y);
    if (edge.labelWidth && edge.x !== undefined && edge.y !== undefined) xs.push(edge.x - edge.labelWidth / 2, edge.x + edge.labelWidth / 2), ys.push(edge.y - 9, edge.y + 9);
  }
  const M = 12;
  const x0 = Math.min(...xs) - M;
  const y0 = Math.min(...ys) - M;
  const width = Math.ceil(Math.max(...xs) - x0 + M);
  const height = Math.ceil(Math.max(...ys) - y0 + M);
  return (
    <GraphFrame width={width} height={height} label={label} arrowId="state-arrow" extraClass="state-chart">
      <g transform={`translate(${-x0},${-y0})`}>
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
          const { lines } = boxOf(s);
          const events = loops.get(s.path) ?? [];
          return (
            <g key={s.path} class={`node state ${s.type}${on ? ' current' : ''}`} transform={`translate(${n.x - n.width / 2},${n.y - n.height / 2})`} data-state={s.path} aria-current={on ? 'true' : undefined}>
              <title>{`${s.path}${on ? ' (current)' : ''}`}</title>
              <rect width={n.width} height={n.height} rx={s.type === 'atomic' ? 14 : 4} />
              <text x={n.width / 2} y="22" text-anchor="middle">
                {s.name}
              </text>
              {lines.map((line, i) => (
                <text key={line} x={n.width / 2} y={22 + (i + 1) * LINE} text-anchor="middle" class={`event loop${events[i] === lastEvent && on ? ' hot' : ''}`}>
                  <title>{`${events[i]} (back into ${s.name})`}</title>
                  {line}
                </text>
              ))}
            </g>
          );
        })}
      </g>
    </GraphFrame>
  );
}
