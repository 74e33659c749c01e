/**
 * The MongoDB stand-in: a loopback TCP server speaking the wire protocol (wire.ts) and answering
 * the command table (commands.ts), as the primary of a one-member replica set. For tests and for
 * trying the MongoDB backend by hand; never a store for production (docs/mongodb.md).
 *
 * Faults are set by the test that owns it: in process through `faults`, `down()`/`up()`, or from
 * another process with the `standinFault` command on any database (see FaultSpec).
 */
import { appendFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Document } from 'mongodb';
import { CommandError, CommandTable, REPLICA_SET } from './commands.js';
import { encodeReply, ProtocolError, readMessages, type Request } from './wire.js';

/**
 * One injected fault, applied to the next matching commands (`times` of them, default 1):
 * - `close-before`: the connection is closed before the command runs (nothing applied);
 * - `close-after`: the command runs, then the connection is closed before the reply;
 * - `not-writable-primary`: answered NotWritablePrimary (10107), nothing applied;
 * - `write-concern-error`: the command runs, and its reply carries a write-concern error
 *   (ShutdownInProgress, 91) with the RetryableWriteError label.
 * `commands` (default: insert, update, delete, findAndModify) and `collection` narrow it.
 */
export interface FaultSpec {
  kind: 'close-before' | 'close-after' | 'not-writable-primary' | 'write-concern-error';
  commands?: string[];
  collection?: string;
  times?: number;
}

export class StandinFaults {
  private pending: Array<Required<Omit<FaultSpec, 'collection'>> & { collection?: string }> = [];
  /** Every reply (but the handshake's) waits this long first. */
  delayMs = 0;
  /** How many injected faults have fired, by kind. */
  readonly fired: Record<FaultSpec['kind'], number> = { 'close-before': 0, 'close-after': 0, 'not-writable-primary': 0, 'write-concern-error': 0 };

  inject(spec: FaultSpec): void {
    if (!['close-before', 'close-after', 'not-writable-primary', 'write-concern-error'].includes(spec.kind)) {
      throw new Error(`unknown fault kind "${String(spec.kind)}"`);
    }
    this.pending.push({
      kind: spec.kind,
      commands: spec.commands ?? ['insert', 'update', 'delete', 'findAndModify'],
      times: spec.times ?? 1,
      ...(spec.collection ? { collection: spec.collection } : {}),
    });
  }

  clear(): void {
    this.pending = [];
    this.delayMs = 0;
  }

  /** The fault for this command, if one is pending (counted as used). */
  take(name: string, body: Document): FaultSpec['kind'] | undefined {
    const i = this.pending.findIndex((f) => f.commands.includes(name) && (!f.collection || body[name] === f.collection));
    if (i < 0) return undefined;
    const f = this.pending[i]!;
    if (--f.times <= 0) this.pending.splice(i, 1);
    this.fired[f.kind]++;
    return f.kind;
  }
}

export interface StandinOptions {
  /** Port to listen on (0: any free one). */
  port?: number;
  /** Where the databases are kept; a temporary directory, removed by stop(), when absent. */
  dataDir?: string;
  /** Where log lines go (default: stderr). */
  log?: (line: string) => void;
  /** A file to append one line per command to: its name and the fields it was sent with (also MONGO_STANDIN_TRACE). */
  traceFile?: string;
  /** Let the process exit while the stand-in still listens (a test process's shared stand-in). */
  unref?: boolean;
}

export interface MongoStandin {
  port: number;
  /** A connection string for database `db`, with the options the driver needs. */
  uri(db?: string): string;
  faults: StandinFaults;
  /** Command name → the fields the clients sent with it, seen so far. */
  readonly commands: ReadonlyMap<string, ReadonlySet<string>>;
  /** Closes every connection and refuses new ones until up(). */
  down(): Promise<void>;
  /** Accepts connections again on the same port. */
  up(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * A field of a command as the trace shows it: the fields of its statements (`updates[q,u,upsert]`),
 * a pipeline's stages, a write concern's settings; otherwise its name.
 */
function traced(field: string, value: unknown): string {
  if (field === 'pipeline' && Array.isArray(value)) return `pipeline[${value.map((st) => Object.keys(st as object)[0]).join(' ')}]`;
  if (field === 'writeConcern' && value && typeof value === 'object') return `writeConcern${JSON.stringify(value).replace(/,/g, ' ')}`;
  if (['updates', 'deletes'].includes(field) && Array.isArray(value)) {
    return `${field}[${[...new Set(value.flatMap((st) => Object.keys(st as object)))].sort().join(' ')}]`;
  }
  return field;
}

const HANDSHAKE = new Set(['hello', 'isMaster', 'ismaster']);
const HOST = '127.0.0.1';

export async function startMongoStandin(opts: StandinOptions = {}): Promise<MongoStandin> {
  const log = opts.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const traceFile = opts.traceFile ?? process.env.MONGO_STANDIN_TRACE;
  const temporary = opts.dataDir ? undefined : await mkdtemp(join(tmpdir(), 'mongo-standin-'));
  const table = new CommandTable(opts.dataDir ?? temporary!);
  const faults = new StandinFaults();
  const commands = new Map<string, Set<string>>();
  const sockets = new Set<Socket>();
  let connections = 0;
  let port = opts.port ?? 0;
  let server: Server | undefined;
  let downUntil: NodeJS.Timeout | undefined;

  const record = (name: string, body: Document): void => {
    const fields = Object.keys(body).filter((k) => k !== name);
    let seen = commands.get(name);
    if (!seen) commands.set(name, (seen = new Set()));
    for (const f of fields) seen.add(f);
    if (traceFile) {
      try {
        appendFileSync(traceFile, `${name} ${fields.sort().map((f) => traced(f, body[f])).join(',')}\n`);
      } catch {
        // tracing is best effort
      }
    }
  };

  /** The stand-in's own commands, for a test in another process: faults, delay, an outage. */
  const control = (name: string, body: Document): Document | undefined => {
    if (name === 'standinFault') {
      const spec = body.standinFault;
      if (spec === 'clear') faults.clear();
      else faults.inject(spec as FaultSpec);
      return { ok: 1 };
    }
    if (name === 'standinDelay') {
      faults.delayMs = Math.max(0, Number(body.standinDelay) || 0);
      return { ok: 1 };
    }
    if (name === 'standinOutage') {
      // Down for the given ms, then up again (the reply goes out first).
      const ms = Math.max(0, Number(body.standinOutage) || 0);
      setImmediate(() => {
        void down().then(() => {
          log(`mongo-standin: outage: refusing connections for ${ms} ms`);
          downUntil = setTimeout(() => void up().then(() => log('mongo-standin: outage over: accepting connections')), ms);
        });
      });
      return { ok: 1 };
    }
    return undefined;
  };

  const handle = async (socket: Socket, connectionId: number, req: Request): Promise<void> => {
    const name = Object.keys(req.command)[0] ?? '';
    record(name, req.command);
    let reply: Document;
    let closeAfter = false;
    try {
      const controlled = control(name, req.command);
      if (controlled) reply = controlled;
      else {
        if (!HANDSHAKE.has(name) && faults.delayMs > 0) await new Promise((r) => setTimeout(r, faults.delayMs));
        const fault = faults.take(name, req.command);
        if (fault === 'close-before') {
          log(`mongo-standin: fault: connection ${connectionId} closed before ${name}`);
          socket.destroy();
          return;
        }
        if (fault === 'not-writable-primary') {
          const labels = req.command.txnNumber !== undefined ? ['RetryableWriteError'] : [];
          reply = new CommandError(10107, 'NotWritablePrimary', 'not primary (injected fault)', labels).reply();
        } else {
          reply = await table.run(name, req.command, { address: `${HOST}:${port}`, connectionId, log });
          if (fault === 'close-after') closeAfter = true;
          if (fault === 'write-concern-error') {
            reply = {
              ...reply,
              writeConcernError: { code: 91, codeName: 'ShutdownInProgress', errmsg: 'waiting for replication interrupted (injected fault)' },
              errorLabels: ['RetryableWriteError'],
            };
          }
        }
      }
    } catch (err) {
      reply = new CommandError(2, 'BadValue', (err as Error).message).reply();
    }
    if (closeAfter) {
      log(`mongo-standin: fault: connection ${connectionId} closed after ${name} was applied`);
      socket.destroy();
      return;
    }
    if (!req.noReply && !socket.destroyed) socket.write(encodeReply(req, reply));
  };

  const accept = (socket: Socket): void => {
    const connectionId = ++connections;
    sockets.add(socket);
    socket.setNoDelay(true);
    if (opts.unref) socket.unref();
    let pending: Buffer = Buffer.alloc(0);
    // One request at a time per connection, in order (the driver waits for each reply).
    let chain: Promise<void> = Promise.resolve();
    socket.on('data', (chunk) => {
      pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
      let requests: Request[];
      try {
        ({ requests, rest: pending } = readMessages(pending));
      } catch (err) {
        // A ProtocolError, or anything else a malformed message provoked: that connection ends, the server goes on.
        const why = err instanceof ProtocolError ? err.message : `unreadable message (${(err as Error)?.message ?? String(err)})`;
        log(`mongo-standin: closing connection ${connectionId} from ${socket.remoteAddress}:${socket.remotePort}: ${why}`);
        socket.destroy();
        return;
      }
      for (const req of requests) {
        chain = chain.then(() => handle(socket, connectionId, req)).catch((err: unknown) => {
          log(`mongo-standin: connection ${connectionId} failed: ${(err as Error).message}`);
          socket.destroy();
        });
      }
    });
    socket.on('error', () => undefined); // a client gone mid-reply is not our failure
    socket.on('close', () => sockets.delete(socket));
  };

  const listen = (): Promise<void> =>
    new Promise((resolve, reject) => {
      const s = createServer(accept);
      s.once('error', reject);
      s.listen(port, HOST, () => {
        s.off('error', reject);
        port = (s.address() as { port: number }).port;
        if (opts.unref) s.unref();
        server = s;
        resolve();
      });
    });

  const down = async (): Promise<void> => {
    const s = server;
    server = undefined;
    for (const socket of sockets) socket.destroy();
    if (s) await new Promise<void>((resolve) => s.close(() => resolve()));
  };

  const up = async (): Promise<void> => {
    clearTimeout(downUntil);
    if (!server) await listen();
  };

  await listen();
  return {
    get port() {
      return port;
    },
    uri: (db = 'steward') => `mongodb://${HOST}:${port}/${encodeURIComponent(db)}?replicaSet=${REPLICA_SET}`,
    faults,
    commands,
    down,
    up,
    async stop() {
      clearTimeout(downUntil);
      await down();
      await table.close();
      if (temporary) await rm(temporary, { recursive: true, force: true });
    },
  };
}
