/**
 * What one live-feed subscriber is about to be sent (docs/feed.md, "Batching and folding").
 *
 * Topic frames wait for FEED_BATCH_WINDOW_MS and go out together: one frame as it is, several as
 * `{type: "batch", frames, folded, foldedByType?, truncated?, at}`. Of frames about the same
 * entity (foldKey) only the latest is kept, in the place of the latest; at most
 * FEED_BATCH_MAX_FRAMES are held, and at most the send-buffer limit in bytes (one frame may pass
 * it), the oldest beyond either dropped (`truncated`: the client re-reads over HTTP). While frames keep coming the window doubles, up to 8 times the setting, so a burst
 * of any length costs a subscriber a few frames a second at most.
 *
 * A subscriber whose socket still holds more than the send-buffer limit when a batch is due is not
 * reading: it is closed with FEED_TOO_SLOW (4429), and reconnects and re-reads over HTTP. The
 * server holds at most twice the limit for it: the socket's buffer and one batch (uWS closes the
 * socket outright past three times the limit, so that the close frame still fits).
 */
import { foldKey } from '../domain/feed-frames.js';

/** Close code of a subscriber that does not read its frames. */
export const FEED_TOO_SLOW = 4429;

/** Longest window, as a multiple of FEED_BATCH_WINDOW_MS. */
const WINDOW_GROWTH_MAX = 8;

export interface BatchSink {
  /** Bytes waiting in the socket's send buffer. */
  buffered(): number;
  /** Sends one frame (JSON text). */
  send(text: string): void;
  /** The socket is past its send-buffer limit: close it (FEED_TOO_SLOW). */
  tooSlow(): void;
}

export interface BatchOptions {
  windowMs: number;
  maxFrames: number;
  bufferLimitBytes: number;
}

interface Held {
  type: string;
  /** The frame's JSON, made once for every subscriber. */
  text: string;
  /** Its length (UTF-16 units: bytes for the ASCII most frames are). */
  size: number;
}

let unfoldable = 0;

export class FeedBatcher {
  private readonly pending = new Map<string, Held>();
  private bytes = 0;
  private folded = 0;
  private foldedByType: Record<string, number> = {};
  private truncated = false;
  private timer: NodeJS.Timeout | undefined;
  private window: number;
  private lastFlush = -Infinity;
  private stopped = false;

  constructor(
    private readonly sink: BatchSink,
    private readonly opts: BatchOptions,
  ) {
    this.window = opts.windowMs;
  }

  /** Holds a frame (its type, fold key source and JSON text) for the next batch. */
  add(frame: { type: string; [field: string]: unknown }, text: string): void {
    if (this.stopped) return;
    const key = foldKey(frame) ?? `#${unfoldable++}`;
    const before = this.pending.get(key);
    if (before) {
      this.pending.delete(key);
      this.bytes -= before.size;
      this.fold(frame.type);
    }
    this.pending.set(key, { type: frame.type, text, size: text.length });
    this.bytes += text.length;
    while (this.pending.size > this.opts.maxFrames || (this.bytes > this.opts.bufferLimitBytes && this.pending.size > 1)) {
      const [oldest, held] = this.pending.entries().next().value as [string, Held];
      this.pending.delete(oldest);
      this.bytes -= held.size;
      this.fold(held.type);
      this.truncated = true;
    }
    if (!this.timer) this.arm();
  }

  /** Drops whatever is held (the socket closed). */
  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.pending.clear();
    this.bytes = 0;
  }

  private fold(type: string): void {
    this.folded++;
    this.foldedByType[type] = (this.foldedByType[type] ?? 0) + 1;
  }

  private arm(): void {
    const busy = Date.now() - this.lastFlush < this.window;
    this.window = busy ? Math.min(this.window * 2, this.opts.windowMs * WINDOW_GROWTH_MAX) : this.opts.windowMs;
    this.timer = setTimeout(() => this.flush(), this.window);
    this.timer.unref();
  }

  private flush(): void {
    this.timer = undefined;
    if (this.stopped || this.pending.size === 0) return;
    if (this.sink.buffered() > this.opts.bufferLimitBytes) {
      this.stop();
      this.sink.tooSlow();
      return;
    }
    const held = [...this.pending.values()];
    let text: string;
    if (held.length === 1 && this.folded === 0) text = held[0]!.text;
    else {
      const extra = `${this.folded > 0 ? `,"foldedByType":${JSON.stringify(this.foldedByType)}` : ''}${this.truncated ? ',"truncated":true' : ''}`;
      text = `{"type":"batch","frames":[${held.map((h) => h.text).join(',')}],"folded":${this.folded}${extra},"at":"${new Date().toISOString()}"}`;
    }
    this.pending.clear();
    this.bytes = 0;
    this.folded = 0;
    this.foldedByType = {};
    this.truncated = false;
    this.lastFlush = Date.now();
    this.sink.send(text);
  }
}
