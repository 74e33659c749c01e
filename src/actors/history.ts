/**
 * Recent transitions of the actors someone is inspecting. A ring per actor exists only while it is
 * watched (from an inspection until WATCH_MS after the last one), and only WATCHED_MAX actors are
 * watched at once (the least recently inspected stops first): what it costs is bounded whatever
 * the fleet size, and an actor nobody looks at costs nothing. The host records into it only while
 * it watches something (one size check per transition otherwise).
 */

export interface ActorHistoryEntry {
  /** The state value before and after. */
  from: unknown;
  to: unknown;
  /** The event's type. */
  event: string;
  at: string;
}

/** Transitions kept per watched actor (the oldest go first). */
export const HISTORY_SIZE = 50;
/** Actors watched at once. */
export const WATCHED_MAX = 200;
/** How long an inspection keeps an actor watched. */
export const WATCH_MS = 10 * 60_000;

interface Watch {
  ring: ActorHistoryEntry[];
  until: number;
}

export class ActorHistory {
  /** Keyed `<kind>:<id>`, least recently inspected first. */
  private readonly watched = new Map<string, Watch>();

  get size(): number {
    return this.watched.size;
  }

  /** Starts watching the actor, or keeps watching it for another WATCH_MS. */
  watch(kind: string, id: string, now = Date.now()): void {
    const key = `${kind}:${id}`;
    const w = this.watched.get(key);
    this.watched.delete(key); // re-inserted last: the most recently inspected
    this.watched.set(key, { ring: w?.ring ?? [], until: now + WATCH_MS });
    for (const [k, v] of this.watched) {
      if (this.watched.size <= WATCHED_MAX && v.until > now) break;
      this.watched.delete(k);
    }
  }

  record(kind: string, id: string, entry: ActorHistoryEntry): void {
    const key = `${kind}:${id}`;
    const w = this.watched.get(key);
    if (!w) return;
    if (w.until <= Date.now()) {
      this.watched.delete(key);
      return;
    }
    w.ring.push(entry);
    if (w.ring.length > HISTORY_SIZE) w.ring.shift();
  }

  /** The transitions recorded since it was first watched, oldest first. */
  of(kind: string, id: string): ActorHistoryEntry[] {
    return [...(this.watched.get(`${kind}:${id}`)?.ring ?? [])];
  }
}
