/**
 * Agents: search, filters (online, workspace, capabilities), sort and paging, all in the URL.
 * Online state follows the feed's presence topic: a row on the page changes at once (the newest
 * frame for an agent wins, by `at`), and the page is read again within a second (the counts).
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { listAgents, type AgentItem, type AgentQuery } from '../api/agents';
import { myWorkspaces } from '../api/workspaces';
import { CAPABILITIES } from '../api/types';
import { useLoad } from '../app/hooks';
import { useFeedTopic } from '../app/feed';
import { qp, setQuery } from '../app/router';
import { Badge, counted, Did, Empty, ErrorNote, Field, Loading, PAGE_SIZES, Pager, PerPage, Swatch, Time, val, WorkspaceSelect } from '../ui/kit';

export default function Agents() {
  const q = qp('q');
  const online = qp('online');
  const workspace = qp('workspace');
  const caps = qp('capabilities');
  const sortBy = (qp('sort', 'name') as AgentQuery['sortBy']) ?? 'name';
  const sortDir = (qp('dir', 'asc') as 'asc' | 'desc') ?? 'asc';
  const page = Math.max(1, Number(qp('page', '1')) || 1);
  const pageSize = PAGE_SIZES.includes(Number(qp('size'))) ? Number(qp('size')) : 20;
  const [text, setText] = useState(q);
  useEffect(() => {
    const t = setTimeout(() => text !== q && setQuery({ q: text.trim() || null, page: null }), 300);
    return () => clearTimeout(t);
  }, [text]);

  const workspaces = useLoad(() => myWorkspaces(), []);
  const list = useLoad(
    () =>
      listAgents({
        q: q || undefined,
        online: online === '' ? undefined : online === 'true',
        workspace: workspace || undefined,
        capabilities: caps || undefined,
        sortBy,
        sortDir,
        page,
        pageSize,
      }),
    [q, online, workspace, caps, sortBy, sortDir, page, pageSize],
  );
  // Presence frames: did -> [online, at] of the newest one, applied over the page as loaded.
  const [presence, setPresence] = useState<Record<string, [boolean, string]>>({});
  useEffect(() => setPresence({}), [list.data]);
  const soon = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  useEffect(() => () => clearTimeout(soon.current), []);
  const reloadSoon = () => {
    if (soon.current) return;
    soon.current = setTimeout(() => {
      soon.current = undefined;
      list.reload();
    }, 1000);
  };
  useFeedTopic('presence', (f) => {
    if (f.type === 'resync') return reloadSoon();
    if (f.type !== 'presence' || typeof f.did !== 'string') return;
    const did = f.did;
    const at = f.at ?? '';
    // The row changes at once; the count of online agents (and an `online` filter) need the server's answer.
    reloadSoon();
    if (list.data?.agents.some((a) => a.id === did)) setPresence((p) => (p[did] && p[did][1] > at ? p : { ...p, [did]: [f.online === true, at] }));
  });
  const selectedCaps = caps ? caps.split(',') : [];

  const sortHeader = (key: NonNullable<AgentQuery['sortBy']>, label: string) => (
    <th aria-sort={sortBy === key ? (sortDir === 'asc' ? 'ascending' : 'descending') : 'none'}>
      <button type="button" class="sort" onClick={() => setQuery({ sort: key, dir: sortBy === key && sortDir === 'asc' ? 'desc' : 'asc', page: null })}>
        {label} {sortBy === key ? (sortDir === 'asc' ? '▲' : '▼') : ''}
      </button>
    </th>
  );

  const d = list.data;
  return (
    <section>
      <h1>Agents</h1>
      <div class="toolbar" role="search">
        <Field label="Search">
          <input type="search" value={text} placeholder="Name or DID" onInput={(e) => setText(val(e))} />
        </Field>
        <Field label="Status">
          <select value={online} onChange={(e) => setQuery({ online: val(e) || null, page: null })}>
            <option value="">All</option>
            <option value="true">Online</option>
            <option value="false">Offline</option>
          </select>
        </Field>
        <WorkspaceSelect workspaces={workspaces.data?.workspaces} value={workspace} all="All visible" onChange={(w) => setQuery({ workspace: w, page: null })} />
        <Field label="Has capability">
          <select
            value=""
            onChange={(e) => {
              const v = val(e);
              if (v && !selectedCaps.includes(v)) setQuery({ capabilities: [...selectedCaps, v].join(','), page: null });
            }}
          >
            <option value="">Add a capability…</option>
            {CAPABILITIES.filter((c) => !selectedCaps.includes(c)).map((c) => (
              <option key={c} value={c}>
                {c}
              </option>
            ))}
          </select>
        </Field>
        {selectedCaps.map((c) => (
          <button key={c} type="button" class="badge" aria-label={`Remove the filter ${c}`} onClick={() => setQuery({ capabilities: selectedCaps.filter((x) => x !== c).join(',') || null, page: null })}>
            {c} ×
          </button>
        ))}
      </div>
      <ErrorNote error={list.error} />
      {d && (
        <p class="muted" aria-live="polite">
          {counted(d.total, 'agent')} {d.total === 1 ? 'matches' : 'match'}, {d.online.toLocaleString()} online.
        </p>
      )}
      {!d && list.loading ? (
        <Loading what="Loading agents" />
      ) : d && d.agents.length === 0 ? (
        q || online || workspace || caps ? (
          <Empty title="No agent matches these filters.">Clear a filter to see more.</Empty>
        ) : (
          <Empty title="No agents yet.">
            Start an agent with the SDK or the demo agent (<code>steward agent --url {location.origin}</code>, or from a checkout{' '}
            <code>npm run steward -- agent --url {location.origin}</code>); it appears under Registrations until a global admin approves it.
          </Empty>
        )
      ) : d ? (
        <>
          <div class="table-wrap">
            <table>
              <caption class="muted" hidden>
                Agents
              </caption>
              <thead>
                <tr>
                  {sortHeader('name', 'Name')}
                  <th>Status</th>
                  <th>Workspace</th>
                  <th>Capabilities in force</th>
                  <th>Model</th>
                  {sortHeader('lastSeen', 'Last seen')}
                  {sortHeader('registeredAt', 'Registered')}
                </tr>
              </thead>
              <tbody>
                {d.agents.map((a) => (
                  <tr key={a.id} data-agent={a.id}>
                    <td>
                      <a href={`/agents/${encodeURIComponent(a.id)}`}>{a.name}</a>
                      <br />
                      <Did did={a.id} />
                    </td>
                    <td>{(presence[a.id]?.[0] ?? a.isOnline) ? <Badge kind="ok">online</Badge> : <Badge kind="off">offline</Badge>}</td>
                    <td>
                      {a.workspace ? (
                        <>
                          <Swatch color={a.workspace.color} />
                          {a.workspace.name}
                        </>
                      ) : (
                        '—'
                      )}
                    </td>
                    <td>
                      <InForce agent={a} />
                    </td>
                    <td>{a.llmModel ? `${a.llmProvider ?? ''} ${a.llmModel}` : <span class="muted">not set</span>}</td>
                    <td>
                      <Time iso={a.lastSeen} />
                    </td>
                    <td>
                      <Time iso={a.registeredAt} />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          <div class="row">
            <Pager page={d.page} totalPages={d.totalPages} total={d.total} noun="agents" onPage={(p) => setQuery({ page: p > 1 ? p : null })} />
            <PerPage value={pageSize} onChange={(size) => setQuery({ size: size === '20' ? null : size, page: null })} />
          </div>
        </>
      ) : null}
    </section>
  );
}

/** What an agent enforces now (its certificate), and the approved set beside it where they differ. */
function InForce({ agent: a }: { agent: AgentItem }) {
  const inForce = a.capabilitiesInForce;
  const same = inForce !== null && [...inForce].sort().join() === [...a.capabilities].sort().join();
  return (
    <>
      {inForce === null ? <span class="muted">none yet (no certificate)</span> : inForce.length ? inForce.map((c) => <Badge key={c}>{c}</Badge>) : <span class="muted">none</span>}
      {!same && <div class="muted approved">approved: {a.capabilities.join(', ') || 'none'}</div>}
    </>
  );
}
