/**
 * A workflow drawn as a graph: steps are nodes, `dependsOn` edges point from a step to the ones
 * waiting for it. Laid out by dagre, drawn as plain SVG (no styles inline: the classes carry a
 * step's status when a run is shown).
 */
import { Graph, layout } from '@dagrejs/dagre';
import type { ComponentChildren } from 'preact';
import type { StepStatus, WorkflowStep } from '../api/workflows';

/** A laid-out graph's frame: the SVG of its size with an arrowhead marker (`url(#<arrowId>)`). */
export function GraphFrame({ width, height, label, arrowId, extraClass, children }: { width: number; height: number; label: string; arrowId: string; extraClass?: string; children: ComponentChildren }) {
  return (
    <div class={extraClass ? `dag ${extraClass}` : 'dag'}>
      <svg width={width} height={height} viewBox={`0 0 ${width} ${height}`} role="img" aria-label={label}>
        <defs>
          <marker id={arrowId} viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">
            <path d="M 0 0 L 10 5 L 0 10 z" class="arrow" />
          </marker>
        </defs>
        {children}
      </svg>
    </div>
  );
}

/** An edge's points as an SVG path. */
export const pathOf = (points: ReadonlyArray<{ x: number; y: number }> | undefined) => (points ?? []).map((p, i) => `${i === 0 ? 'M' : 'L'}${p.x},${p.y}`).join(' ');

const W = 170;
const H = 46;

export function Dag({ steps, status, label }: { steps: WorkflowStep[]; status?: Record<string, StepStatus>; label: string }) {
  const g = new Graph({ multigraph: false });
  g.setGraph({ rankdir: 'LR', nodesep: 24, ranksep: 56, marginx: 12, marginy: 12 });
  g.setDefaultEdgeLabel(() => ({}));
  const ids = new Set(steps.map((s) => s.id));
  for (const s of steps) g.setNode(s.id, { width: W, height: H });
  for (const s of steps) for (const d of s.dependsOn ?? []) if (ids.has(d)) g.setEdge(d, s.id);
  layout(g);
  const info = g.graph();
  const width = Math.ceil(info.width ?? W);
  const height = Math.ceil(info.height ?? H);
  return (
    <GraphFrame width={width} height={height} label={label} arrowId="arrow">
      {g.edges().map((e) => (
        <path key={`${e.v}->${e.w}`} class="edge" d={pathOf(g.edge(e).points)} marker-end="url(#arrow)" />
      ))}
      {steps.map((s) => {
        const n = g.node(s.id);
        const st = status?.[s.id];
        return (
          <g key={s.id} class={`node ${st ?? ''}`} transform={`translate(${n.x - W / 2},${n.y - H / 2})`}>
            <title>{`${s.name} (${s.action})${st ? `: ${st}` : ''}`}</title>
            <rect width={W} height={H} rx="6" />
            <text x="10" y="19">
              {s.name.length > 22 ? `${s.name.slice(0, 21)}…` : s.name}
            </text>
            <text x="10" y="36" class="muted">
              {st ? `${s.action} · ${st}` : s.action}
            </text>
          </g>
        );
      })}
    </GraphFrame>
  );
}
