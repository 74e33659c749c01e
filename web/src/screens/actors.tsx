/**
 * Live actors (global admins; GET /api/admin/actors): counts per kind, filters by kind, state and
 * id prefix, paging, all in the URL. States change in place as the feed's actors topic reports
 * transitions of the actors on the page.
 */
import { useEffect, useState } from 'preact/hooks';
import { listActors, type StateValue } from '../api/fleet';
import { useLoad, useSoon } from '../app/hooks';
import { qp, setQuery } from '../app/router';
import { useTopic } from '../app/topics';
import { Empty, ErrorNote, Field, Loading, PAGE_SIZES, Pager, PerPage, Table, Time, val } from '../ui/kit';
import { stateText } from '../ui/state-chart';

export const actorHref = (kind: string, id: string) => `/actors/${encodeURIComponent(kind)}/${encodeURIComponent(id)}`;

export default function Actors() {
  const kind = qp('kind');
  const state = qp('state');
  const prefix = qp('prefix');
  const page = Math.max(1, Number(qp('page', '1')) || 1);
  const pageSize = PAGE_SIZES.includes(Number(qp('pageSize'))) ? Number(qp('pageSize')) : 50;
  const list = useLoad(() => listActors({ kind: kind || undefined, state: state || undefined, prefix: prefix || undefined, page, pageSize }), [kind, state, prefix, page, pageSize]);
  // Transitions seen since the page was read: actor id -> [state, at].
  const [live, setLive] = useState<Record<string, [StateValue, string]>>({});
  useEffect(() => setLive({}), [list.data]);
  const reload = useSoon(list.reload, 1000);
  useTopic('actors', { kind: kind || undefined }, (f) => {
    if (f.type === 'resync') return reload();
    if (f.type !== 'actor.transition' || typeof f.actorId !== 'string') return;
    const id = f.actorId;
    if (list.data?.actors.some((x) => x.id === id && x.kind === f.kind)) setLive((l) => ({ ...l, [`${String(f.kind)}:${id}`]: [f.state as StateValue, typeof f.at === 'string' ? f.at : new Date().toISOString()] }));
  });
  const d = list.data;
  return (
    <section>
      <h1>Actors</h1>
      <p class="muted">Each agent, channel and workflow run Steward keeps in memory is an actor with a state machine. Open one to see its chart, context and history.</p>
      {d && (
        <ul class="inline-list" aria-label="Actors per kind">
          <li>
            <button type="button" class={kind === '' ? 'primary' : ''} onClick={() => setQuery({ kind: null, page: null })}>
              All
            </button>
          </li>
          {d.kinds.map((k) => (
            <li key={k.kind}>
              <button type="button" class={kind === k.kind ? 'primary' : ''} onClick={() => setQuery({ kind: k.kind, page: null })}>
                {k.kind} ({k.count.toLocaleString()})
              </button>
            </li>
          ))}
        </ul>
      )}
      <div class="toolbar">
        <Field label="State" hint="A state's name, e.g. pending or online">
          <input value={state} onChange={(e) => setQuery({ state: val(e) || null, page: null })} />
        </Field>
        <Field label="Id starts with">
          <input value={prefix} onChange={(e) => setQuery({ prefix: val(e) || null, page: null })} />
        </Field>
        <PerPage value={pageSize} onChange={(size) => setQuery({ pageSize: size === '50' ? null : size, page: null })} />
      </div>
      <ErrorNote error={list.error} />
      {!d ? (
        list.loading && <Loading what="Loading actors" />
      ) : d.actors.length === 0 ? (
        <Empty title="No actor matches.">{kind || state || prefix ? 'Change or clear the filters above.' : 'Actors appear as agents register, channels are used and workflows run.'}</Empty>
      ) : (
        <>
          <Table head={['Kind', 'Id', 'State', 'Status', 'In this state since']}>
            {d.actors.map((x) => {
              const l = live[`${x.kind}:${x.id}`];
              return (
                <tr key={`${x.kind}:${x.id}`} data-actor={x.id}>
                  <td>{x.kind}</td>
                  <td>
                    <a href={actorHref(x.kind, x.id)}>
                      <code>{x.id}</code>
                    </a>
                  </td>
                  <td>{stateText(l?.[0] ?? x.state)}</td>
                  <td>{x.status}</td>
                  <td>
                    <Time iso={l?.[1] ?? x.since} />
                  </td>
                </tr>
              );
            })}
          </Table>
          <Pager page={d.page} totalPages={d.totalPages} total={d.total} noun="actor" onPage={(p) => setQuery({ page: p > 1 ? p : null })} />
        </>
      )}
    </section>
  );
}
