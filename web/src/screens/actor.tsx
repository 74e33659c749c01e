/** One actor (global admins): its state chart, live transitions, context and history. */
import type { ScreenProps } from '../app/routes';
import { ActorView } from '../ui/actor-view';

export default function Actor({ params }: ScreenProps) {
  const kind = params.kind!;
  const id = params.id!;
  return (
    <section>
      <p>
        <a href={`/actors?kind=${encodeURIComponent(kind)}`}>Actors</a>
        {kind === 'agent' && (
          <>
            {' '}
            · <a href={`/agents/${encodeURIComponent(id)}`}>The agent's page</a>
          </>
        )}
      </p>
      <h1>
        {kind} <code>{id}</code>
      </h1>
      <ActorView key={`${kind}:${id}`} kind={kind} id={id} />
    </section>
  );
}
