/**
 * One workflow: its DAG, its definition (edited and checked before saving), its runs (a run's
 * steps drawn on the DAG by status, cancel), starting a run, and its schedules with their next
 * firing times. The runs follow the feed's runs topic narrowed to the workflow.
 */
import { useState } from 'preact/hooks';
import * as wf from '../api/workflows';
import { describeError } from '../api/http';
import { useLoad, useSoon } from '../app/hooks';
import { useTopic } from '../app/topics';
import { navigate, qp, setQuery } from '../app/router';
import type { ScreenProps } from '../app/routes';
import { access } from '../app/session';
import { Dag } from '../ui/dag';
import { RunBadge, RunStatusFilter, runHref, statusKind } from '../ui/runs';
import { Action, Badge, Did, Empty, ErrorNote, Field, Json, Loading, Pager, Table, Tabs, Time, val } from '../ui/kit';
import { checkDefinition } from './workflow-check';


function RunView({ workflow, runId, mayRun }: { workflow: wf.Workflow; runId: string; mayRun: boolean }) {
  const run = useLoad(() => wf.getRun(workflow.id, runId), [workflow.id, runId]);
  const reload = useSoon(run.reload, 300);
  useTopic('runs', { workflowId: workflow.id }, (f) => (f.type === 'resync' || (f.type === 'run' && f.runId === runId)) && reload(), run.data?.status === 'running');
  const [error, setError] = useState<unknown>(null);
  const r = run.data;
  if (run.error) return <ErrorNote error={run.error} />;
  if (!r) return <Loading what="Loading the run" />;
  const status = Object.fromEntries(Object.entries(r.steps).map(([k, v]) => [k, v.status]));
  return (
    <div class="panel">
      <div class="row">
        <h3>
          Run <code>{r.runId}</code> <RunBadge status={r.status} />
        </h3>
        {mayRun && r.status === 'running' && (
          <Action
            kind="danger"
            onRun={async () => {
              run.set(await wf.cancelRun(workflow.id, r.runId));
            }}
            onError={setError}
          >
            Cancel the run
          </Action>
        )}
      </div>
      <p class="muted">
        Started <Time iso={r.startedAt} absolute /> {r.startedBy.did && <>by <Did did={r.startedBy.did} /></>} {r.startedBy.type === 'schedule' && 'by a schedule'}
        {r.completedAt && (
          <>
            {' '}
            · ended <Time iso={r.completedAt} absolute />
          </>
        )}
      </p>
      <p>
        <a href={runHref(workflow.id, r.runId)}>The run's timeline</a>: each step's attempts over time.
      </p>
      {r.error && <div class="note error">{r.error}</div>}
      <ErrorNote error={error} />
      <Dag steps={workflow.definition.steps} status={status} label={`Steps of run ${r.runId} by status`} />
      <Table head={['Step', 'Status', 'Attempts', 'Duration', 'Output or error']}>
        {workflow.definition.steps.map((s) => {
          const st = r.steps[s.id];
          return (
            <tr key={s.id}>
              <td>
                {s.name} <code>{s.id}</code>
              </td>
              <td>
                <Badge kind={statusKind(st?.status ?? '')}>{st?.status ?? '—'}</Badge>
                {st?.retryAt && (
                  <div class="muted">
                    next attempt <Time iso={st.retryAt} />
                  </div>
                )}
              </td>
              <td>{st?.attempts ?? 0}</td>
              <td>{st?.durationMs != null ? `${(st.durationMs / 1000).toFixed(2)} s` : '—'}</td>
              <td>{st?.error ? <span class="unverified">{st.error}</span> : st?.output != null ? <Json value={st.output} /> : '—'}</td>
            </tr>
          );
        })}
      </Table>
    </div>
  );
}

function Runs({ workflow, mayRun }: { workflow: wf.Workflow; mayRun: boolean }) {
  const page = Math.max(1, Number(qp('page', '1')) || 1);
  const status = qp('status') as wf.RunStatus | '';
  const runs = useLoad(() => wf.listRuns(workflow.id, { page, pageSize: 20, status: status || undefined }), [workflow.id, page, status]);
  const reload = useSoon(runs.reload, 500);
  useTopic('runs', { workflowId: workflow.id }, (f) => (f.type === 'resync' || (f.type === 'run' && f.stepId === undefined)) && reload());
  const [params, setParams] = useState('{}');
  const [error, setError] = useState<unknown>(null);
  const [paramsError, setParamsError] = useState<string | null>(null);
  const selected = qp('run');
  return (
    <div>
      {mayRun && (
        <div class="panel">
          <h3>Start a run</h3>
          <Field label="Params (JSON object; they override the definition's variables)" error={paramsError}>
            <input value={params} onInput={(e) => setParams(val(e))} class="mono" />
          </Field>
          <Action
            kind="primary"
            onRun={async () => {
              let p: unknown;
              try {
                p = JSON.parse(params || '{}');
              } catch {
                return setParamsError('Not valid JSON.');
              }
              if (typeof p !== 'object' || p === null || Array.isArray(p)) return setParamsError('A JSON object.');
              setParamsError(null);
              try {
                const r = await wf.startRun(workflow.id, p as Record<string, unknown>);
                runs.reload();
                setQuery({ run: r.runId });
              } catch (err) {
                setError(err);
              }
            }}
          >
            Run now
          </Action>
        </div>
      )}
      <ErrorNote error={runs.error ?? error} />
      {selected && <RunView key={selected} workflow={workflow} runId={selected} mayRun={mayRun} />}
      <div class="toolbar">
        <RunStatusFilter value={status} onChange={(v) => setQuery({ status: v, page: null })} />
      </div>
      {!runs.data ? (
        runs.loading && <Loading />
      ) : runs.data.runs.length === 0 ? (
        <Empty title="No run yet.">{mayRun ? 'Start one above.' : 'Operators and up start runs.'}</Empty>
      ) : (
        <>
          <Table head={['Run', 'Status', 'Started', 'Ended']}>
            {runs.data.runs.map((r) => (
              <tr key={r.runId}>
                <td>
                  <a href={`/workflows/${workflow.id}?tab=runs&run=${r.runId}`}>
                    <code>{r.runId}</code>
                  </a>
                </td>
                <td>
                  <RunBadge status={r.status} />
                </td>
                <td>
                  <Time iso={r.startedAt} />
                </td>
                <td>
                  <Time iso={r.completedAt} />
                </td>
              </tr>
            ))}
          </Table>
          <Pager page={runs.data.page} totalPages={runs.data.totalPages} total={runs.data.total} noun="run" onPage={(p) => setQuery({ page: p > 1 ? p : null })} />
        </>
      )}
    </div>
  );
}

function Schedules({ workflow, mayEdit }: { workflow: wf.Workflow; mayEdit: boolean }) {
  const list = useLoad(() => wf.listSchedules({ workflowId: workflow.id }), [workflow.id]);
  const [form, setForm] = useState({ cron: '0 9 * * 1-5', timezone: Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC', params: '{}' });
  const [error, setError] = useState<unknown>(null);
  const [formError, setFormError] = useState<string | null>(null);
  return (
    <div>
      <ErrorNote error={list.error ?? error} />
      {!list.data ? (
        list.loading && <Loading />
      ) : list.data.schedules.length === 0 ? (
        <Empty title="No schedule.">{mayEdit ? 'Add one below to run this workflow by cron.' : ''}</Empty>
      ) : (
        <Table head={['Cron', 'Time zone', 'Next firing', 'Last run', <span class="muted">Actions</span>]}>
          {list.data.schedules.map((s) => (
            <tr key={s.id}>
              <td>
                <code>{s.cron}</code>
              </td>
              <td>{s.timezone}</td>
              <td>{s.nextRunAt ? <Time iso={s.nextRunAt} absolute /> : '—'}</td>
              <td>{s.lastRunId ? <a href={`/workflows/${workflow.id}?tab=runs&run=${s.lastRunId}`}><Time iso={s.lastRunAt} /></a> : '—'}</td>
              <td>
                {mayEdit && (
                  <Action
                    kind="danger"
                    onRun={async () => {
                      await wf.deleteSchedule(s.id);
                      list.reload();
                    }}
                    onError={setError}
                  >
                    Delete
                  </Action>
                )}
              </td>
            </tr>
          ))}
        </Table>
      )}
      {mayEdit && (
        <div class="panel">
          <h3>New schedule</h3>
          <div class="row">
            <Field label="Cron expression" hint="minute hour day month weekday, e.g. 0 9 * * 1-5">
              <input value={form.cron} onInput={(e) => setForm({ ...form, cron: val(e) })} class="mono" />
            </Field>
            <Field label="Time zone">
              <input value={form.timezone} onInput={(e) => setForm({ ...form, timezone: val(e) })} />
            </Field>
            <Field label="Params (JSON)" error={formError}>
              <input value={form.params} onInput={(e) => setForm({ ...form, params: val(e) })} class="mono" />
            </Field>
            <Action
              kind="primary"
              onRun={async () => {
                let p: unknown;
                try {
                  p = JSON.parse(form.params || '{}');
                } catch {
                  return setFormError('Not valid JSON.');
                }
                if (typeof p !== 'object' || p === null || Array.isArray(p)) return setFormError('A JSON object.');
                if (form.cron.trim().split(/\s+/).length < 5) return setFormError('A cron expression has five (or six) fields.');
                setFormError(null);
                setError(null);
                try {
                  await wf.createSchedule({ workflowId: workflow.id, cron: form.cron.trim(), timezone: form.timezone.trim() || 'UTC', params: p as Record<string, unknown> });
                  list.reload();
                } catch (err) {
                  setError(err);
                }
              }}
            >
              Add schedule
            </Action>
          </div>
        </div>
      )}
    </div>
  );
}

function Definition({ workflow, mayEdit, onSaved }: { workflow: wf.Workflow; mayEdit: boolean; onSaved: (w: wf.Workflow) => void }) {
  const [text, setText] = useState(JSON.stringify(workflow.definition, null, 2));
  const [problems, setProblems] = useState<string[]>([]);
  const [error, setError] = useState<unknown>(null);
  const [saved, setSaved] = useState(false);
  const preview = checkDefinition(text);
  return (
    <div class="grid2">
      <div>
        <Field label="Definition (JSON)">
          <textarea class="code" spellcheck={false} readOnly={!mayEdit} value={text} onInput={(e) => (setText(val(e)), setSaved(false))} />
        </Field>
        {problems.length > 0 && (
          <div class="note error" role="alert">
            <strong>Not saved; the definition has problems:</strong>
            <ul>
              {problems.map((p) => (
                <li key={p}>{p}</li>
              ))}
            </ul>
          </div>
        )}
        <ErrorNote error={error} />
        {saved && <div class="note ok">Saved. Runs already started keep the definition they started with.</div>}
        {mayEdit && (
          <Action
            kind="primary"
            onRun={async () => {
              const c = checkDefinition(text);
              setProblems(c.problems);
              if (!c.definition) return;
              setError(null);
              const r = await wf.patchWorkflow(workflow.id, { definition: c.definition });
              onSaved(r.workflow);
              setSaved(true);
            }}
            onError={setError}
          >
            Check and save
          </Action>
        )}
      </div>
      <div>
        <h3>Preview</h3>
        {preview.definition ? <Dag steps={preview.definition.steps} label="Preview of the edited definition" /> : <p class="muted">The preview appears when the definition is valid.</p>}
      </div>
    </div>
  );
}

export default function WorkflowPage({ params }: ScreenProps) {
  const a = access.value!;
  const w = useLoad(() => wf.getWorkflow(params.id!), [params.id]);
  const tab = qp('tab', 'graph');
  const workflow = w.data?.workflow;
  const mayEdit = !!workflow && a.atLeast('admin', workflow.workspaceId);
  const mayRun = !!workflow && a.atLeast('operator', workflow.workspaceId);
  return (
    <section>
      <p>
        <a href="/workflows">← Workflows</a>
      </p>
      <ErrorNote error={w.error} />
      {!workflow ? (
        w.loading && <Loading what="Loading the workflow" />
      ) : (
        <>
          <h1>{workflow.name}</h1>
          {workflow.description && <p class="muted">{workflow.description}</p>}
          {mayEdit && (
            <div class="actions">
              <Action
                kind="danger"
                confirm={`Delete ${workflow.name}? Running runs are cancelled; its runs and schedules are deleted.`}
                onRun={async () => {
                  try {
                    await wf.deleteWorkflow(workflow.id);
                    navigate('/workflows');
                  } catch (err) {
                    alert(describeError(err));
                  }
                }}
              >
                Delete workflow
              </Action>
            </div>
          )}
          <Tabs
            label="Workflow sections"
            current={tab}
            onSelect={(t) => setQuery({ tab: t === 'graph' ? null : t, run: null, page: null, status: null })}
            tabs={[
              { id: 'graph', label: 'Graph' },
              { id: 'definition', label: 'Definition' },
              { id: 'runs', label: 'Runs' },
              { id: 'schedules', label: 'Schedules' },
            ]}
          />
          {tab === 'graph' && <Dag steps={workflow.definition.steps} label={`Steps of ${workflow.name}`} />}
          {tab === 'definition' && <Definition workflow={workflow} mayEdit={mayEdit} onSaved={(x) => w.set({ workflow: x })} />}
          {tab === 'runs' && <Runs workflow={workflow} mayRun={mayRun} />}
          {tab === 'schedules' && <Schedules workflow={workflow} mayEdit={mayEdit} />}
        </>
      )}
    </section>
  );
}
