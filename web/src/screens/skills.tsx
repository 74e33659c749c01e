/** Skills of a workspace, per-agent overrides, and the external library (docs/skills.md). */
import { useState } from 'preact/hooks';
import * as sk from '../api/skills';
import type { Skill } from '../api/skills';
import { listWorkspaceAgents, myWorkspaces } from '../api/workspaces';
import { useLoad } from '../app/hooks';
import { qp, setQuery } from '../app/router';
import { access } from '../app/session';
import { Action, Badge, Did, Empty, ErrorNote, Field, Json, Loading, NamedOptions, Table, Tabs, val, WorkspaceSelect } from '../ui/kit';

function parseObject(text: string): Record<string, unknown> | string {
  try {
    const v = JSON.parse(text || '{}');
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : 'The config must be a JSON object.';
  } catch {
    return 'The config is not valid JSON.';
  }
}

function Overrides({ ws, skill, isAdmin }: { ws: string; skill: Skill; isAdmin: boolean }) {
  const list = useLoad(() => sk.listOverrides(ws, skill.id), [ws, skill.id]);
  const agents = useLoad(() => listWorkspaceAgents(ws), [ws]);
  const [agent, setAgent] = useState('');
  const [enabled, setEnabled] = useState(true);
  const [config, setConfig] = useState('');
  const [error, setError] = useState<unknown>(null);
  return (
    <div>
      <h4>Per-agent overrides</h4>
      <ErrorNote error={list.error ?? error} />
      {list.data?.overrides.length === 0 && <p class="muted">No agent has an override of this skill.</p>}
      <ul class="list">
        {list.data?.overrides.map((o) => (
          <li key={o.agentDid} class="row">
            <Did did={o.agentDid} name={agents.data?.agents.find((x) => x.id === o.agentDid)?.name} />
            {o.enabled ? <Badge>own config</Badge> : <Badge kind="warn">opted out</Badge>}
            {!o.effective && <Badge kind="off">ignored: the skill is required</Badge>}
            {o.config && <code>{JSON.stringify(o.config)}</code>}
            {isAdmin && (
              <Action
                kind="danger"
                onRun={async () => {
                  await sk.deleteOverride(ws, skill.id, o.agentDid);
                  list.reload();
                }}
                onError={setError}
              >
                Remove
              </Action>
            )}
          </li>
        ))}
      </ul>
      {isAdmin && (
        <div class="row">
          <Field label="Agent">
            <select value={agent} onChange={(e) => setAgent(val(e))}>
              <option value="">Choose…</option>
              <NamedOptions items={agents.data?.agents} by="id" />
            </select>
          </Field>
          <label class="check">
            <input type="checkbox" checked={enabled} onChange={(e) => setEnabled(e.currentTarget.checked)} /> Enabled
          </label>
          <Field label="Config for this agent (JSON, empty: the skill's)">
            <input value={config} onInput={(e) => setConfig(val(e))} />
          </Field>
          <Action
            kind="primary"
            disabled={!agent}
            onRun={async () => {
              const c = config.trim() ? parseObject(config) : null;
              if (typeof c === 'string') return setError(new Error(c));
              if (enabled && !c) return setError(new Error('An override that keeps the skill needs its own config; to change nothing, remove the override.'));
              setError(null);
              await sk.setOverride(ws, skill.id, agent, { enabled, config: c });
              list.reload();
            }}
            onError={setError}
          >
            Set override
          </Action>
        </div>
      )}
    </div>
  );
}

function SkillItem({ ws, skill, isAdmin, reload }: { ws: string; skill: Skill; isAdmin: boolean; reload: () => void }) {
  const [open, setOpen] = useState(false);
  const [editing, setEditing] = useState<{ description: string; version: string; isRequired: boolean; config: string; content: string } | null>(null);
  const [error, setError] = useState<unknown>(null);
  return (
    <li class="panel">
      <div class="row">
        <strong>{skill.name}</strong> {skill.version && <Badge>v{skill.version}</Badge>} {skill.isRequired && <Badge kind="warn">required</Badge>}
        <button type="button" class="quiet" aria-expanded={open} onClick={() => setOpen(!open)}>
          {open ? 'Hide' : 'Details'}
        </button>
      </div>
      {skill.description && <p class="muted">{skill.description}</p>}
      {open && (
        <>
          <Json value={skill.config} />
          <ErrorNote error={error} />
          {isAdmin && !editing && (
            <div class="actions">
              <button
                type="button"
                onClick={() => setEditing({ description: skill.description ?? '', version: skill.version ?? '', isRequired: skill.isRequired, config: JSON.stringify(skill.config, null, 2), content: skill.content ?? '' })}
              >
                Edit
              </button>
              <Action
                kind="danger"
                confirm={`Delete the skill ${skill.name}? Agents of the workspace get their new set at once.`}
                onRun={async () => {
                  await sk.deleteSkill(ws, skill.id);
                  reload();
                }}
                onError={setError}
              >
                Delete
              </Action>
            </div>
          )}
          {editing && (
            <div>
              <Field label="Description">
                <input value={editing.description} onInput={(e) => setEditing({ ...editing, description: val(e) })} />
              </Field>
              <Field label="Version">
                <input value={editing.version} onInput={(e) => setEditing({ ...editing, version: val(e) })} />
              </Field>
              <label class="check">
                <input type="checkbox" checked={editing.isRequired} onChange={(e) => setEditing({ ...editing, isRequired: e.currentTarget.checked })} /> Required (agents cannot opt out)
              </label>
              <Field label="Config (JSON object)">
                <textarea class="code" value={editing.config} onInput={(e) => setEditing({ ...editing, config: val(e) })} />
              </Field>
              <Field label="Content (Markdown; leave empty to keep the current content)">
                <textarea class="code" value={editing.content} onInput={(e) => setEditing({ ...editing, content: val(e) })} />
              </Field>
              <div class="actions">
                <Action
                  kind="primary"
                  onRun={async () => {
                    const c = parseObject(editing.config);
                    if (typeof c === 'string') return setError(new Error(c));
                    await sk.updateSkill(ws, skill.id, {
                      description: editing.description || null,
                      version: editing.version.trim() || null,
                      isRequired: editing.isRequired,
                      config: c,
                      ...(editing.content ? { content: editing.content } : {}),
                    });
                    setEditing(null);
                    reload();
                  }}
                  onError={setError}
                >
                  Save
                </Action>
                <button type="button" onClick={() => setEditing(null)}>
                  Cancel
                </button>
              </div>
            </div>
          )}
          <Overrides ws={ws} skill={skill} isAdmin={isAdmin} />
        </>
      )}
    </li>
  );
}

function WorkspaceSkills() {
  const a = access.value!;
  const workspaces = useLoad(() => myWorkspaces(), []);
  const ws = workspaces.data?.workspaces.find((w) => w.slug === qp('ws')) ?? workspaces.data?.workspaces[0];
  const list = useLoad(() => (ws ? sk.listWorkspaceSkills(ws.id) : Promise.resolve({ skills: [] as Skill[] })), [ws?.id]);
  const [form, setForm] = useState({ name: '', description: '', content: '', isRequired: false });
  const [error, setError] = useState<unknown>(null);
  const [nameError, setNameError] = useState<string | null>(null);
  const isAdmin = !!ws && a.atLeast('admin', ws.id);
  return (
    <div>
      <WorkspaceSelect workspaces={workspaces.data?.workspaces} value={ws?.slug ?? ''} onChange={(w) => setQuery({ ws: w })} />
      <ErrorNote error={workspaces.error ?? list.error ?? error} />
      {!list.data ? (
        list.loading && <Loading />
      ) : list.data.skills.length === 0 ? (
        <Empty title="This workspace has no skills.">{a.globalAdmin ? 'Create one below, or install one from the library.' : 'A global admin adds skills.'}</Empty>
      ) : (
        <ul class="list">
          {list.data.skills.map((s) => (
            <SkillItem key={s.id} ws={ws!.id} skill={s} isAdmin={isAdmin} reload={list.reload} />
          ))}
        </ul>
      )}
      {a.globalAdmin && ws && (
        <div class="panel">
          <h3>New skill in {ws.name}</h3>
          <Field label="Name" error={nameError}>
            <input value={form.name} onInput={(e) => setForm({ ...form, name: val(e) })} />
          </Field>
          <Field label="Description">
            <input value={form.description} onInput={(e) => setForm({ ...form, description: val(e) })} />
          </Field>
          <Field label="Content (Markdown)">
            <textarea class="code" value={form.content} onInput={(e) => setForm({ ...form, content: val(e) })} />
          </Field>
          <label class="check">
            <input type="checkbox" checked={form.isRequired} onChange={(e) => setForm({ ...form, isRequired: e.currentTarget.checked })} /> Required
          </label>
          <div class="actions">
            <Action
              kind="primary"
              onRun={async () => {
                if (!form.name.trim()) return setNameError('Give the skill a name.');
                setNameError(null);
                await sk.createSkill({ workspaceId: ws.id, name: form.name.trim(), description: form.description || null, content: form.content, isRequired: form.isRequired });
                setForm({ name: '', description: '', content: '', isRequired: false });
                list.reload();
              }}
              onError={setError}
            >
              Create
            </Action>
          </div>
        </div>
      )}
    </div>
  );
}

function Library() {
  const lib = useLoad(() => sk.library(), []);
  const workspaces = useLoad(() => myWorkspaces(), []);
  const [filter, setFilter] = useState('');
  const [preview, setPreview] = useState<{ id: string; content: string; url: string } | null>(null);
  const [target, setTarget] = useState('');
  const [error, setError] = useState<unknown>(null);
  const [done, setDone] = useState<string | null>(null);
  const entries = (lib.data ?? []).filter((e) => !filter || `${e.name} ${e.description} ${e.source}`.toLowerCase().includes(filter.toLowerCase()));
  return (
    <div>
      <div class="toolbar">
        <Field label="Search the library">
          <input type="search" value={filter} onInput={(e) => setFilter(val(e))} />
        </Field>
        <Field label="Install into">
          <select value={target} onChange={(e) => setTarget(val(e))}>
            <option value="">Choose a workspace…</option>
            <NamedOptions items={workspaces.data?.workspaces} by="id" />
          </select>
        </Field>
      </div>
      <ErrorNote error={lib.error ?? error} />
      {done && <div class="note ok">{done}</div>}
      {!lib.data ? (
        lib.loading && <Loading what="Reading the skills library" />
      ) : entries.length === 0 ? (
        <Empty title="No library entry matches." />
      ) : (
        <Table head={['Skill', 'Source', 'Installs', <span class="muted">Actions</span>]}>
          {entries.slice(0, 200).map((e) => (
            <tr key={e.id}>
              <td>
                {e.name}
                <div class="muted">{e.description}</div>
                {preview?.id === e.id && <pre class="json">{preview.content}</pre>}
              </td>
              <td>
                <a href={e.repoUrl} rel="noreferrer noopener" target="_blank">
                  {e.source}
                </a>
              </td>
              <td>{e.installs.toLocaleString()}</td>
              <td>
                <div class="actions">
                  <Action
                    onRun={async () => {
                      const r = await sk.libraryContent(e.source, e.skillId);
                      setPreview({ id: e.id, ...r });
                    }}
                    onError={setError}
                  >
                    Read
                  </Action>
                  <Action
                    kind="primary"
                    disabled={!target}
                    onRun={async () => {
                      setDone(null);
                      const row = await sk.installFromLibrary({ workspaceId: target, source: e.source, skillId: e.skillId });
                      setDone(`Installed ${row.name} into ${row.workspace_name ?? 'the workspace'}.`);
                    }}
                    onError={setError}
                  >
                    Install
                  </Action>
                </div>
              </td>
            </tr>
          ))}
        </Table>
      )}
    </div>
  );
}

export default function Skills() {
  const a = access.value!;
  const tab = a.globalAdmin && qp('tab') === 'library' ? 'library' : 'workspace';
  return (
    <section>
      <h1>Skills</h1>
      {a.globalAdmin && (
        <Tabs
          label="Skills sections"
          current={tab}
          onSelect={(t) => setQuery({ tab: t === 'workspace' ? null : t })}
          tabs={[
            { id: 'workspace', label: 'Workspace skills' },
            { id: 'library', label: 'Library' },
          ]}
        />
      )}
      {tab === 'workspace' ? <WorkspaceSkills /> : <Library />}
    </section>
  );
}
