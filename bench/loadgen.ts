/**
 * A load generator process: many lightweight protocol clients (bench/wsclient.ts and
 * node:crypto, not one SDK object each), driven over IPC by bench/run.ts.
 *
 * Each client does the real handshake — hello, a signed challenge, a co-signed certificate —
 * and heartbeats with a token delta. Shortcuts, for the load generator only: it does not verify
 * the server's certificate signature (the SDK does), it co-signs the certificate's text as the
 * offer carries it (the server sends the canonical text; the SDK canonicalises the parsed
 * certificate), and it re-uses its co-signature when the same certificate is offered again
 * (Ed25519 is deterministic, so that is the same signature). Heartbeats are written from a
 * template (the same bytes JSON.stringify gives) and acks read without parsing the frame whole.
 * Connections are spread over several loopback source addresses (127.0.0.2, ...) so the
 * ephemeral port range is not the limit.
 */
import { ed25519 } from '../src/domain/ed25519.js';
import { certificateBytes } from '../src/domain/certificate.js';
import { readDigits } from '../src/domain/decimal.js';
import { reconnectDelayMs } from '../src/domain/agent-protocol.js';
import { MiniWebSocket } from './wsclient.js';
import { profileCommand } from './profiler.js';
import { benchKey, type BenchKey } from './keys.js';
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';

interface Init {
  cmd: 'init';
  url: string;
  seed: string;
  from: number;
  count: number;
  localAddresses: string[];
}

type Cmd =
  | Init
  | { cmd: 'connect'; concurrency: number }
  | { cmd: 'heartbeats'; intervalMs: number; durationMs?: number }
  | { cmd: 'countHeartbeats' }
  | { cmd: 'stopHeartbeats' }
  | { cmd: 'watchPolicy'; policyId: string | null; timeoutMs: number }
  | { cmd: 'reconnect'; concurrency: number }
  | { cmd: 'backoff' }
  | { cmd: 'waitReady'; since: number; timeoutMs: number }
  | { cmd: 'count' }
  | { cmd: 'cpu' }
  | { cmd: 'profile'; file?: string }
  | { cmd: 'close' };

class Client {
  ws: MiniWebSocket | null = null;
  ready = false;
  seq = 0;
  policyId: string | null = null;
  readyAt = 0;
  lastSerial = '';
  lastSig = '';
  sentAt = new Map<number, number>();
  /** Failed attempts since the last `ready` (the back-off's exponent once `backoff` is on). */
  failures = 0;
  constructor(
    readonly key: BenchKey,
    readonly localAddress: string,
  ) {}
}

let clients: Client[] = [];
let url = '';
let onReady: ((c: Client) => void) | null = null;
let latencies: number[] = [];
let acked = 0;
let sent = 0;
/** Heartbeats sent before this (performance.now()) belong to the warm-up: their acks are not counted. */
let countFrom = 0;
let hbTimers: NodeJS.Timeout[] = [];
let connectErrors = 0;
/** Set by `backoff`: a client whose socket ends tries again after the agents' back-off, as the SDK does. */
let backoff = false;
/** This process's own event-loop delay while it heartbeats: a late loop delays sends and ack readings alike. */
let loopDelay: IntervalHistogram | null = null;

const reply = (id: number, body: unknown) => process.send!({ id, ...(body as object) });

function open(c: Client, done: () => void): void {
  c.ready = false;
  let finished = false;
  const finish = () => {
    if (!finished) {
      finished = true;
      done();
    }
  };
  const ws = new MiniWebSocket(`${url}/ws/agent`, c.localAddress, {
    onOpen: () => {
      ws.send(JSON.stringify({ type: 'hello', did: c.key.did, publicKey: c.key.publicKey, name: 'bench', version: '1.0.0', capabilities: ['api_call', 'file_access'] }));
    },
    onMessage: (text) => onFrame(c, ws, text, finish),
    onError: () => {
      connectErrors++;
      finish();
    },
    onClose: () => {
      if (c.ws === ws) {
        c.ready = false;
        if (backoff) retryLater(c);
      }
      finish();
    },
  });
  c.ws = ws;
}

function retryLater(c: Client): void {
  const delay = reconnectDelayMs(c.failures);
  c.failures++;
  setTimeout(() => open(c, () => undefined), delay);
}

/**
 * The certificate of a certificate_offer as the server wrote it: its canonical text, which is
 * what the agent signs (the SDK canonicalises the parsed object instead; the result is the same).
 */
function offeredBytes(text: string): Buffer | null {
  const start = text.indexOf(CERT_KEY);
  const end = text.lastIndexOf(SIG_KEY);
  if (start < 0 || end < start || text[start + CERT_KEY.length] !== '{') return null;
  return Buffer.from(text.slice(start + CERT_KEY.length, end), 'utf8');
}
const CERT_KEY = '"certificate":';
const SIG_KEY = ',"serverSignature":';

/**
 * The frames of a re-certification are read without parsing them whole: update_capabilities (and
 * the configuration pushed at `ready`) is not acted on, of an offer only the serial and the signed text are needed, and of `ready` only
 * the certificate's policyId. (The load generators
 * share the cores with the server under test; parsing is most of what they do per frame.)
 */
const UPDATE_HEAD = '{"type":"update_capabilities"';
/** Configuration pushed at every `ready` (models, skills): the bench agents do not act on it. */
const CONFIG_HEADS = ['{"type":"llm_config"', '{"type":"skills_config"'];
const OFFER_HEAD = '{"type":"certificate_offer"';
/** The serial inside the canonical certificate text (a string value cannot hold this unescaped). */
const SERIAL_KEY = '"serial":"';
const READY_HEAD = '{"type":"ready"';
const POLICY_ID = /"policyId":(null|"[^"\\]*")/;

const ACK_HEAD = '{"type":"heartbeat_ack","seq":';

function onFrame(c: Client, ws: MiniWebSocket, text: string, finish: () => void): void {
  if (text.startsWith(ACK_HEAD)) {
    // The frame the server sends most: its seq is read off the text (the server writes exactly this form).
    return onAck(c, readDigits(text, ACK_HEAD.length, text.length - 1));
  }
  if (text.startsWith(UPDATE_HEAD) || text.startsWith(CONFIG_HEADS[0]!) || text.startsWith(CONFIG_HEADS[1]!)) return;
  if (text.startsWith(OFFER_HEAD)) {
    const at = text.indexOf(SERIAL_KEY);
    const bytes = offeredBytes(text);
    if (at > 0 && bytes) return acceptOffer(c, ws, text.slice(at + SERIAL_KEY.length, text.indexOf('"', at + SERIAL_KEY.length)), bytes);
  }
  if (text.startsWith(READY_HEAD)) {
    const m = POLICY_ID.exec(text);
    if (m) return onReadyFrame(c, JSON.parse(m[1]!) as string | null, finish);
  }
  const f = JSON.parse(text);
  switch (f.type) {
    case 'challenge':
      ws.send(JSON.stringify({ type: 'auth', signature: ed25519().sign(c.key.signingKey, Buffer.from(`steward-agent-auth:${f.nonce}`)).toString('base64url') }));
      return;
    case 'certificate_offer':
      return acceptOffer(c, ws, f.certificate.serial, offeredBytes(text) ?? certificateBytes(f.certificate));
    case 'ready':
      return onReadyFrame(c, f.certificate.policyId, finish);
    case 'heartbeat_ack':
      return onAck(c, f.seq);
    case 'registration':
    case 'update_capabilities':
    case 'llm_config':
    case 'skills_config':
      return;
    case 'error':
      process.stderr.write(`server error frame: ${JSON.stringify(f)}\n`);
      return;
  }
}

/** Co-signs an offered certificate (a certificate offered again has the signature it had). */
function acceptOffer(c: Client, ws: MiniWebSocket, serial: string, bytes: Buffer): void {
  let sig = c.lastSig;
  if (serial !== c.lastSerial) {
    sig = ed25519().sign(c.key.signingKey, bytes).toString('base64url');
    c.lastSerial = serial;
    c.lastSig = sig;
  }
  ws.sendAscii(`{"type":"certificate_accept","agentSignature":"${sig}"}`);
}

function onAck(c: Client, seq: number): void {
  const t = c.sentAt.get(seq);
  if (t !== undefined) {
    c.sentAt.delete(seq);
    if (t < countFrom) return;
    latencies.push(performance.now() - t);
    acked++;
  }
}

function startCounting(): void {
  latencies = [];
  acked = 0;
  sent = 0;
  countFrom = performance.now();
  loopDelay?.disable();
  loopDelay = monitorEventLoopDelay({ resolution: 10 });
  loopDelay.enable();
}

function onReadyFrame(c: Client, policyId: string | null, finish: () => void): void {
  c.ready = true;
  c.failures = 0;
  c.readyAt = Date.now();
  c.policyId = policyId;
  finish();
  onReady?.(c);
}

/** Opens every client with at most `concurrency` handshakes in flight; resolves when all are done. */
function connectAll(list: Client[], concurrency: number): Promise<void> {
  return new Promise((resolve) => {
    let next = 0;
    let inFlight = 0;
    let done = 0;
    if (list.length === 0) return resolve();
    const pump = () => {
      while (inFlight < concurrency && next < list.length) {
        const c = list[next++]!;
        inFlight++;
        open(c, () => {
          inFlight--;
          done++;
          if (done === list.length) resolve();
          else pump();
        });
      }
    };
    pump();
  });
}

/** A heartbeat frame is these two around its seq (what JSON.stringify of the frame gives). */
const HEARTBEAT_HEAD = '{"type":"heartbeat","seq":';
const HEARTBEAT_TAIL = ',"sinceLastSync":{"promptTokens":12,"completionTokens":3}}';

function heartbeat(c: Client): void {
  if (!c.ready || !c.ws) return;
  const seq = ++c.seq;
  c.sentAt.set(seq, performance.now());
  sent++;
  c.ws.sendAscii(HEARTBEAT_HEAD + seq + HEARTBEAT_TAIL);
}

process.on('message', async (m: { id: number } & Cmd) => {
  const { id } = m;
  switch (m.cmd) {
    case 'init': {
      url = m.url.replace(/^http/, 'ws');
      clients = [];
      for (let i = 0; i < m.count; i++) clients.push(new Client(benchKey(m.seed, m.from + i), m.localAddresses[i % m.localAddresses.length]!));
      return reply(id, { ok: true });
    }
    case 'connect': {
      const t0 = Date.now();
      connectErrors = 0;
      await connectAll(clients, m.concurrency);
      return reply(id, { ready: clients.filter((c) => c.ready).length, errors: connectErrors, ms: Date.now() - t0, lastReadyAt: Math.max(...clients.map((c) => c.readyAt)) });
    }
    case 'heartbeats': {
      startCounting();
      for (const c of clients) {
        // A random phase per client spreads the heartbeats evenly over the interval.
        const t = setTimeout(() => {
          heartbeat(c);
          const iv = setInterval(() => heartbeat(c), m.intervalMs);
          hbTimers.push(iv);
        }, Math.random() * m.intervalMs);
        hbTimers.push(t);
      }
      return reply(id, { ok: true });
    }
    case 'countHeartbeats': {
      // The end of a warm-up: what was counted so far is returned, and counting starts again.
      const warmup = { sent, acked, latencies };
      startCounting();
      return reply(id, warmup);
    }
    case 'stopHeartbeats': {
      for (const t of hbTimers) clearTimeout(t);
      hbTimers = [];
      loopDelay?.disable();
      const loop = loopDelay ? { p99: loopDelay.percentile(99) / 1e6, max: loopDelay.max / 1e6 } : { p99: NaN, max: NaN };
      return reply(id, { sent, acked, latencies, loop });
    }
    case 'watchPolicy': {
      // '*' waits for any policy (the id is not known before the POST answers); '!' for a
      // certificate under another policy than each client holds now, or under none (a policy
      // created, then deleted again).
      const before = new Map(clients.map((c) => [c, c.policyId]));
      const matches = (c: Client) => (m.policyId === '*' ? c.policyId !== null : m.policyId === '!' ? c.policyId !== before.get(c) : c.policyId === m.policyId);
      const pending = new Set(clients.filter((c) => !matches(c)));
      if (pending.size === 0) return reply(id, { lastAt: 0, missing: 0 });
      let lastAt = 0;
      const timer = setTimeout(() => {
        onReady = null;
        reply(id, { lastAt, missing: pending.size });
      }, m.timeoutMs);
      onReady = (c) => {
        if (matches(c) && pending.delete(c)) {
          lastAt = c.readyAt;
          if (pending.size === 0) {
            clearTimeout(timer);
            onReady = null;
            reply(id, { lastAt, missing: 0 });
          }
        }
      };
      return;
    }
    case 'reconnect': {
      // Every connection drops at once (as when a network path or a server restarts), then all reconnect.
      for (const c of clients) c.ws?.terminate();
      await new Promise((r) => setTimeout(r, 50));
      const t0 = Date.now();
      await connectAll(clients, m.concurrency);
      return reply(id, { t0, ready: clients.filter((c) => c.ready).length, errors: connectErrors, lastReadyAt: Math.max(...clients.map((c) => c.readyAt)) });
    }
    case 'backoff':
      backoff = true;
      return reply(id, {});
    case 'waitReady': {
      // Every client ready again at or after `since` (the server's return): when the last one was.
      const done = (c: Client) => c.ready && c.readyAt >= m.since;
      const pending = new Set(clients.filter((c) => !done(c)));
      const answer = () => {
        onReady = null;
        clearTimeout(timer);
        reply(id, { lastReadyAt: Math.max(...clients.map((c) => c.readyAt)), missing: pending.size, errors: connectErrors });
      };
      const timer = setTimeout(answer, m.timeoutMs);
      if (pending.size === 0) return answer();
      onReady = (c) => {
        if (done(c) && pending.delete(c) && pending.size === 0) answer();
      };
      return;
    }
    case 'cpu':
      return reply(id, process.cpuUsage());
    case 'profile':
      await profileCommand(m.file);
      return reply(id, {});
    case 'count':
      return reply(id, { ready: clients.filter((c) => c.ready).length });
    case 'close': {
      for (const t of hbTimers) clearTimeout(t);
      for (const c of clients) c.ws?.terminate();
      reply(id, {});
      setTimeout(() => process.exit(0), 50);
      return;
    }
  }
});
process.send!({ id: 0, hello: true });
