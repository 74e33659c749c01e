/** The model registry (admin level) and which models each workspace may use (workspace admins). */
import { useState } from 'preact/hooks';
import { createModel, deleteModel, listModels, updateModel } from '../api/models';
import { grantWorkspaceModel, listWorkspaceModels, listWorkspaces, revokeWorkspaceModel } from '../api/workspaces';
import { useLoad } from '../app/hooks';
import { qp, setQuery } from '../app/router';
import { access } from '../app/session';
import { Action, Badge, Empty, ErrorNote, Field, Loading, NamedOptions, Table, Time, val } from '../ui/kit';

function Registry() {
  const list = useLoad(() => listModels(), []);
  const [form, setForm] = useState({ name: '', provider: 'openai-compatible', modelId: '', baseUrl: '', description: '' });
  const [errors, setErrors] = useState<Record<string, string>>({});
  const [error, setError] = useState<unknown>(null);
  const set = (k: keyof typeof form) => (e: Event) => setForm({ ...form, [k]: (e.currentTarget as HTMLInputElement).value });
  const create = async () => {
    const e: Record<string, string> = {};
    if (!form.name.trim()) e.name = 'Required.';
    if (!form.provider.trim()) e.provider = 'Required.';
    if (!form.modelId.trim()) e.modelId = 'Required.';
    if (form.provider === 'openai-compatible' && !form.baseUrl.trim()) e.baseUrl = 'Required for an openai-compatible provider.';
    if (form.baseUrl && !/^https?:\/\//.test(form.baseUrl)) e.baseUrl = 'An http:// or https:// address.';
    setErrors(e);
    if (Object.keys(e).length) return;
    setError(null);
    try {
      await createModel({ name: form.name.trim(), provider: form.provider.trim(), modelId: form.modelId.trim(), ...(form.baseUrl ? { baseUrl: form.baseUrl.trim() } : {}), ...(form.description ? { description: form.description } : {}) });
      setForm({ ...form, name: '', modelId: '', description: '' });
      list.reload();
    } catch (err) {
      setError(err);
    }
  };
  return (
    <section>
      <h2>Registry</h2>
      <ErrorNote error={list.error ?? error} />
      {!list.data ? (
        list.loading && <Loading />
      ) : list.data.models.length === 0 ? (
        <Empty title="No model registered.">Register one below, then grant it to workspaces.</Empty>
      ) : (
        <Table head={['Name', 'Provider / model', 'Proxy name', 'Status', 'Created', <span class="muted">Actions</span>]}>
          {list.data.models.map((m) => (
            <tr key={m.id}>
              <td>
                {m.name}
                {m.description && <div class="muted">{m.description}</div>}
              </td>
              <td>
                {m.provider} <code>{m.modelId}</code>
                {m.baseUrl && <div class="muted">{m.baseUrl}</div>}
              </td>
              <td>{m.proxyModelName ? <code>{m.proxyModelName}</code> : '—'}</td>
              <td>{m.status === 'active' ? <Badge kind="ok">active</Badge> : <Badge kind="off">inactive</Badge>}</td>
              <td>
                <Time iso={m.createdAt} />
              </td>
              <td>
                <div class="actions">
                  <Action
                    onRun={async () => {
                      await updateModel(m.id, { status: m.status === 'active' ? 'inactive' : 'active' });
                      list.reload();
                    }}
                    onError={setError}
                  >
                    {m.status === 'active' ? 'Deactivate' : 'Activate'}
                  </Action>
                  <Action
                    kind="danger"
                    confirm={`Delete ${m.name}? Workspaces lose their access to it.`}
                    onRun={async () => {
                      await deleteModel(m.id);
                      list.reload();
                    }}
                    onError={setError}
                  >
                    Delete
                  </Action>
                </div>
              </td>
            </tr>
          ))}
        </Table>
      )}
      <div class="panel">
        <h3>Register a model</h3>
        <div class="row">
          <Field label="Name" error={errors.name}>
            <input value={form.name} onInput={set('name')} />
          </Field>
          <Field label="Provider" error={errors.provider}>
            <input value={form.provider} onInput={set('provider')} list="providers" />
            <datalist id="providers">
              <option value="openai-compatible" />
              <option value="openai" />
              <option value="anthropic" />
            </datalist>
          </Field>
          <Field label="Model id" error={errors.modelId}>
            <input value={form.modelId} onInput={set('modelId')} />
          </Field>
          <Field label="Base URL" error={errors.baseUrl}>
            <input value={form.baseUrl} onInput={set('baseUrl')} placeholder="https://…/v1" />
          </Field>
          <Field label="Description">
            <input value={form.description} onInput={set('description')} />
          </Field>
        </div>
        <Action kind="primary" onRun={create}>
          Register
        </Action>
      </div>
    </section>
  );
}

function WorkspaceAccess() {
  const a = access.value!;
  const workspaces = useLoad(() => listWorkspaces(), []);
  const adminOf = workspaces.data?.workspaces.filter((w) => a.atLeast('admin', w.id)) ?? [];
  const ws = adminOf.find((w) => w.slug === qp('ws')) ?? adminOf[0];
  const granted = useLoad(() => (ws ? listWorkspaceModels(ws.id) : Promise.resolve({ models: [] })), [ws?.id]);
  const registry = useLoad(() => (a.adminLevel ? listModels() : Promise.resolve({ models: [] })), []);
  const [pick, setPick] = useState('');
  const [error, setError] = useState<unknown>(null);
  if (workspaces.data && adminOf.length === 0) return null;
  const available = registry.data?.models.filter((m) => !granted.data?.models.some((g) => g.id === m.id)) ?? [];
  return (
    <section>
      <h2>Workspace model access</h2>
      <Field label="Workspace">
        <select value={ws?.slug ?? ''} onChange={(e) => setQuery({ ws: val(e) })}>
          <NamedOptions items={adminOf} />
        </select>
      </Field>
      <ErrorNote error={granted.error ?? error} />
      {granted.data && (granted.data.models.length === 0 ? <Empty title="This workspace may use no registry model yet." /> : (
        <ul class="list">
          {granted.data.models.map((m) => (
            <li key={m.id} class="row">
              <span>
                {m.name} <code>{m.proxyModelName ?? m.modelId}</code>
              </span>
              <Action
                kind="danger"
                onRun={async () => {
                  await revokeWorkspaceModel(ws!.id, m.id);
                  granted.reload();
                }}
                onError={setError}
              >
                Revoke
              </Action>
            </li>
          ))}
        </ul>
      ))}
      {a.adminLevel && ws && (
        <div class="row">
          <Field label="Grant a model">
            <select value={pick} onChange={(e) => setPick(val(e))}>
              <option value="">Choose…</option>
              <NamedOptions items={available} by="id" />
            </select>
          </Field>
          <Action
            kind="primary"
            disabled={!pick}
            onRun={async () => {
              await grantWorkspaceModel(ws.id, pick);
              setPick('');
              granted.reload();
            }}
            onError={setError}
          >
            Grant
          </Action>
        </div>
      )}
    </section>
  );
}

export default function Models() {
  const a = access.value!;
  return (
    <section>
      <h1>Models</h1>
      {a.adminLevel && <Registry />}
      <WorkspaceAccess />
    </section>
  );
}
