/** Open WebSockets by kind, for metrics and for closing them at shutdown. */
import type { WebSocket } from '../http/uws.js';

export class SocketRegistry {
  private readonly byKind = new Map<string, Set<WebSocket<unknown>>>();

  add(kind: string, ws: WebSocket<unknown>): void {
    let set = this.byKind.get(kind);
    if (!set) this.byKind.set(kind, (set = new Set()));
    set.add(ws);
  }

  delete(kind: string, ws: WebSocket<unknown>): void {
    this.byKind.get(kind)?.delete(ws);
  }

  counts(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const [k, s] of this.byKind) out[k] = s.size;
    return out;
  }

  /** Ends every socket of one kind with the given close code. */
  endKind(kind: string, code: number, reason: string): void {
    for (const ws of [...(this.byKind.get(kind) ?? [])]) {
      try {
        ws.end(code, reason);
      } catch {
        // already closed
      }
    }
  }

  /** Ends every socket with the given close code. */
  endAll(code: number, reason: string): void {
    for (const set of this.byKind.values()) {
      for (const ws of [...set]) {
        try {
          ws.end(code, reason);
        } catch {
          // already closed
        }
      }
    }
  }
}
