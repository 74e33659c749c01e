/** Pieces every view of workflow runs shares: a run's status as a badge and the status filter. */
import type { RunStatus } from '../api/workflows';
import { Badge, Field, val } from './kit';

export const RUN_STATUSES: RunStatus[] = ['running', 'completed', 'failed', 'cancelled'];
export const statusKind = (s: string) => (s === 'completed' || s === 'succeeded' ? 'ok' : s === 'failed' ? 'danger' : s === 'running' ? '' : 'off');

export function RunBadge({ status }: { status: string }) {
  return <Badge kind={statusKind(status)}>{status}</Badge>;
}

export function RunStatusFilter({ value, onChange }: { value: string; onChange: (s: string | null) => void }) {
  return (
    <Field label="Status">
      <select value={value} onChange={(e) => onChange(val(e) || null)}>
        <option value="">Any</option>
        {RUN_STATUSES.map((s) => (
          <option key={s} value={s}>
            {s}
          </option>
        ))}
      </select>
    </Field>
  );
}

/** Where a run's timeline is. */
export const runHref = (workflowId: string, runId: string) => `/workflows/${encodeURIComponent(workflowId)}/runs/${encodeURIComponent(runId)}`;
