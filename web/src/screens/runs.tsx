/**
 * Runs across every workflow the person may read (GET /api/runs), newest first: filters (status,
 * workspace, workflow, time range) and paging in the URL; select several and cancel them at once
 * (POST /api/runs/cancel), with each run's outcome said. The list follows the feed's runs topic.
 */
import { useState } from 'preact/hooks';
import { myWorkspaces } from '../api/workspaces';
import { cancelRuns, listAllRuns, type CancelOutcome, type RunStatus } from '../api/workflows';
import { useLoad, useSoon } from '../app/hooks';
import { qp, setQuery } from '../app/router';
import { access } from '../app/session';
import { useTopic } from '../app/topics';
import { Action, Did, Empty, ErrorNote, Field, Loading, Notice, Pager, Time, val, WorkspaceSelect } from '../ui/kit';
import { RunBadge, RunStatusFilter, runHref } from '../ui/runs';

const OUTCOME_TEXT: Record<CancelOutcome, string> = {
  cancelled: 'cancelled',
  already_finished: 'had already finished',
  not_found: 'no longer exists',
  forbidden: 'you may not cancel it (operators of its workspace may)',
};

const toIso = (local: string) => (local ? new Date(local).toISOString() : undefined);

export default function Runs() {
  const a = access.value!;
  const status = qp('status') as RunStatus | '';
  const workspace = qp('workspace');
  const workflowId = qp('workflow');
  const from = qp('from');
  const to = qp('to');
  const page = Math.max(1, Number(qp('page', '1')) || 1);
  const workspaces = useLoad(() => myWorkspaces(), []);
  const list = useLoad(
    () => listAllRuns({ status: status || undefined, workspace: workspace || undefined, workflowId: workflowId || undefined, from: toIso(from), to: toIso(to), page, pageSize: 50 }),
    [status, workspace, workflowId, from, to, page],
  );
  const reload = useSoon(list.reload, 500);
  useTopic('runs', {}, (f) => (f.type === 'resync' || (f.type === 'run' && f.stepId === undefined)) && reload());
  const [selected, setSelected] = useState<Set<string>>(new Set());
  const [outcomes, setOutcomes] = useState<Record<string, CancelOutcome>>({});
  const [error, setError] = useState<unknown>(null);
  const mayCancel = a.globalAdmin || a.atLeast('operator');
  const running = list.data?.runs.filter((r) => r.status === 'running') ?? [];
  const toggle = (id: string, on: boolean) => setSelected((s) => {
    const next = new Set(s);
    if (on) next.add(id);
    else next.delete(id);
    return next;
  });
  const counted = Object.values(outcomes);
  return (
    <section>
      <h1>Runs</h1>
      <div class="toolbar">
        <RunStatusFilter value={status} onChange={(s) => setQuery({ status: s, page: null })} />
        <WorkspaceSelect workspaces={workspaces.data?.workspaces} value={workspace} all="All visible" onChange={(w) => setQuery({ workspace: w, page: null })} />
        <Field label="Started after">
          <input type="datetime-local" value={from} onChange={(e) => setQuery({ from: val(e) || null, page: null })} />
        </Field>
        <Field label="Started before">
          <input type="datetime-local" value={to} onChange={(e) => setQuery({ to: val(e) || null, page: null })} />
        </Field>
        {workflowId && (
          <button type="button" class="quiet" onClick={() => setQuery({ workflow: null, page: null })}>
            Any workflow
          </button>
        )}
      </div>
      {mayCancel && (
        <div class="toolbar">
          <Action
            kind="danger"
            disabled={selected.size === 0}
            onRun={async () => {
              setError(null);
              const r = await cancelRuns([...selected]);
              setOutcomes(Object.fromEntries(r.results.map((x) => [x.runId, x.outcome])));
              setSelected(new Set());
              list.reload();
            }}
            onError={setError}
          >
            Cancel {selected.size || ''} selected
          </Action>
          <span class="muted">Only running runs can be selected.</span>
        </div>
      )}
      <ErrorNote error={list.error ?? error} />
      {counted.length > 0 && (
        <Notice kind={counted.every((o) => o === 'cancelled') ? 'ok' : 'warn'}>
          <span data-testid="cancel-results">
            {counted.filter((o) => o === 'cancelled').length} of {counted.length} cancelled.
          </span>
          <ul>
            {Object.entries(outcomes).map(([id, o]) => (
              <li key={id}>
                <code>{id}</code>: {OUTCOME_TEXT[o]}
              </li>
            ))}
          </ul>
        </Notice>
      )}
      {!list.data ? (
        list.loading && <Loading what="Loading runs" />
      ) : list.data.runs.length === 0 ? (
        <Empty title="No run matches.">{status || workspace || workflowId || from || to ? 'Change or clear the filters above.' : 'Start one from a workflow’s Runs tab, or give a workflow a schedule.'}</Empty>
      ) : (
        <>
          <div class="table-wrap">
            <table>
              <thead>
                <tr>
                  {mayCancel && (
                    <th>
                      <input
                        type="checkbox"
                        aria-label="Select every running run on this page"
                        checked={running.length > 0 && running.every((r) => selected.has(r.runId))}
                        disabled={running.length === 0}
                        onChange={(e) => setSelected(e.currentTarget.checked ? new Set(running.map((r) => r.runId)) : new Set())}
                      />
                    </th>
                  )}
                  <th>Run</th>
                  <th>Workflow</th>
                  <th>Status</th>
                  <th>Started</th>
                  <th>Ended</th>
                  <th>By</th>
                </tr>
              </thead>
              <tbody>
                {list.data.runs.map((r) => (
                  <tr key={r.runId} data-run={r.runId} class={selected.has(r.runId) ? 'selected' : ''}>
                    {mayCancel && (
                      <td>
                        <input
                          type="checkbox"
                          aria-label={`Select run ${r.runId} of ${r.workflowName}`}
                          checked={selected.has(r.runId)}
                          disabled={r.status !== 'running'}
                          onChange={(e) => toggle(r.runId, e.currentTarget.checked)}
                        />
                      </td>
                    )}
                    <td>
                      <a href={runHref(r.workflowId, r.runId)}>
                        <code>{r.runId}</code>
                      </a>
                      {outcomes[r.runId] && <div class="muted">{OUTCOME_TEXT[outcomes[r.runId]!]}</div>}
                    </td>
                    <td>
                      <a href={`/runs?workflow=${encodeURIComponent(r.workflowId)}`} title="Only this workflow's runs">
                        {r.workflowName}
                      </a>
                    </td>
                    <td>
                      <RunBadge status={r.status} />
                      {r.error && <div class="muted">{r.error}</div>}
                    </td>
                    <td>
                      <Time iso={r.startedAt} />
                    </td>
                    <td>
                      <Time iso={r.completedAt} />
                    </td>
                    <td>{r.startedBy.did ? <Did did={r.startedBy.did} /> : r.startedBy.type}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          <Pager page={list.data.page} totalPages={list.data.totalPages} total={list.data.total} noun="run" onPage={(p) => setQuery({ page: p > 1 ? p : null })} />
        </>
      )}
    </section>
  );
}
