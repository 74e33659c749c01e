/**
 * One actor as the actor and agent pages show it: its kind's state chart with the current state
 * lit, transitions streaming in from the feed's actors topic (narrowed to this actor), its context
 * (the server leaves secrets out) and its recent history, newest first.
 */
import { useEffect, useState } from 'preact/hooks';
import { actorDefinition, getActor, type ActorTransition, type StateValue } from '../api/fleet';
import { useLoad } from '../app/hooks';
import { useTopic } from '../app/topics';
import { Empty, ErrorNote, Json, Loading, Time } from './kit';
import { StateChart, stateText } from './state-chart';

export function ActorView({ kind, id, showContext = true }: { kind: string; id: string; showContext?: boolean }) {
  const actor = useLoad(() => getActor(kind, id), [kind, id]);
  const definition = useLoad(() => actorDefinition(kind), [kind]);
  const [state, setState] = useState<StateValue | null>(null);
  const [history, setHistory] = useState<ActorTransition[]>([]);
  // Steward keeps an actor's transitions while someone inspects it: none shown means none since this page first read it.
  const [openedAt] = useState(() => new Date().toISOString());
  useEffect(() => {
    if (!actor.data) return;
    setState(actor.data.actor.state);
    setHistory(actor.data.actor.history ?? []);
  }, [actor.data]);
  useTopic('actors', { kind, id }, (f) => {
    if (f.type === 'resync') return actor.reload();
    if (f.type !== 'actor.transition' || f.actorId !== id || (f.kind !== undefined && f.kind !== kind)) return;
    const to = f.state as StateValue;
    const at = typeof f.at === 'string' ? f.at : new Date().toISOString();
    setHistory((h) => [...h, { from: (f.from as StateValue | undefined) ?? state, to, event: String(f.event ?? ''), at }].slice(-200));
    setState(to);
  });
  if (actor.error) return <ErrorNote error={actor.error} title="The actor could not be read." />;
  if (!actor.data) return <Loading what="Loading the actor" />;
  const newest = [...history].reverse();
  return (
    <div class="actor-view">
      <p>
        State: <strong data-testid="actor-state">{stateText(state)}</strong>
        {actor.data.actor.since && (
          <span class="muted">
            {' '}
            (since <Time iso={newest[0]?.at ?? actor.data.actor.since} />)
          </span>
        )}
      </p>
      <ErrorNote error={definition.error} title="The state chart could not be read." />
      {definition.data && <StateChart definition={definition.data.definition} state={state} lastEvent={newest[0]?.event} label={`State chart of ${kind} actors, ${stateText(state)} lit`} />}
      <h3>Recent transitions</h3>
      {newest.length === 0 ? (
        <Empty title="No transition since you opened this page.">
          Steward records an actor's transitions while someone is looking at it (and for 10 minutes after), so the list starts at <Time iso={openedAt} absolute />; new
          ones appear here as they happen. The state above is the actor's current one; what happened before is in the audit log.
        </Empty>
      ) : (
        <div class="table-wrap">
          <table aria-label="Recent transitions">
            <thead>
              <tr>
                <th>When</th>
                <th>Event</th>
                <th>From</th>
                <th>To</th>
              </tr>
            </thead>
            <tbody>
              {newest.map((t, i) => (
                <tr key={`${t.at}-${i}`} data-event={t.event}>
                  <td>
                    <Time iso={t.at} />
                  </td>
                  <td>
                    <code>{t.event}</code>
                  </td>
                  <td>{stateText(t.from)}</td>
                  <td>{stateText(t.to)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {showContext && (
        <>
          <h3>Context</h3>
          <Json value={actor.data.actor.context ?? null} />
        </>
      )}
    </div>
  );
}
