/**
 * A WebSocket client for tests whose frames queue up to be taken in the test's own order:
 * `next(match)` waits for the first unread frame of a type (or passing a predicate), leaving the
 * others queued, and fails as soon as the socket closes without one. The agent protocol's raw
 * client (fleet-helpers.ts) and the live-feed client (channels-helpers.ts) are built on it.
 */
import WebSocket from 'ws';

/** A frame type, or a predicate on the frame. */
export type FrameMatch = string | ((frame: any) => boolean);

export interface FrameSocketOptions {
  /** Headers of the upgrade request (a cookie, an origin, X-Forwarded-For). */
  headers?: Record<string, string>;
  /** Sees every frame before it is queued (and throws on one that breaks the protocol). */
  check?: (frame: any, isBinary: boolean) => void;
  /** The frames one received frame stands for (a live-feed batch: the frames it carries); default itself. */
  expand?: (frame: any) => any[];
}

export class FrameSocket {
  readonly ws: WebSocket;
  /** Frames received and not yet taken by `next`, oldest first. */
  readonly frames: any[] = [];
  closed: { code: number; reason: string } | null = null;
  private waiters: Array<() => void> = [];
  private readonly opened: Promise<void>;

  /** Connects to `path` of the server at `baseUrl` (http:// or ws://). */
  constructor(baseUrl: string, path: string, opts: FrameSocketOptions = {}) {
    this.ws = new WebSocket(baseUrl.replace(/^http/, 'ws') + path, { headers: opts.headers });
    this.opened = new Promise((resolve, reject) => {
      this.ws.once('open', () => resolve());
      this.ws.once('error', reject);
    });
    // A socket that fails to open also closes: `next` and `waitClosed` report it to a test that never awaits `open`.
    this.opened.catch(() => {});
    this.ws.on('message', (data, isBinary) => {
      const frame = JSON.parse(data.toString());
      opts.check?.(frame, isBinary);
      if (opts.expand) this.frames.push(...opts.expand(frame));
      else this.frames.push(frame);
      this.wake();
    });
    this.ws.on('close', (code, reason) => {
      this.closed = { code, reason: reason.toString() };
      this.wake();
    });
  }

  open(): Promise<void> {
    return this.opened;
  }

  /** Sends a frame as JSON, or a string as it is. */
  send(frame: unknown): void {
    this.ws.send(typeof frame === 'string' ? frame : JSON.stringify(frame));
  }

  /** Takes the first unread frame that matches (earlier frames that do not stay queued). */
  next(match: FrameMatch, timeoutMs = 5000): Promise<any> {
    const matches = typeof match === 'string' ? (f: any) => f.type === match : match;
    const what = typeof match === 'string' ? `a '${match}' frame` : 'a matching frame';
    return this.until(
      () => {
        const i = this.frames.findIndex(matches);
        if (i >= 0) return this.frames.splice(i, 1)[0];
        if (this.closed) throw new Error(`socket closed (${this.closed.code} ${this.closed.reason}) before ${what}`);
        return undefined;
      },
      timeoutMs,
      () => `no ${what} within ${timeoutMs} ms; got ${JSON.stringify(this.frames).slice(0, 2000)}`,
    );
  }

  /** The close code and reason, once the socket has closed. */
  waitClosed(timeoutMs = 5000): Promise<{ code: number; reason: string }> {
    return this.until(() => this.closed ?? undefined, timeoutMs, () => `the socket did not close within ${timeoutMs} ms`);
  }

  close(): void {
    this.ws.close();
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  /** Resolves with what `take` returns once it returns something, woken by each frame and by the close. */
  private async until<T>(take: () => T | undefined, timeoutMs: number, timedOut: () => string): Promise<T> {
    const end = Date.now() + timeoutMs;
    for (;;) {
      const v = take();
      if (v !== undefined) return v;
      const left = end - Date.now();
      if (left <= 0) throw new Error(timedOut());
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }
}
