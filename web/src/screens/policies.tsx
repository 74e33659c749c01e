/**
 * Policies (global admins): the list (expired ones on request), creating one for an agent or a
 * workspace with limits and an expiry, revoking; after each change, which connected agents
 * received a new certificate (`sentTo`).
 */
import { useState } from 'preact/hooks';
import { searchAgents } from '../api/agents';
import { createPolicy, listPolicies, revokePolicy } from '../api/policies';
import { CAPABILITIES, type Capability, type ResourceLimits } from '../api/types';
import { listWorkspaces } from '../api/workspaces';
import { useLoad } from '../app/hooks';
import { qp, setQuery } from '../app/router';
import { Action, Badge, CapabilityChecks, Did, Empty, ErrorNote, Field, Loading, NamedOptions, Notice, Table, Time, val } from '../ui/kit';

function SentTo({ what, sentTo }: { what: string; sentTo: string[] }) {
  return (
    <Notice kind="ok">
      <span data-testid="sent-to">
        {what}{' '}
        {sentTo.length === 0
          ? 'No connected agent was affected now: agents that are offline get their new certificate when they next connect.'
          : `${sentTo.length} connected agent${sentTo.length === 1 ? '' : 's'} received a new certificate:`}
      </span>
      {sentTo.length > 0 && (
        <ul>
          {sentTo.map((d) => (
            <li key={d}>
              <code>{d}</code>
            </li>
          ))}
        </ul>
      )}
    </Notice>
  );
}

function CreatePolicy({ onCreated }: { onCreated: (what: string, sentTo: string[]) => void }) {
  const workspaces = useLoad(() => listWorkspaces(), []);
  const [scope, setScope] = useState<'agent' | 'workspace'>(qp('agent') ? 'agent' : 'workspace');
  const [agentText, setAgentText] = useState(qp('agent'));
  const [agentDid, setAgentDid] = useState(qp('agent'));
  const matches = useLoad(() => (scope === 'agent' && agentText.trim().length >= 2 && !agentText.startsWith('did:') ? searchAgents(agentText.trim()) : Promise.resolve({ agents: [] })), [agentText, scope]);
  const [workspaceId, setWorkspaceId] = useState('');
  const [caps, setCaps] = useState<Capability[]>([]);
  const [tokens, setTokens] = useState('');
  const [requests, setRequests] = useState('');
  const [domains, setDomains] = useState('');
  const [expires, setExpires] = useState('');
  const [errors, setErrors] = useState<Record<string, string>>({});
  const [error, setError] = useState<unknown>(null);

  const submit = async () => {
    const e: Record<string, string> = {};
    const did = agentDid || (agentText.startsWith('did:') ? agentText.trim() : '');
    if (scope === 'agent' && !did) e.agent = 'Choose an agent (type part of its name, or paste its DID).';
    if (scope === 'workspace' && !workspaceId) e.workspace = 'Choose a workspace.';
    if (caps.length === 0) e.caps = 'A policy grants at least one capability.';
    const limits: ResourceLimits = {};
    for (const [k, v, label] of [
      ['maxTokensPerDay', tokens, 'tokens'],
      ['maxRequestsPerHour', requests, 'requests'],
    ] as const) {
      if (v.trim() === '') continue;
      const n = Number(v);
      if (!Number.isInteger(n) || n < 1) e[label] = 'A whole number of at least 1, or empty for no limit.';
      else limits[k] = n;
    }
    if (domains.trim()) {
      const list = domains.split(/[\s,]+/).filter(Boolean);
      const bad = list.find((d) => !/^(\*\.)?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/i.test(d));
      if (bad) e.domains = `'${bad}' is not a host name.`;
      else limits.allowedDomains = list;
    }
    let expiresAt: string | undefined;
    if (expires) {
      const t = new Date(expires);
      if (Number.isNaN(t.getTime()) || t.getTime() <= Date.now()) e.expires = 'The expiry must be in the future.';
      else expiresAt = t.toISOString();
    }
    setErrors(e);
    if (Object.keys(e).length) return;
    setError(null);
    try {
      const r = await createPolicy({
        ...(scope === 'agent' ? { agentDid: did } : { workspaceId }),
        capabilities: caps,
        resourceLimits: Object.keys(limits).length ? limits : null,
        ...(expiresAt ? { expiresAt } : {}),
      });
      onCreated('Policy created.', r.sentTo);
      setCaps([]);
      setTokens('');
      setRequests('');
      setDomains('');
      setExpires('');
    } catch (err) {
      setError(err);
    }
  };

  return (
    <section class="panel" aria-labelledby="new-policy-h">
      <h2 id="new-policy-h">New policy</h2>
      <p class="muted">An agent's effective policy is its newest unexpired agent policy, else the newest of its primary workspace. A policy's capabilities replace those approved at registration.</p>
      <Field label="Applies to">
        <select value={scope} onChange={(e) => setScope(val(e) as 'agent' | 'workspace')}>
          <option value="workspace">A workspace</option>
          <option value="agent">One agent</option>
        </select>
      </Field>
      {scope === 'agent' ? (
        <Field label="Agent" error={errors.agent} hint={agentDid ? <code>{agentDid}</code> : 'Type part of its name, or paste its DID.'}>
          <input
            value={agentText}
            list="policy-agents"
            onInput={(e) => {
              const v = val(e);
              setAgentText(v);
              const m = matches.data?.agents.find((x) => x.name === v || x.did === v);
              setAgentDid(m ? m.did : v.startsWith('did:') ? v.trim() : '');
            }}
          />
          <datalist id="policy-agents">
            {matches.data?.agents.map((m) => (
              <option key={m.did} value={m.did}>
                {m.name}
              </option>
            ))}
          </datalist>
        </Field>
      ) : (
        <Field label="Workspace" error={errors.workspace}>
          <select value={workspaceId} onChange={(e) => setWorkspaceId(val(e))}>
            <option value="">Choose…</option>
            <NamedOptions items={workspaces.data?.workspaces} by="id" />
          </select>
        </Field>
      )}
      <CapabilityChecks legend="Capabilities" options={CAPABILITIES} selected={caps} onChange={(c) => setCaps(c as Capability[])} />
      {errors.caps && <p class="field-error">{errors.caps}</p>}
      <div class="row">
        <Field label="Tokens per day" error={errors.tokens}>
          <input inputMode="numeric" value={tokens} onInput={(e) => setTokens(val(e))} placeholder="no limit" />
        </Field>
        <Field label="Intents per hour" error={errors.requests}>
          <input inputMode="numeric" value={requests} onInput={(e) => setRequests(val(e))} placeholder="no limit" />
        </Field>
        <Field label="Allowed domains (advisory)" error={errors.domains}>
          <input value={domains} onInput={(e) => setDomains(val(e))} placeholder="api.example.com, *.example.org" />
        </Field>
        <Field label="Expires" error={errors.expires}>
          <input type="datetime-local" value={expires} onInput={(e) => setExpires(val(e))} />
        </Field>
      </div>
      <ErrorNote error={error} />
      <div class="actions">
        <Action kind="primary" onRun={submit}>
          Create policy
        </Action>
      </div>
    </section>
  );
}

export default function Policies() {
  const includeExpired = qp('expired') === '1';
  const list = useLoad(() => listPolicies({ includeExpired }), [includeExpired]);
  const workspaces = useLoad(() => listWorkspaces(), []);
  const [result, setResult] = useState<{ what: string; sentTo: string[] } | null>(null);
  const [error, setError] = useState<unknown>(null);
  const wsName = (id: string | null) => workspaces.data?.workspaces.find((w) => w.id === id)?.name ?? id;
  const now = Date.now();
  return (
    <section>
      <h1>Policies</h1>
      {result && <SentTo what={result.what} sentTo={result.sentTo} />}
      <ErrorNote error={error} />
      <CreatePolicy
        onCreated={(what, sentTo) => {
          setResult({ what, sentTo });
          list.reload();
        }}
      />
      <div class="toolbar">
        <label class="check">
          <input type="checkbox" checked={includeExpired} onChange={(e) => setQuery({ expired: e.currentTarget.checked ? '1' : null })} />
          Show expired policies
        </label>
      </div>
      <ErrorNote error={list.error} />
      {!list.data ? (
        list.loading && <Loading what="Loading policies" />
      ) : list.data.policies.length === 0 ? (
        <Empty title="No policy.">Without one, agents work with the capabilities approved at registration and no limits. Create one above.</Empty>
      ) : (
        <Table head={['Applies to', 'Capabilities', 'Limits', 'Expires', 'Created', <span class="muted">Actions</span>]}>
          {list.data.policies.map((p) => {
            const expired = p.expiresAt !== null && new Date(p.expiresAt).getTime() <= now;
            return (
              <tr key={p.id} data-policy={p.id}>
                <td>{p.agentDid ? <a href={`/agents/${encodeURIComponent(p.agentDid)}`}><Did did={p.agentDid} /></a> : <>workspace {wsName(p.workspaceId)}</>}</td>
                <td>
                  {p.capabilities.map((c) => (
                    <Badge key={c}>{c}</Badge>
                  ))}
                </td>
                <td>
                  {p.resourceLimits
                    ? [
                        p.resourceLimits.maxTokensPerDay !== undefined && `${p.resourceLimits.maxTokensPerDay.toLocaleString()} tokens/day`,
                        p.resourceLimits.maxRequestsPerHour !== undefined && `${p.resourceLimits.maxRequestsPerHour} intents/hour`,
                        p.resourceLimits.allowedDomains && `domains: ${p.resourceLimits.allowedDomains.join(', ')}`,
                      ]
                        .filter(Boolean)
                        .join('; ')
                    : '—'}
                </td>
                <td>{p.expiresAt ? <>{expired ? <Badge kind="warn">expired</Badge> : null} <Time iso={p.expiresAt} absolute /></> : 'never'}</td>
                <td>
                  <Time iso={p.createdAt} /> by <Did did={p.createdBy} />
                </td>
                <td>
                  <Action
                    kind="danger"
                    label={`Revoke policy ${p.id}`}
                    confirm="Revoke this policy? Connected agents it applies to get a new certificate at once."
                    onRun={async () => {
                      setError(null);
                      const r = await revokePolicy(p.id);
                      setResult({ what: 'Policy revoked.', sentTo: r.sentTo });
                      list.reload();
                    }}
                    onError={setError}
                  >
                    Revoke
                  </Action>
                </td>
              </tr>
            );
          })}
        </Table>
      )}
    </section>
  );
}
