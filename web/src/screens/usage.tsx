/**
 * Token usage over time (GET /api/stats/tokens/series) per day or month, for the whole server
 * (global admins), a workspace (its members) or an agent (who may see it), and the top agents and
 * workspaces of a day or month (GET /api/stats/tokens/top, global admins). Everything in the URL.
 */
import { searchAgents } from '../api/agents';
import { tokenSeries, tokenTop, type Granularity, type SeriesScope } from '../api/fleet';
import { myWorkspaces } from '../api/workspaces';
import { useLoad } from '../app/hooks';
import { qp, setQuery } from '../app/router';
import { access } from '../app/session';
import { Empty, ErrorNote, Field, Loading, NamedOptions, val } from '../ui/kit';
import { TokenChart, tokenText } from '../ui/token-chart';

function Top({ by, granularity }: { by: 'agent' | 'workspace'; granularity: Granularity }) {
  const top = useLoad(() => tokenTop({ by, granularity, limit: 10 }), [by, granularity]);
  const noun = by === 'agent' ? 'agents' : 'workspaces';
  return (
    <div class="panel">
      <h2>
        Top {noun} {top.data && <span class="muted">({top.data.bucket})</span>}
      </h2>
      <ErrorNote error={top.error} />
      {!top.data ? (
        !top.error && <Loading />
      ) : top.data.items.length === 0 ? (
        <Empty title={`No ${by === 'agent' ? 'agent' : 'workspace'} used tokens in this ${granularity}.`}>Agents report tokens with their heartbeats.</Empty>
      ) : (
        <table>
          <thead>
            <tr>
              <th>{by === 'agent' ? 'Agent' : 'Workspace'}</th>
              <th>Tokens</th>
            </tr>
          </thead>
          <tbody>
            {top.data.items.map((i) => (
              <tr key={i.id}>
                <td>
                  <a href={`/usage?scope=${by}&id=${encodeURIComponent(i.id)}&granularity=${granularity}`}>{i.name}</a>
                </td>
                <td>{tokenText(i.tokens)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}

export default function Usage() {
  const a = access.value!;
  const scope = (qp('scope') || (a.globalAdmin ? 'server' : 'workspace')) as SeriesScope;
  const granularity = (qp('granularity') === 'month' ? 'month' : 'day') as Granularity;
  const workspaces = useLoad(() => myWorkspaces(), []);
  const firstWs = workspaces.data?.workspaces[0]?.slug;
  const id = qp('id') || (scope === 'workspace' ? firstWs ?? '' : '');
  const ready = scope === 'server' || id !== '';
  const series = useLoad(() => (ready ? tokenSeries({ scope, id: scope === 'server' ? undefined : id, granularity }) : Promise.resolve(undefined)), [scope, id, granularity, ready]);
  const agentQuery = qp('agentq');
  const found = useLoad(() => (agentQuery.length >= 2 ? searchAgents(agentQuery) : Promise.resolve({ agents: [] })), [agentQuery]);
  const what = scope === 'server' ? 'the whole server' : scope === 'workspace' ? workspaces.data?.workspaces.find((w) => w.slug === id || w.id === id)?.name ?? id : id;
  return (
    <section>
      <h1>Usage</h1>
      <div class="toolbar">
        <Field label="For">
          <select value={scope} onChange={(e) => setQuery({ scope: val(e), id: null })}>
            {a.globalAdmin && <option value="server">The whole server</option>}
            <option value="workspace">A workspace</option>
            <option value="agent">An agent</option>
          </select>
        </Field>
        {scope === 'workspace' && (
          <Field label="Workspace">
            <select value={id} onChange={(e) => setQuery({ id: val(e) || null })}>
              <NamedOptions items={workspaces.data?.workspaces} />
            </select>
          </Field>
        )}
        {scope === 'agent' && (
          <Field label="Agent (name)">
            <input value={agentQuery} list="usage-agents" onInput={(e) => setQuery({ agentq: val(e) || null })} />
          </Field>
        )}
        <Field label="Per">
          <select value={granularity} onChange={(e) => setQuery({ granularity: val(e) === 'month' ? 'month' : null })}>
            <option value="day">Day (last 30)</option>
            <option value="month">Month (last 12)</option>
          </select>
        </Field>
      </div>
      {scope === 'agent' && found.data && found.data.agents.length > 0 && (
        <ul class="inline-list" aria-label="Matching agents">
          {found.data.agents.map((g) => (
            <li key={g.did}>
              <button type="button" class={g.did === id ? 'primary' : ''} onClick={() => setQuery({ id: g.did })}>
                {g.name}
              </button>
            </li>
          ))}
        </ul>
      )}
      <ErrorNote error={series.error} />
      {!ready ? (
        <Empty title={scope === 'agent' ? 'Choose an agent.' : 'Choose a workspace.'}>{scope === 'agent' ? 'Type part of its name above, then pick it.' : 'You are not a member of a workspace yet.'}</Empty>
      ) : series.data ? (
        <>
          <h2>
            Tokens per {granularity} for {what}
          </h2>
          <TokenChart series={series.data} label={`Tokens per ${granularity} for ${what}`} />
        </>
      ) : (
        !series.error && <Loading what="Reading token usage" />
      )}
      {a.globalAdmin && (
        <div class="cards">
          <Top by="agent" granularity={granularity} />
          <Top by="workspace" granularity={granularity} />
        </div>
      )}
    </section>
  );
}
