/**
 * The floor: the thinnest program that does the work a benchmarked operation cannot avoid, run
 * in the same bench run, on the same machine, with the same load generators as Steward. A
 * figure's ratio to its floor moves far less from day to day than the figure itself does on a
 * shared machine (docs/performance.md). One bare uWebSockets.js server, driven over IPC:
 *
 * - /ws/agent: the agent handshake's crypto and frames and nothing else (a challenge, one verify
 *   of the auth signature; a certificate signed and offered, one verify of the co-signature; on
 *   reconnection the kept certificate offered again and its co-signature compared, as Steward
 *   does); a heartbeat parsed with JSON.parse and acknowledged; `recert` signs a new certificate
 *   for every ready socket and verifies each co-signature: what bench/loadgen.ts speaks, unchanged;
 * - GET anything: the JSON set by `json`, as is (Steward's answer to the same request);
 * - POST /post: the body parsed, a line appended to a file, one frame to the /ws/mention socket;
 * - /ws/feed: `auth` answered with `welcome`, `subscribe` with uWS's own topic subscription; POST
 *   /publish sends the body to the topic with uWS's `publish`.
 */
import { mkdtemp, open, rm, type FileHandle } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { loadUws, type HttpResponse, type WebSocket } from '../src/http/uws.js';
import { ed25519 } from '../src/domain/ed25519.js';
import { profileCommand } from './profiler.js';
import { readRunQueueWaitMs } from './machine.js';
import { serveCommands } from './proc.js';
import { memory } from './memory.js';

type Msg = { cmd: 'start' } | { cmd: 'crypto' } | { cmd: 'json'; body: string } | { cmd: 'recert' } | { cmd: 'memory' } | { cmd: 'online' } | { cmd: 'cpu' } | { cmd: 'profile'; file?: string } | { cmd: 'stop' };

interface Kept {
  bytes: Buffer;
  serverSignature: string;
  agentSignature: string | null;
}

/** One agent socket's state. */
interface Agent {
  did: string;
  publicKey: Buffer;
  nonce: string;
  ready: boolean;
  /** The certificate offered and not yet accepted. */
  offered: Kept | null;
}

const crypto = ed25519();
const server = crypto.generate();
const serverKey = crypto.signingKey(server.seed);
/** The certificate each DID accepted last: offered again at reconnection, compared rather than verified. */
const kept = new Map<string, Kept>();
const sockets = new Set<WebSocket<Agent>>();
let serial = 0;
let dir = '';
let log: FileHandle | null = null;
let mention: WebSocket<unknown> | null = null;
let json = '{}';
let listen: unknown = null;
const uws = loadUws().uws;

/** A certificate's text (about the size of Steward's canonical text) and its signature. */
function issue(a: Agent, policyId: string | null): Kept {
  const now = Date.now();
  const text = JSON.stringify({
    capabilities: ['api_call', 'file_access'],
    expiresAt: new Date(now + 86_400_000).toISOString(),
    issuedAt: new Date(now).toISOString(),
    issuer: 'did:key:floor',
    policyId,
    resourceLimits: null,
    serial: `floor-${++serial}`,
    subject: a.did,
    subjectPublicKey: a.publicKey.toString('base64url'),
    version: 1,
  });
  const bytes = Buffer.from(text, 'utf8');
  return { bytes, serverSignature: crypto.sign(serverKey, bytes).toString('base64url'), agentSignature: null };
}

function offer(ws: WebSocket<Agent>, k: Kept): void {
  ws.getUserData().offered = k;
  ws.send(`{"type":"certificate_offer","certificate":${k.bytes.toString('utf8')},"serverSignature":"${k.serverSignature}"}`);
}

function onAgentFrame(ws: WebSocket<Agent>, text: string): void {
  const a = ws.getUserData();
  const f = JSON.parse(text) as { type: string; seq?: number; did?: string; publicKey?: string; signature?: string; agentSignature?: string };
  switch (f.type) {
    case 'heartbeat':
      if (a.ready) ws.send(`{"type":"heartbeat_ack","seq":${f.seq}}`);
      return;
    case 'hello':
      a.did = f.did!;
      a.publicKey = Buffer.from(f.publicKey!, 'base64url');
      a.nonce = randomBytes(24).toString('base64url');
      ws.send(`{"type":"challenge","nonce":"${a.nonce}"}`);
      return;
    case 'auth': {
      if (!crypto.verify(a.publicKey, Buffer.from(`steward-agent-auth:${a.nonce}`, 'utf8'), Buffer.from(f.signature!, 'base64url'))) return void ws.end(4001, 'bad signature');
      offer(ws, kept.get(a.did) ?? issue(a, null));
      return;
    }
    case 'certificate_accept': {
      const k = a.offered;
      if (!k) return;
      a.offered = null;
      if (k.agentSignature !== f.agentSignature) {
        if (!crypto.verify(a.publicKey, k.bytes, Buffer.from(f.agentSignature!, 'base64url'))) return void ws.end(4001, 'bad co-signature');
        kept.set(a.did, { ...k, agentSignature: f.agentSignature! });
      }
      a.ready = true;
      ws.send(`{"type":"ready","agentId":"${a.did}","certificate":${k.bytes.toString('utf8')},"serverSignature":"${k.serverSignature}"}`);
      return;
    }
  }
}

function answer(res: HttpResponse, status: string, body: string): void {
  res.cork(() => res.writeStatus(status).writeHeader('content-type', 'application/json').end(body));
}

/** The whole body of a request, then `done` (uWS hands it over in chunks it reuses). */
function readBody(res: HttpResponse, done: (body: Buffer) => void): void {
  let chunks: Buffer[] = [];
  res.onAborted(() => (chunks = []));
  res.onData((chunk, last) => {
    chunks.push(Buffer.from(chunk.slice(0)));
    if (last) done(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks));
  });
}

async function start(): Promise<number> {
  dir = await mkdtemp(join(tmpdir(), 'steward-floor-'));
  log = await open(join(dir, 'posts.jsonl'), 'a');
  const decoder = new TextDecoder();
  const app = uws
    .App()
    .ws<Agent>('/ws/agent', {
      idleTimeout: 0,
      maxPayloadLength: 64 * 1024,
      upgrade: (res, req, context) => {
        const data: Agent = { did: '', publicKey: Buffer.alloc(0), nonce: '', ready: false, offered: null };
        res.upgrade(data, req.getHeader('sec-websocket-key'), req.getHeader('sec-websocket-protocol'), req.getHeader('sec-websocket-extensions'), context);
      },
      open: (ws) => void sockets.add(ws),
      message: (ws, message) => onAgentFrame(ws, decoder.decode(message)),
      close: (ws) => void sockets.delete(ws),
    })
    .ws('/ws/mention', {
      idleTimeout: 0,
      open: (ws) => void (mention = ws),
      close: () => void (mention = null),
    })
    .ws<{ topic: string }>('/ws/feed', {
      idleTimeout: 0,
      message: (ws, message) => {
        const f = JSON.parse(decoder.decode(message)) as { type: string; channelId?: string };
        if (f.type === 'auth') ws.send('{"type":"welcome"}');
        else if (f.type === 'subscribe') {
          ws.subscribe(`channel:${f.channelId}`);
          ws.send(`{"type":"subscribed","channelId":"${f.channelId}"}`);
        }
      },
    })
    .post('/post', (res) =>
      readBody(res, (body) => {
        const post = JSON.parse(body.toString('utf8')) as { content: string };
        const line = Buffer.from(JSON.stringify({ content: post.content, at: Date.now() }) + '\n');
        log!.write(line).then(
          () => {
            mention?.send(`{"type":"channel_message_send","message":${JSON.stringify({ content: post.content })}}`);
            answer(res, '201 Created', '{"ok":true}');
          },
          () => answer(res, '500 Internal Server Error', '{"ok":false}'),
        );
      }),
    )
    .post('/publish/:channel', (res, req) => {
      const topic = `channel:${req.getParameter(0)}`;
      readBody(res, (body) => {
        app.publish(topic, body, false);
        answer(res, '201 Created', '{"ok":true}');
      });
    })
    .get('/*', (res) => answer(res, '200 OK', json));
  return new Promise((resolve, reject) =>
    app.listen('127.0.0.1', 0, (socket) => {
      if (!socket) return reject(new Error('the floor server could not listen'));
      listen = socket;
      resolve(uws.us_socket_local_port(socket));
    }),
  );
}

/** µs per Ed25519 sign and verify of a certificate's text, with the implementation Steward uses, on one core. */
function cryptoCost(): { signUs: number; verifyUs: number; implementation: string } {
  const a: Agent = { did: 'did:key:floor-agent', publicKey: server.publicKey, nonce: '', ready: false, offered: null };
  const { bytes } = issue(a, null);
  const sig = crypto.sign(serverKey, bytes);
  const each = (n: number, fn: () => unknown) => {
    for (let i = 0; i < 50; i++) fn();
    const t0 = performance.now();
    for (let i = 0; i < n; i++) fn();
    return ((performance.now() - t0) * 1000) / n;
  };
  return { signUs: each(500, () => crypto.sign(serverKey, bytes)), verifyUs: each(500, () => crypto.verify(server.publicKey, bytes, sig)), implementation: crypto.name };
}

serveCommands<Msg>(
  async (raw) => {
    switch (raw.cmd) {
      case 'start':
        return { port: await start(), memory: memory() };
      case 'crypto':
        return cryptoCost();
      case 'json':
        json = raw.body;
        return {};
      case 'recert': {
        let sent = 0;
        for (const ws of sockets) {
          const a = ws.getUserData();
          if (!a.ready) continue;
          offer(ws, issue(a, 'floor-policy'));
          sent++;
        }
        return { sentTo: sent };
      }
      case 'memory':
        return { memory: memory(), online: [...sockets].filter((ws) => ws.getUserData().ready).length };
      case 'online':
        return { online: [...sockets].filter((ws) => ws.getUserData().ready).length };
      case 'cpu':
        return { ...process.cpuUsage(), runQueueWaitMs: readRunQueueWaitMs() };
      case 'profile':
        await profileCommand(raw.file);
        return {};
    }
  },
  async () => {
    if (listen) uws.us_listen_socket_close(listen as never);
    for (const ws of sockets) ws.close();
    await log?.close();
    await rm(dir, { recursive: true, force: true });
  },
);
