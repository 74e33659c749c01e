/**
 * One agent: its certificate (both signatures checked here, in the browser), what is in force
 * against what was approved, workspaces, LLM configuration (the key always masked), effective
 * skills, recent intents and, for operators and up, an intent console; its tokens per day against
 * its budget and, for global admins, its actor's state chart with transitions arriving live.
 */
import { useEffect, useState } from 'preact/hooks';
import * as agents from '../api/agents';
import type { AgentDetail, IntentAnswer } from '../api/agents';
import { listAudit } from '../api/audit';
import { agentSkills } from '../api/skills';
import { listModels } from '../api/models';
import { CAPABILITIES, type Capability, type ResourceLimits } from '../api/types';
import { describeError } from '../api/http';
import { tokenSeries } from '../api/fleet';
import { useLoad } from '../app/hooks';
import { navigate, qp, setQuery } from '../app/router';
import type { ScreenProps } from '../app/routes';
import { access } from '../app/session';
import { checkCertificate, type CertificateChecks } from '../crypto/certificate';
import { ActorView } from '../ui/actor-view';
import { TokenChart } from '../ui/token-chart';
import { Action, Badge, Did, Empty, ErrorNote, Field, Json, Loading, Notice, Swatch, Table, Tabs, Time, val } from '../ui/kit';

function Limits({ limits }: { limits: ResourceLimits | null }) {
  if (!limits) return <span class="muted">no limits</span>;
  return (
    <ul class="list">
      {limits.maxTokensPerDay !== undefined && <li>at most {limits.maxTokensPerDay.toLocaleString()} tokens a day (UTC)</li>}
      {limits.maxRequestsPerHour !== undefined && <li>at most {limits.maxRequestsPerHour.toLocaleString()} intents an hour</li>}
      {limits.allowedDomains && <li>domains (advisory): {limits.allowedDomains.join(', ') || 'none'}</li>}
    </ul>
  );
}

function Check({ label, check }: { label: string; check: CertificateChecks['server'] | undefined }) {
  if (!check) return <span class="muted">checking {label}…</span>;
  return check.ok ? (
    <span class="verified" data-testid={`sig-${label}`}>
      ✓ verified
    </span>
  ) : (
    <span class="unverified" data-testid={`sig-${label}`}>
      ✗ not verified: {check.reason}
    </span>
  );
}

function Overview({ agent }: { agent: AgentDetail }) {
  const [checks, setChecks] = useState<CertificateChecks | null>(null);
  const cert = agent.certificate;
  useEffect(() => {
    setChecks(null);
    if (cert) {
      checkCertificate(cert.certificate as unknown as Record<string, unknown>, cert.serverSignature, cert.agentSignature).then(setChecks, (err: unknown) =>
        setChecks({ server: { ok: false, reason: String(err) }, agent: { ok: false, reason: String(err) } }),
      );
    }
  }, [cert?.certificate.serial]);
  const inForce = cert?.certificate.capabilities ?? [];
  return (
    <div class="grid2">
      <section class="panel" aria-labelledby="cert-h">
        <h2 id="cert-h">Certificate</h2>
        {!cert ? (
          <Empty title="No certificate yet.">The agent gets one when it first connects after its approval.</Empty>
        ) : (
          <dl class="facts">
            <dt>Serial</dt>
            <dd>
              <code>{cert.certificate.serial}</code>
            </dd>
            <dt>Issuer</dt>
            <dd>
              <code>{cert.certificate.issuer}</code>
            </dd>
            <dt>Subject</dt>
            <dd>
              <code>{cert.certificate.subject}</code>
            </dd>
            <dt>Issued</dt>
            <dd>
              <Time iso={cert.certificate.issuedAt} absolute />
            </dd>
            <dt>Co-signed</dt>
            <dd>
              <Time iso={cert.acceptedAt} absolute />
            </dd>
            <dt>Steward's signature</dt>
            <dd>
              <Check label="server" check={checks?.server} />
            </dd>
            <dt>Agent's signature</dt>
            <dd>
              <Check label="agent" check={checks?.agent} />
            </dd>
          </dl>
        )}
        <p class="muted">Both signatures are checked by this browser over the RFC 8785 canonical JSON of the certificate.</p>
      </section>
      <section class="panel" aria-labelledby="force-h">
        <h2 id="force-h">In force</h2>
        <h3>Capabilities in the certificate</h3>
        <p>{inForce.length ? inForce.map((c) => <Badge key={c} kind="ok">{c}</Badge>) : <span class="muted">none</span>}</p>
        <h3>Policy limits</h3>
        {cert ? <Limits limits={cert.certificate.resourceLimits} /> : <span class="muted">—</span>}
        <dl class="facts">
          <dt>Policy</dt>
          <dd>{cert?.certificate.policyId ? <code>{cert.certificate.policyId}</code> : 'none (the capabilities approved at registration apply)'}</dd>
          <dt>Policy expires</dt>
          <dd>{cert?.certificate.policyExpiresAt ? <Time iso={cert.certificate.policyExpiresAt} absolute /> : 'never'}</dd>
        </dl>
        <h3>Approved at registration</h3>
        <p>
          {agent.capabilities.length ? agent.capabilities.map((c) => <Badge key={c}>{c}</Badge>) : <span class="muted">none</span>}
        </p>
        {agent.policy && (
          <p class="muted">
            The effective policy is {agent.policy.scope}-scoped (<code>{agent.policy.id}</code>); its capabilities replace the approved ones.
          </p>
        )}
      </section>
      <section class="panel" aria-labelledby="usage-h">
        <h2 id="usage-h">Tokens</h2>
        <dl class="facts">
          <dt>Today</dt>
          <dd>{(agent.tokenUsage.daily.promptTokens + agent.tokenUsage.daily.completionTokens).toLocaleString()}</dd>
          <dt>This month</dt>
          <dd>{(agent.tokenUsage.monthly.promptTokens + agent.tokenUsage.monthly.completionTokens).toLocaleString()}</dd>
          <dt>All time</dt>
          <dd>{(agent.tokenUsage.allTime.promptTokens + agent.tokenUsage.allTime.completionTokens).toLocaleString()}</dd>
        </dl>
      </section>
      <TokenUsage did={agent.id} />
      <section class="panel" aria-labelledby="ws-h">
        <h2 id="ws-h">Workspaces</h2>
        <ul class="list">
          {agent.workspaces.map((w) => (
            <li key={w.id}>
              <Swatch color={w.color} />
              {w.name} {w.isPrimary && <Badge>primary</Badge>}
            </li>
          ))}
        </ul>
      </section>
    </div>
  );
}

/** Tokens per day from the stored series, against the daily budget when the policy sets one. */
function TokenUsage({ did }: { did: string }) {
  const series = useLoad(() => tokenSeries({ scope: 'agent', id: did, granularity: 'day' }), [did]);
  return (
    <section class="panel" aria-labelledby="usage-chart-h">
      <h2 id="usage-chart-h">Tokens per day</h2>
      <ErrorNote error={series.error} />
      {series.data ? <TokenChart series={series.data} label="This agent's tokens each day of the last 30 days, with its daily budget" /> : !series.error && <Loading what="Reading token usage" />}
      <a href={`/usage?scope=agent&id=${encodeURIComponent(did)}`}>By month</a>
    </section>
  );
}

function LlmTab({ agent }: { agent: AgentDetail }) {
  const a = access.value!;
  const config = useLoad(() => agents.getLlmConfig(agent.id), [agent.id]);
  const wsLlm = useLoad(() => agents.getWorkspaceLlm(agent.id), [agent.id]);
  const registry = useLoad(() => (a.adminLevel ? listModels() : Promise.resolve({ models: [] })), [a.adminLevel]);
  const primary = agent.workspaces.find((w) => w.isPrimary);
  const mayEdit = a.adminLevel || a.atLeast('admin', primary?.id);
  const [mode, setMode] = useState<'workspace' | 'registry' | 'manual'>('workspace');
  const [choice, setChoice] = useState('');
  const [manual, setManual] = useState({ provider: '', model: '', baseUrl: '', apiKey: '' });
  const [error, setError] = useState<unknown>(null);
  const [done, setDone] = useState<string | null>(null);
  const c = config.data?.config;

  const save = async () => {
    setError(null);
    setDone(null);
    let body: agents.LlmConfigBody;
    if (mode === 'workspace') {
      const [workspaceId, workspaceModelId] = choice.split('|');
      if (!workspaceId || !workspaceModelId) return setError(new Error('Choose a model of one of the agent’s workspaces.'));
      body = { workspaceId, workspaceModelId };
    } else if (mode === 'registry') {
      if (!choice) return setError(new Error('Choose a registry model.'));
      body = { registryModelId: choice };
    } else {
      if (!manual.provider.trim() || !manual.model.trim()) return setError(new Error('Provider and model are required.'));
      if (manual.baseUrl && !/^https?:\/\//.test(manual.baseUrl)) return setError(new Error('The base URL must start with http:// or https://.'));
      body = { provider: manual.provider.trim(), model: manual.model.trim(), ...(manual.baseUrl ? { baseUrl: manual.baseUrl } : {}), ...(manual.apiKey ? { apiKey: manual.apiKey } : {}) };
    }
    try {
      const r = await agents.putLlmConfig(agent.id, body);
      setManual({ ...manual, apiKey: '' });
      setDone(r.pushed ? 'Saved; the agent received it at once.' : 'Saved; the agent is offline and gets it when it next connects.');
      config.reload();
    } catch (err) {
      setError(err);
    }
  };

  return (
    <div class="grid2">
      <section class="panel">
        <h2>Current configuration</h2>
        <ErrorNote error={config.error} />
        {c ? (
          <dl class="facts">
            <dt>Provider</dt>
            <dd>{c.provider ?? <span class="muted">not set (the agent uses its environment)</span>}</dd>
            <dt>Model</dt>
            <dd>{c.model ?? '—'}</dd>
            <dt>Base URL</dt>
            <dd>{c.baseUrl || '—'}</dd>
            <dt>API key</dt>
            <dd>{c.apiKeySet ? '•••••••• (set; never shown)' : 'none'}</dd>
          </dl>
        ) : (
          config.loading && <Loading />
        )}
        {mayEdit && c?.provider && (
          <div class="actions">
            <Action
              kind="danger"
              onRun={async () => {
                await agents.deleteLlmConfig(agent.id);
                config.reload();
              }}
              onError={setError}
            >
              Remove (agent falls back to its environment)
            </Action>
          </div>
        )}
      </section>
      {mayEdit && (
        <section class="panel">
          <h2>Change</h2>
          <Field label="Source">
            <select
              value={mode}
              onChange={(e) => {
                setMode(val(e) as typeof mode);
                setChoice('');
              }}
            >
              <option value="workspace">A model of one of its workspaces (through the proxy)</option>
              {a.adminLevel && <option value="registry">A registry model</option>}
              <option value="manual">Manual</option>
            </select>
          </Field>
          {mode === 'workspace' && (
            <Field label="Model" hint={wsLlm.data && !wsLlm.data.proxyConfigured ? 'No model proxy is configured on this Steward.' : undefined}>
              <select value={choice} onChange={(e) => setChoice(val(e))}>
                <option value="">Choose…</option>
                {wsLlm.data?.workspaces.flatMap((w) =>
                  w.models.map((m) => (
                    <option key={`${w.workspaceId}|${m.id}`} value={`${w.workspaceId}|${m.id}`}>
                      {w.workspaceName}: {m.name}
                    </option>
                  )),
                )}
              </select>
            </Field>
          )}
          {mode === 'registry' && (
            <Field label="Registry model">
              <select value={choice} onChange={(e) => setChoice(val(e))}>
                <option value="">Choose…</option>
                {registry.data?.models.map((m) => (
                  <option key={m.id} value={m.id}>
                    {m.name} ({m.provider} {m.modelId})
                  </option>
                ))}
              </select>
            </Field>
          )}
          {mode === 'manual' && (
            <>
              <Field label="Provider">
                <input value={manual.provider} onInput={(e) => setManual({ ...manual, provider: val(e) })} placeholder="openai-compatible" />
              </Field>
              <Field label="Model">
                <input value={manual.model} onInput={(e) => setManual({ ...manual, model: val(e) })} />
              </Field>
              <Field label="Base URL">
                <input value={manual.baseUrl} onInput={(e) => setManual({ ...manual, baseUrl: val(e) })} placeholder="https://…/v1" />
              </Field>
              <Field label="API key" hint="Sent once, stored encrypted, never shown again.">
                <input type="password" autocomplete="off" value={manual.apiKey} onInput={(e) => setManual({ ...manual, apiKey: val(e) })} />
              </Field>
            </>
          )}
          <ErrorNote error={error} />
          {done && <Notice kind="ok">{done}</Notice>}
          <Action kind="primary" onRun={save}>
            Save
          </Action>
        </section>
      )}
    </div>
  );
}

function SkillsTab({ agent }: { agent: AgentDetail }) {
  const sets = useLoad(() => Promise.all(agent.workspaces.map(async (w) => ({ w, skills: (await agentSkills(w.id, agent.id)).skills }))), [agent.id]);
  if (sets.error) return <ErrorNote error={sets.error} />;
  if (!sets.data) return <Loading what="Loading skills" />;
  const all = sets.data.flatMap((s) => s.skills.map((k) => ({ ...k, ws: s.w })));
  if (all.length === 0) return <Empty title="This agent gets no skills.">Skills are added per workspace under Skills.</Empty>;
  return (
    <Table head={['Skill', 'Workspace', 'Version', 'Required', 'Config in effect']}>
      {all.map((k) => (
        <tr key={`${k.ws.id}:${k.id}`}>
          <td>
            {k.name}
            <br />
            <span class="muted">{k.description}</span>
          </td>
          <td>{k.ws.name}</td>
          <td>{k.version ?? '—'}</td>
          <td>{k.isRequired ? 'yes' : 'no'}</td>
          <td>
            <Json value={k.config} />
          </td>
        </tr>
      ))}
    </Table>
  );
}

interface SentIntent {
  at: string;
  action: string;
  answer?: IntentAnswer;
  error?: unknown;
}

function IntentsTab({ agent }: { agent: AgentDetail }) {
  const a = access.value!;
  const mayAct = agent.workspaces.some((w) => a.atLeast('operator', w.id));
  const certCaps = agent.certificate?.certificate.capabilities ?? agent.capabilities;
  const [action, setAction] = useState<Capability>(certCaps[0] ?? 'api_call');
  const [params, setParams] = useState('{}');
  const [timeout, setTimeoutS] = useState('30');
  const [formError, setFormError] = useState<string | null>(null);
  const [sent, setSent] = useState<SentIntent[]>([]);
  const audit = useLoad(() => (a.globalAdmin ? listAudit({ action: 'intent.send', target: agent.id, pageSize: 20 }) : Promise.resolve(null)), [agent.id, sent.length]);

  const send = async () => {
    let parsed: unknown;
    try {
      parsed = JSON.parse(params || '{}');
    } catch {
      return setFormError('The parameters are not valid JSON.');
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return setFormError('The parameters must be a JSON object.');
    const t = Number(timeout);
    if (!Number.isFinite(t) || t < 0.1 || t > 300) return setFormError('The timeout is between 0.1 and 300 seconds.');
    setFormError(null);
    const entry: SentIntent = { at: new Date().toISOString(), action };
    try {
      entry.answer = await agents.sendIntent(agent.id, { action, params: parsed as Record<string, unknown>, timeoutMs: Math.round(t * 1000) });
    } catch (err) {
      entry.error = err;
    }
    setSent((s) => [entry, ...s]);
  };

  return (
    <div class="grid2">
      {mayAct ? (
        <section class="panel" aria-labelledby="console-h">
          <h2 id="console-h">Send an intent</h2>
          <p class="muted">The agent runs its own gates (capability, policy expiry, daily tokens, hourly requests) and answers; a person who is not a global admin also needs a grant covering the action.</p>
          <Field label="Action">
            <select value={action} onChange={(e) => setAction(val(e) as Capability)}>
              {CAPABILITIES.map((c) => (
                <option key={c} value={c}>
                  {c}
                  {certCaps.includes(c) ? '' : ' (not in its certificate)'}
                </option>
              ))}
            </select>
          </Field>
          <Field label="Parameters (JSON object)" error={formError}>
            <textarea class="code" value={params} onInput={(e) => setParams(val(e))} spellcheck={false} />
          </Field>
          <Field label="Wait for the answer (seconds)">
            <input type="number" min="0.1" max="300" step="0.1" value={timeout} onInput={(e) => setTimeoutS(val(e))} />
          </Field>
          <Action kind="primary" onRun={send} disabled={!agent.isOnline}>
            Send
          </Action>
          {!agent.isOnline && <p class="muted">The agent is offline; intents need a connected agent.</p>}
        </section>
      ) : (
        <Notice>Sending intents needs the operator role (or higher) in one of this agent's workspaces.</Notice>
      )}
      <section class="panel" aria-labelledby="recent-h">
        <h2 id="recent-h">Recent intents</h2>
        {sent.length > 0 && <h3>Sent from this page</h3>}
        <ul class="list">
          {sent.map((s, i) => (
            <li key={i} class="msg">
              <div class="meta">
                <Time iso={s.at} /> <code>{s.action}</code>
                {s.answer ? s.answer.ok ? <Badge kind="ok">ok</Badge> : <Badge kind="danger">refused</Badge> : <Badge kind="danger">failed</Badge>}
              </div>
              {s.answer && (s.answer.ok ? <Json value={s.answer.output} /> : <p>{s.answer.error}</p>)}
              {s.error ? <ErrorNote error={s.error} /> : null}
            </li>
          ))}
        </ul>
        {a.globalAdmin ? (
          audit.data && audit.data.entries.length > 0 ? (
            <>
              <h3>From the activity log</h3>
              <Table head={['When', 'By', 'Action', 'Outcome']}>
                {audit.data.entries.map((e) => (
                  <tr key={e.id}>
                    <td>
                      <Time iso={e.at} />
                    </td>
                    <td>
                      <Did did={e.actor} />
                    </td>
                    <td>
                      <code>{String(e.details?.action ?? '')}</code>
                    </td>
                    <td>{String(e.details?.outcome ?? '')}</td>
                  </tr>
                ))}
              </Table>
            </>
          ) : (
            audit.data && sent.length === 0 && <Empty title="No intents yet." />
          )
        ) : (
          sent.length === 0 && <p class="muted">Intents sent by others are in the activity log, which global admins read.</p>
        )}
      </section>
    </div>
  );
}

const TABS = [
  { id: 'overview', label: 'Overview' },
  { id: 'llm', label: 'LLM configuration' },
  { id: 'skills', label: 'Skills' },
  { id: 'intents', label: 'Intents' },
];
/** Actors are for global admins: only they see the agent's state chart. */
const ADMIN_TABS = [...TABS, { id: 'actor', label: 'State chart' }];

export default function AgentPage({ params }: ScreenProps) {
  const did = params.did!;
  const a = access.value!;
  const detail = useLoad(() => agents.getAgent(did), [did]);
  const tab = qp('tab', 'overview');
  const agent = detail.data?.agent;
  const primary = agent?.workspaces.find((w) => w.isPrimary);
  const mayDelete = a.globalAdmin || (primary && a.atLeast('admin', primary.id));
  return (
    <section>
      <p>
        <a href="/agents">← Agents</a>
      </p>
      <ErrorNote error={detail.error} />
      {!agent ? (
        detail.loading && <Loading what="Loading the agent" />
      ) : (
        <>
          <h1>
            {agent.name} {agent.isOnline ? <Badge kind="ok">online</Badge> : <Badge kind="off">offline</Badge>}
          </h1>
          <p>
            <code>{agent.id}</code>
          </p>
          <p class="muted">
            Version {agent.version ?? '—'} · registered <Time iso={agent.registeredAt} /> · last seen <Time iso={agent.lastSeen} />
          </p>
          <div class="actions">
            <button type="button" onClick={detail.reload}>
              Refresh
            </button>
            {mayDelete && (
              <Action
                kind="danger"
                confirm={`Decommission ${agent.name}? Its socket is closed, its certificate, policies and memberships are deleted, and its key would have to register again.`}
                onRun={async () => {
                  try {
                    await agents.deleteAgent(agent.id);
                    navigate('/agents');
                  } catch (err) {
                    alert(describeError(err));
                  }
                }}
              >
                Decommission
              </Action>
            )}
          </div>
          <Tabs tabs={a.globalAdmin ? ADMIN_TABS : TABS} current={tab} label="Agent sections" onSelect={(t) => setQuery({ tab: t === 'overview' ? null : t })} />
          {tab === 'overview' && <Overview agent={agent} />}
          {tab === 'llm' && <LlmTab agent={agent} />}
          {tab === 'skills' && <SkillsTab agent={agent} />}
          {tab === 'intents' && <IntentsTab agent={agent} />}
          {tab === 'actor' && a.globalAdmin && <ActorView kind="agent" id={agent.id} showContext={true} />}
        </>
      )}
    </section>
  );
}
