/**
 * Subscriptions held on a bus only while something local wants them: the browser feed's topics.
 * The first local subscriber to a subject subscribes the bus, later ones share that subscription,
 * and the last one to leave unsubscribes it, so a node hears a feed topic only while one of its
 * own clients follows it (reference counting, one bus subscription per subject).
 *
 * A message is decoded once per bus subscription and the same value is handed to every local
 * subscriber of the subject: handlers must not change it.
 */
import { runHandler, type Bus, type BusHandler, type BusLog, type Unsubscribe } from './bus.js';

interface Interest {
  /** One entry per add(): the same handler added twice counts twice. */
  readonly handlers: Set<{ handler: BusHandler }>;
  readonly unsubscribe: Unsubscribe;
}

export class InterestSubscriptions {
  private readonly interests = new Map<string, Interest>();

  constructor(
    private readonly bus: Bus,
    private readonly log: BusLog,
  ) {}

  /**
   * Adds a local subscriber to `subject`, subscribing the bus if it is the first. Returns the
   * release function (calling it again does nothing). Throws what Bus.subscribe throws.
   */
  add(subject: string, handler: BusHandler): () => void {
    let interest = this.interests.get(subject);
    if (!interest) {
      const handlers = new Set<{ handler: BusHandler }>();
      const onError = (err: unknown) => this.log.error({ err, subject }, 'a feed subscriber failed');
      const unsubscribe = this.bus.subscribe(subject, (msg) => {
        for (const h of [...handlers]) runHandler(h.handler, msg, onError);
      });
      interest = { handlers, unsubscribe };
      this.interests.set(subject, interest);
    }
    const entry = { handler };
    const owner = interest;
    owner.handlers.add(entry);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      owner.handlers.delete(entry);
      if (owner.handlers.size === 0 && this.interests.get(subject) === owner) {
        this.interests.delete(subject);
        owner.unsubscribe();
      }
    };
  }

  /** Local subscribers of `subject`. */
  count(subject: string): number {
    return this.interests.get(subject)?.handlers.size ?? 0;
  }

  /** Subjects the bus is subscribed to on local interest. */
  subjects(): string[] {
    return [...this.interests.keys()];
  }

  /** Drops every subscription (at shutdown). */
  clear(): void {
    for (const interest of this.interests.values()) interest.unsubscribe();
    this.interests.clear();
  }
}
