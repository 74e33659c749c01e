/**
 * The bus over NATS core (the `nats` client): cluster mode. The client reconnects for ever and
 * re-sends its subscriptions when it is back; nothing published is kept for later. While the
 * connection is down, `publish` drops the message and says so (false) and `request` fails at
 * once (BusUnavailableError), rather than letting the client's buffer decide which messages make
 * it: the contract is at most once either way, and this way the caller knows.
 */
import { connect, ErrorCode, Events, NatsError, type Msg, type NatsConnection } from 'nats';
import {
  BusNoRespondersError,
  BusPayloadError,
  BusTimeoutError,
  BusUnavailableError,
  StatusListeners,
  checkSubject,
  decodePayload,
  encodePayload,
  runHandler,
  type Bus,
  type BusHandler,
  type BusLog,
  type BusMessage,
  type BusStatus,
  type RequestOptions,
  type SubscribeOptions,
  type Unsubscribe,
} from './bus.js';

/** NATS's default max_payload, used until the server has said its own. */
const DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024;

export interface NatsBusOptions {
  /** Server URLs, `nats://[user:password@ | token@]host:port` (credentials are taken out of the URL). */
  servers: string[];
  log: BusLog;
  /** Client name shown by the server's monitoring (e.g. `steward-<nodeId>`). */
  name?: string;
  /** Wait between reconnection attempts (plus up to half of it at random). Default 1000. */
  reconnectWaitMs?: number;
  /** Client pings at this interval; two unanswered ones count as a lost connection. Default 10000. */
  pingIntervalMs?: number;
  /** How long the first connection may take before connectNatsBus gives up. Default 10000. */
  connectTimeoutMs?: number;
  /** How long close() lets a drain take before closing anyway. Default 5000. */
  closeTimeoutMs?: number;
}

export interface NatsServers {
  servers: string[];
  user?: string;
  pass?: string;
  token?: string;
}

/**
 * Takes credentials out of server URLs (the client does not read them from the URL): `user:pass@`
 * is a user and password, a lone `token@` a token, as in the NATS command-line tools.
 */
export function natsServers(urls: string[]): NatsServers {
  const out: NatsServers = { servers: [] };
  for (const raw of urls) {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      throw new Error(`not a NATS URL: ${redactNatsUrl(raw)}`);
    }
    if (url.username) {
      const user = decodeURIComponent(url.username);
      const pass = url.password ? decodeURIComponent(url.password) : undefined;
      if (pass === undefined) out.token ??= user;
      else if (out.user === undefined) {
        out.user = user;
        out.pass = pass;
      }
    }
    out.servers.push(`${url.protocol}//${url.host}`);
  }
  return out;
}

/** A NATS URL without its credentials, for messages and logs. */
export function redactNatsUrl(url: string): string {
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/)?[^@/]*@/i, '$1***@');
}

/** Connects, or throws BusUnavailableError naming the servers (without credentials). */
export async function connectNatsBus(options: NatsBusOptions): Promise<NatsBus> {
  const { servers, user, pass, token } = natsServers(options.servers);
  const reconnectWaitMs = options.reconnectWaitMs ?? 1000;
  let nc: NatsConnection;
  try {
    nc = await connect({
      servers,
      ...(user !== undefined ? { user, pass } : {}),
      ...(token !== undefined ? { token } : {}),
      name: options.name,
      reconnect: true,
      maxReconnectAttempts: -1,
      reconnectTimeWait: reconnectWaitMs,
      reconnectJitter: Math.ceil(reconnectWaitMs / 2),
      pingInterval: options.pingIntervalMs ?? 10_000,
      maxPingOut: 2,
      timeout: options.connectTimeoutMs ?? 10_000,
      noAsyncTraces: true,
    });
  } catch (err) {
    throw new BusUnavailableError('closed', {
      cause: err,
      message: `cannot connect to NATS at ${servers.join(', ')}: ${(err as Error)?.message ?? String(err)}`,
    });
  }
  return new NatsBus(nc, options);
}

export class NatsBus implements Bus {
  readonly kind = 'nats' as const;
  private state: BusStatus = 'connected';
  private readonly log: BusLog;
  private readonly listeners: StatusListeners;
  private readonly closedDone: Promise<void>;
  private readonly closeTimeoutMs: number;

  constructor(
    private readonly nc: NatsConnection,
    options: Pick<NatsBusOptions, 'log' | 'closeTimeoutMs'>,
  ) {
    this.log = options.log;
    this.closeTimeoutMs = options.closeTimeoutMs ?? 5000;
    this.listeners = new StatusListeners(options.log);
    this.watchStatus().catch((err: unknown) => this.log.error({ err }, 'watching the NATS connection status failed'));
    this.closedDone = nc.closed().then(
      (err) => {
        if (err) this.log.error({ err }, 'the NATS connection closed with an error');
        this.setStatus('closed');
      },
      (err: unknown) => {
        this.log.error({ err }, 'the NATS connection closed with an error');
        this.setStatus('closed');
      },
    );
  }

  get status(): BusStatus {
    return this.state;
  }

  get maxPayloadBytes(): number {
    return this.nc.info?.max_payload ?? DEFAULT_MAX_PAYLOAD_BYTES;
  }

  /** The server this bus is connected to (host:port). */
  get server(): string {
    return this.nc.getServer();
  }

  publish(subject: string, data?: unknown): boolean {
    checkSubject(subject, false);
    const bytes = encodePayload(data, this.maxPayloadBytes);
    if (this.state !== 'connected') return false;
    try {
      this.nc.publish(subject, bytes);
      return true;
    } catch (err) {
      if (err instanceof NatsError && err.code === ErrorCode.MaxPayloadExceeded) {
        throw new BusPayloadError('too-large', `payload of ${bytes.length} bytes exceeds the server's limit`, bytes.length, { cause: err });
      }
      // Closed or draining between the check and the call.
      return false;
    }
  }

  subscribe(subject: string, handler: BusHandler, options: SubscribeOptions = {}): Unsubscribe {
    checkSubject(subject, true);
    if (options.queue !== undefined) checkSubject(options.queue, false);
    if (this.state === 'closed' || this.nc.isClosed() || this.nc.isDraining()) throw new BusUnavailableError('closed');
    const onError = (err: unknown) => this.log.error({ err, subject }, 'a bus handler failed');
    const sub = this.nc.subscribe(subject, {
      ...(options.queue !== undefined ? { queue: options.queue } : {}),
      callback: (err, msg) => {
        if (err) {
          this.log.error({ err, subject }, 'a bus subscription failed');
          return;
        }
        let data: unknown;
        try {
          data = decodePayload(msg.data);
        } catch (e) {
          this.log.error({ err: e, subject: msg.subject }, 'a bus message could not be decoded');
          return;
        }
        const m: BusMessage = msg.reply ? { subject: msg.subject, data, respond: (d?: unknown) => this.respond(msg, d) } : { subject: msg.subject, data };
        runHandler(handler, m, onError);
      },
    });
    let done = false;
    return () => {
      if (done) return;
      done = true;
      if (this.nc.isClosed()) return;
      try {
        sub.unsubscribe();
      } catch (err) {
        this.log.warn({ err, subject }, 'unsubscribing from the bus failed');
      }
    };
  }

  async request(subject: string, data: unknown, options: RequestOptions): Promise<unknown> {
    checkSubject(subject, false);
    const bytes = encodePayload(data, this.maxPayloadBytes);
    if (this.state !== 'connected') throw this.unavailable();
    let reply: Msg;
    try {
      reply = await this.nc.request(subject, bytes, { timeout: options.timeoutMs });
    } catch (err) {
      // Closing ends pending requests with the client's timeout error: say what happened instead.
      if (this.nc.isClosed() || this.nc.isDraining()) throw new BusUnavailableError('closed', { cause: err });
      throw this.mapError(err, subject, options.timeoutMs);
    }
    return decodePayload(reply.data);
  }

  async flush(): Promise<void> {
    if (this.state !== 'connected') throw this.unavailable();
    try {
      await this.nc.flush();
    } catch (err) {
      throw this.mapError(err, '', 0);
    }
  }

  onStatus(listener: (status: BusStatus) => void): () => void {
    return this.listeners.add(listener);
  }

  async close(): Promise<void> {
    if (!this.nc.isClosed()) {
      if (this.state === 'connected' && !this.nc.isDraining()) {
        let timer: NodeJS.Timeout | undefined;
        const drained = this.nc.drain().then(
          () => true,
          (err: unknown) => {
            this.log.warn({ err }, 'draining the NATS connection failed; closing it');
            return false;
          },
        );
        const late = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), this.closeTimeoutMs)));
        const ok = await Promise.race([drained, late]);
        clearTimeout(timer);
        if (!ok && !this.nc.isClosed()) await this.nc.close();
      } else {
        await this.nc.close();
      }
    }
    await this.closedDone;
  }

  private respond(msg: Msg, data: unknown): boolean {
    const bytes = encodePayload(data, this.maxPayloadBytes);
    if (this.state !== 'connected') return false;
    try {
      return msg.respond(bytes);
    } catch {
      return false;
    }
  }

  private unavailable(cause?: unknown): BusUnavailableError {
    return new BusUnavailableError(this.state === 'closed' || this.nc.isClosed() ? 'closed' : 'reconnecting', cause ? { cause } : undefined);
  }

  private mapError(err: unknown, subject: string, timeoutMs: number): Error {
    if (!(err instanceof NatsError)) return err as Error;
    switch (err.code) {
      case ErrorCode.NoResponders:
        return new BusNoRespondersError(subject);
      case ErrorCode.Timeout:
        return new BusTimeoutError(subject, timeoutMs);
      case ErrorCode.MaxPayloadExceeded:
        return new BusPayloadError('too-large', `payload exceeds the server's limit`, undefined, { cause: err });
      case ErrorCode.ConnectionClosed:
      case ErrorCode.ConnectionDraining:
      case ErrorCode.Disconnect:
        return this.unavailable(err);
      default:
        return err;
    }
  }

  private setStatus(status: BusStatus): void {
    if (this.state === status || this.state === 'closed') return;
    this.state = status;
    this.listeners.emit(status);
  }

  private async watchStatus(): Promise<void> {
    for await (const s of this.nc.status()) {
      switch (s.type) {
        case Events.Disconnect:
          this.log.warn({ server: String(s.data) }, 'lost the NATS connection; reconnecting');
          this.setStatus('reconnecting');
          break;
        case Events.Reconnect:
          this.log.info({ server: String(s.data) }, 'reconnected to NATS');
          this.setStatus('connected');
          break;
        case Events.LDM:
          this.log.warn({ server: String(s.data) }, 'the NATS server is entering lame duck mode');
          break;
        case Events.Error:
          this.log.error({ err: s.data }, 'the NATS server reported an error');
          break;
        default:
          break;
      }
    }
  }
}
