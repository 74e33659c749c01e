/**
 * A bus that counts what crosses it, for /metrics: messages sent and received (by kind) and the
 * latency and outcome of requests. The recorder is the metrics module's; this file knows nothing
 * of Prometheus.
 */
import { BusNoRespondersError, BusTimeoutError, BusUnavailableError, type Bus, type BusHandler, type BusStatus, type RequestOptions, type SubscribeOptions, type Unsubscribe } from './bus.js';

export type BusRequestOutcome = 'ok' | 'timeout' | 'no_responders' | 'unavailable' | 'error';

export interface BusMeter {
  /** One message: `sent` (published, or a request), `dropped` (publish while disconnected), `received` (handed to a handler). */
  message(direction: 'sent' | 'dropped' | 'received'): void;
  /** One request's time to its answer or failure. */
  request(seconds: number, outcome: BusRequestOutcome): void;
}

export class MeteredBus implements Bus {
  constructor(
    private readonly inner: Bus,
    private readonly meter: BusMeter,
  ) {}

  get kind(): Bus['kind'] {
    return this.inner.kind;
  }

  get status(): BusStatus {
    return this.inner.status;
  }

  get maxPayloadBytes(): number {
    return this.inner.maxPayloadBytes;
  }

  publish(subject: string, data?: unknown): boolean {
    const sent = this.inner.publish(subject, data);
    this.meter.message(sent ? 'sent' : 'dropped');
    return sent;
  }

  subscribe(subject: string, handler: BusHandler, options?: SubscribeOptions): Unsubscribe {
    const meter = this.meter;
    return this.inner.subscribe(
      subject,
      (msg) => {
        meter.message('received');
        return handler(msg);
      },
      options,
    );
  }

  async request(subject: string, data: unknown, options: RequestOptions): Promise<unknown> {
    const started = performance.now();
    this.meter.message('sent');
    try {
      const reply = await this.inner.request(subject, data, options);
      this.meter.request((performance.now() - started) / 1000, 'ok');
      return reply;
    } catch (err) {
      const outcome: BusRequestOutcome =
        err instanceof BusTimeoutError ? 'timeout' : err instanceof BusNoRespondersError ? 'no_responders' : err instanceof BusUnavailableError ? 'unavailable' : 'error';
      this.meter.request((performance.now() - started) / 1000, outcome);
      throw err;
    }
  }

  flush(): Promise<void> {
    return this.inner.flush();
  }

  onStatus(listener: (status: BusStatus) => void): () => void {
    return this.inner.onStatus(listener);
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}
