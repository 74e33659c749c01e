/**
 * How the actor host uses XState v5, in one place. Its actors of a kind are children of one inert
 * root actor, so that they share the root's actor system: XState builds a system (a scheduler,
 * registries, a score of closures) for every root actor, too much per agent.
 */
import { createActor, fromTransition } from 'xstate';
import type { AnyActor, AnyStateMachine, InspectionEvent } from 'xstate';

/**
 * The started root of a kind. It ignores the done and error events XState relays to a parent; its
 * system carries the kind's one inspection callback.
 */
export function createKindRoot(kind: string, inspect: (ev: InspectionEvent) => void): AnyActor {
  const root = createActor(fromTransition((state: null) => state, null), { id: `${kind}-host`, inspect });
  root.start();
  return root;
}

/** A new actor of the kind (not started), from its persisted snapshot or from input. */
export function createHosted(root: AnyActor, machine: AnyStateMachine, id: string, from: { snapshot: unknown } | { input: unknown }): AnyActor {
  return 'snapshot' in from
    ? createActor(machine, { id, snapshot: from.snapshot as never, parent: root })
    : createActor(machine, { id, input: from.input as never, parent: root });
}

/**
 * What a hosted actor keeps as its options once started. XState keeps an object-spread copy of
 * the options it is given, and on Node 20's V8 every such copy gets a hidden class of its own
 * (docs/performance.md); a started actor reads none of them again (XState reads `input` and
 * `devTools` in `start()` only), so all share this one.
 */
const STARTED_OPTIONS = Object.freeze({});

export function startHosted(actor: AnyActor): void {
  actor.start();
  (actor as unknown as { options: object }).options = STARTED_OPTIONS;
}

/**
 * Stops a hosted actor. It has a parent (its kind's root), and XState's `stop()` refuses actors
 * with a parent; a parent stops its children through `_stop()`, which is what this calls. The
 * check at start-up below fails loudly if an XState upgrade renames it.
 */
export function stopHosted(actor: AnyActor): void {
  (actor as unknown as { _stop(): void })._stop();
}
{
  const probe = createActor(fromTransition((state: null) => state, null)) as unknown as { _stop?: unknown };
  if (typeof probe._stop !== 'function') throw new Error('this XState version has no Actor._stop: the actor host cannot stop its actors');
}

/** Whether stopping the actor now would lose work that is not in its persisted snapshot. */
export function hasUnsavedWork(actor: AnyActor): boolean {
  // The system is the kind's, shared: only this actor's own delayed events count (its children's
  // are covered by the children check below).
  const scheduled = actor.system.getSnapshot()._scheduledEvents as Record<string, { source?: unknown }>;
  for (const id in scheduled) if (scheduled[id]!.source === actor) return true;
  const children = (actor.getSnapshot() as { children?: Record<string, AnyActor | undefined> }).children;
  if (children) {
    for (const id in children) {
      if ((children[id]?.getSnapshot() as { status?: string } | undefined)?.status === 'active') return true;
    }
  }
  return false;
}
