/**
 * How the actor host uses XState v5, in one place (checked on 5.33.3). Its actors of a kind are
 * children of one inert root actor, so that they share the root's actor system: XState builds a
 * system (a scheduler, registries, a score of closures) for every root actor, too much per agent.
 * Public API only; what each function leans on is said beside it.
 */
import { createActor, fromTransition } from 'xstate';
import type { AnyActor, AnyActorRef, AnyStateMachine, EventObject, InspectionEvent } from 'xstate';

const STOP_CHILD = 'steward.host.stopChild';

interface StopChildEvent extends EventObject {
  type: typeof STOP_CHILD;
  actor: AnyActorRef;
}

export interface KindRootHooks {
  /** The kind's one inspection callback: XState calls it for every actor of the system. */
  inspect(ev: InspectionEvent): void;
  /** Stopping an actor threw (logged by the host; the root itself must not fail). */
  stopFailed(actor: AnyActorRef, err: unknown): void;
}

/**
 * The started root of a kind. It ignores the done and error events XState relays to a parent, and
 * stops a child on request: XState lets only an actor's parent stop it (`stop()` refuses an actor
 * that has one), through `actorScope.stopChild`.
 */
export function createKindRoot(kind: string, hooks: KindRootHooks): AnyActor {
  const logic = fromTransition((state: null, event: EventObject, scope) => {
    if (event.type === STOP_CHILD) {
      try {
        scope.stopChild((event as StopChildEvent).actor);
      } catch (err) {
        hooks.stopFailed((event as StopChildEvent).actor, err); // a throw here would fail the root, and the kind with it
      }
    }
    return state;
  }, null);
  const root = createActor(logic, { id: `${kind}-host`, inspect: (ev) => hooks.inspect(ev) });
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

/** Stops a hosted actor, through its parent (the kind's root); synchronous unless the root is busy. */
export function stopHosted(root: AnyActor, actor: AnyActor): void {
  const stop: StopChildEvent = { type: STOP_CHILD, actor };
  root.send(stop);
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
