/** Workflows of the caller's workspaces, and a new one (workspace admins) with its definition checked before it is sent. */
import { useState } from 'preact/hooks';
import { createWorkflow, listWorkflows } from '../api/workflows';
import { myWorkspaces } from '../api/workspaces';
import { useLoad } from '../app/hooks';
import { navigate, qp, setQuery } from '../app/router';
import { access } from '../app/session';
import { Action, Empty, ErrorNote, Field, Loading, NamedOptions, Table, Time, val, WorkspaceSelect } from '../ui/kit';
import { checkDefinition } from './workflow-check';

const EXAMPLE = JSON.stringify(
  {
    variables: { region: 'eu' },
    steps: [
      { id: 'fetch', name: 'Fetch the report', action: 'api_call', params: { url: 'https://reports.example/{{variables.region}}' } },
      { id: 'wait', name: 'Wait a second', action: 'delay', params: { ms: 1000 }, dependsOn: ['fetch'] },
    ],
  },
  null,
  2,
);

export default function Workflows() {
  const a = access.value!;
  const workspaces = useLoad(() => myWorkspaces(), []);
  const wsFilter = qp('ws');
  const list = useLoad(() => listWorkflows({ workspaceId: wsFilter || undefined }), [wsFilter]);
  const adminOf = workspaces.data?.workspaces.filter((w) => a.atLeast('admin', w.id)) ?? [];
  const [creating, setCreating] = useState(false);
  const [form, setForm] = useState({ name: '', description: '', workspaceId: '', definition: EXAMPLE });
  const [problems, setProblems] = useState<string[]>([]);
  const [error, setError] = useState<unknown>(null);
  const wsName = (id: string) => workspaces.data?.workspaces.find((w) => w.id === id)?.name ?? id;
  return (
    <section>
      <h1>Workflows</h1>
      <div class="toolbar">
        <WorkspaceSelect workspaces={workspaces.data?.workspaces} value={wsFilter} all="All visible" onChange={(w) => setQuery({ ws: w })} />
        {adminOf.length > 0 && (
          <button type="button" aria-expanded={creating} onClick={() => setCreating(!creating)}>
            New workflow
          </button>
        )}
      </div>
      {creating && (
        <div class="panel">
          <h2>New workflow</h2>
          <div class="row">
            <Field label="Name">
              <input value={form.name} onInput={(e) => setForm({ ...form, name: val(e) })} />
            </Field>
            <Field label="Workspace">
              <select value={form.workspaceId} onChange={(e) => setForm({ ...form, workspaceId: val(e) })}>
                <option value="">Choose…</option>
                <NamedOptions items={adminOf} by="id" />
              </select>
            </Field>
            <Field label="Description">
              <input value={form.description} onInput={(e) => setForm({ ...form, description: val(e) })} />
            </Field>
          </div>
          <Field label="Definition (JSON)" hint="Steps with id, name, action, params and dependsOn; see docs/workflows.md.">
            <textarea class="code" spellcheck={false} value={form.definition} onInput={(e) => setForm({ ...form, definition: val(e) })} />
          </Field>
          {problems.length > 0 && (
            <div class="note error" role="alert">
              <strong>The definition has problems:</strong>
              <ul>
                {problems.map((p) => (
                  <li key={p}>{p}</li>
                ))}
              </ul>
            </div>
          )}
          <ErrorNote error={error} />
          <Action
            kind="primary"
            onRun={async () => {
              const found: string[] = [];
              if (!form.name.trim()) found.push('Give the workflow a name.');
              if (!form.workspaceId) found.push('Choose its workspace.');
              const checked = checkDefinition(form.definition);
              found.push(...checked.problems);
              setProblems(found);
              if (found.length || !checked.definition) return;
              setError(null);
              const r = await createWorkflow({ name: form.name.trim(), workspaceId: form.workspaceId, definition: checked.definition, ...(form.description ? { description: form.description } : {}) });
              navigate(`/workflows/${r.id}`);
            }}
            onError={setError}
          >
            Check and create
          </Action>
        </div>
      )}
      <ErrorNote error={list.error} />
      {!list.data ? (
        list.loading && <Loading what="Loading workflows" />
      ) : list.data.workflows.length === 0 ? (
        <Empty title="No workflow here.">{adminOf.length ? 'Create one with New workflow.' : 'Workspace admins create workflows.'}</Empty>
      ) : (
        <Table head={['Workflow', 'Workspace', 'Steps', 'Updated']}>
          {list.data.workflows.map((w) => (
            <tr key={w.id}>
              <td>
                <a href={`/workflows/${w.id}`}>{w.name}</a>
                {w.description && <div class="muted">{w.description}</div>}
              </td>
              <td>{wsName(w.workspaceId)}</td>
              <td>{w.stepCount}</td>
              <td>
                <Time iso={w.updatedAt} />
              </td>
            </tr>
          ))}
        </Table>
      )}
    </section>
  );
}
