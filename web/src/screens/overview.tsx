/**
 * Overview (global admins): the fleet summary as large numbers, every agent's status as a grid
 * (time in state on hover), tokens per day from the stored series, runs failing and registrations
 * waiting. It follows the feed's presence, registrations and runs topics (a frame re-reads the
 * summary, a presence frame also lights its agent at once); the summary is re-read every 60 s
 * only as a fallback, paused while the tab is hidden.
 */
import { useEffect, useState } from 'preact/hooks';
import { fleetSummary, listActors, tokenSeries, type ActorItem } from '../api/fleet';
import { lookupNames } from '../api/people';
import { useLoad, usePoll, useSoon } from '../app/hooks';
import { useTopic } from '../app/topics';
import { ErrorNote, Loading, relative, Table } from '../ui/kit';
import { TokenChart } from '../ui/token-chart';

type AgentStatus = 'online' | 'offline' | 'pending' | 'rejected';
const GRID_SIZE = 100;

/** An agent actor's state in one word. */
export function agentStatus(state: ActorItem['state']): AgentStatus {
  if (state === 'pending' || state === 'rejected') return state;
  if (typeof state === 'object' && state !== null) {
    const active = (state as Record<string, unknown>).active;
    if (active && typeof active === 'object' && (active as Record<string, unknown>).connection === 'online') return 'online';
  }
  return 'offline';
}

function Figure({ label, value, children }: { label: string; value: number | string | null | undefined; children?: preact.ComponentChildren }) {
  return (
    <div class="card">
      <div class="muted">{label}</div>
      <div class="figure" data-figure={label}>
        {value === undefined || value === null ? '…' : typeof value === 'number' ? value.toLocaleString() : value}
      </div>
      {children}
    </div>
  );
}

function StatusGrid() {
  const grid = useLoad(() => listActors({ kind: 'agent', pageSize: GRID_SIZE }), []);
  const [names, setNames] = useState<Record<string, string>>({});
  // Presence frames over the grid as loaded: did -> [online, since].
  const [live, setLive] = useState<Record<string, [boolean, string]>>({});
  useEffect(() => setLive({}), [grid.data]);
  useEffect(() => {
    const dids = grid.data?.actors.map((a) => a.id).filter((d) => !(d in names)) ?? [];
    if (dids.length === 0) return;
    lookupNames(dids).then(
      (r) => setNames((n) => ({ ...n, ...Object.fromEntries(Object.entries(r.names).map(([d, v]) => [d, v.name])) })),
      () => undefined,
    );
  }, [grid.data]);
  const reload = useSoon(grid.reload, 1000);
  useTopic('presence', {}, (f) => {
    if (f.type === 'resync') return reload();
    if (f.type !== 'presence' || typeof f.did !== 'string') return;
    const did = f.did;
    if (!grid.data?.actors.some((a) => a.id === did)) return reload();
    setLive((l) => ({ ...l, [did]: [f.online === true, typeof f.at === 'string' ? f.at : new Date().toISOString()] }));
  });
  useTopic('registrations', {}, (f) => (f.type === 'registration' || f.type === 'resync') && reload());
  if (grid.error) return <ErrorNote error={grid.error} title="The agents' states could not be read." />;
  if (!grid.data) return <Loading what="Reading the agents' states" />;
  if (grid.data.actors.length === 0) return <p class="muted">No agent has registered yet. An agent started with the SDK appears here; see docs/sdk.md.</p>;
  return (
    <>
      <ul class="status-grid" aria-label="Agents by status">
        {grid.data.actors.map((a) => {
          const override = live[a.id];
          const status: AgentStatus = override && agentStatus(a.state) !== 'pending' && agentStatus(a.state) !== 'rejected' ? (override[0] ? 'online' : 'offline') : agentStatus(a.state);
          const since = override?.[1] ?? a.since;
          const name = names[a.id] ?? a.id;
          const text = `${name}: ${status}${since ? ` since ${relative(since)}` : ''}`;
          return (
            <li key={a.id} class={status} data-did={a.id} data-status={status} title={text}>
              <a href={`/agents/${encodeURIComponent(a.id)}`} aria-label={text} />
            </li>
          );
        })}
      </ul>
      <div class="legend muted">
        <span class="online">online</span> <span class="offline">offline</span> <span class="pending">pending</span> <span class="rejected">rejected</span>
        {grid.data.total > GRID_SIZE && <a href="/actors?kind=agent">and {(grid.data.total - GRID_SIZE).toLocaleString()} more</a>}
      </div>
    </>
  );
}

export default function Overview() {
  const summary = useLoad(() => fleetSummary(), []);
  const series = useLoad(() => tokenSeries({ scope: 'server', granularity: 'day' }), []);
  const reread = useSoon(summary.reload, 500);
  useTopic('presence', {}, reread);
  useTopic('registrations', {}, reread);
  useTopic('runs', {}, (f) => (f.type === 'resync' || (f.type === 'run' && f.stepId === undefined)) && reread());
  usePoll(summary.reload, 60_000);
  usePoll(series.reload, 5 * 60_000);
  const s = summary.data;
  return (
    <section>
      <h1>Overview</h1>
      <ErrorNote error={summary.error} />
      <div class="cards">
        <Figure label="Agents" value={s?.agents.total}>
          {s && (
            <div class="muted" data-testid="agents-breakdown">
              {(s.agents.total - s.agents.pending - s.agents.rejected).toLocaleString()} approved, {s.agents.pending.toLocaleString()} pending,{' '}
              {s.agents.rejected.toLocaleString()} rejected
            </div>
          )}
          <a href="/agents">All agents</a>
        </Figure>
        <Figure label="Online" value={s?.agents.online}>
          <a href="/agents?online=true">Online agents</a>
        </Figure>
        <Figure label="Waiting for approval" value={s ? (s.registrationsPending ?? s.agents.pending) : undefined}>
          <a href="/registrations">Registrations</a>
        </Figure>
        <Figure label="Runs running" value={s?.runs.running}>
          <a href="/runs?status=running">Running runs</a>
        </Figure>
        <Figure label="Runs failed (24 h)" value={s?.runs.failedLast24h}>
          <a href="/runs?status=failed">Failed runs</a>
        </Figure>
        <Figure label="Certificates awaiting reissue" value={s?.certificatesAwaitingReissue} />
        <Figure label="Policies expiring (24 h)" value={s?.policiesExpiringSoon}>
          <a href="/policies">Policies</a>
        </Figure>
        <Figure label="Rejected" value={s?.agents.rejected} />
      </div>
      <h2>Agents</h2>
      <StatusGrid />
      {s && s.workspaces.length > 0 && (
        <>
          <h2>Workspaces</h2>
          <p class="muted">
            Approved agents by workspace: a pending agent joins its workspace once approved, and an agent may belong to several workspaces.
          </p>
          <Table head={['Workspace', 'Approved agents', 'Online']}>
            {s.workspaces.map((w) => (
              <tr key={w.id}>
                <td>
                  <a href={`/agents?workspace=${encodeURIComponent(w.slug)}`}>{w.name}</a>
                </td>
                <td>{w.total.toLocaleString()}</td>
                <td>{w.online.toLocaleString()}</td>
              </tr>
            ))}
          </Table>
        </>
      )}
      <h2>Tokens per day</h2>
      <ErrorNote error={series.error} />
      {series.data ? <TokenChart series={series.data} label="Tokens used by the whole server each day of the last 30 days" /> : !series.error && <Loading what="Reading token usage" />}
      <p>
        <a href="/usage">Usage by agent and workspace</a>
      </p>
    </section>
  );
}
