/**
 * The mentioned agent of bench/channels.ts (a), in its own process as a real agent would be: a
 * StewardAgent (the SDK) that records when its onChannelMessage handler runs for each message
 * (wall clock in ms, `performance.timeOrigin + performance.now()`, comparable across processes).
 */
import { performance } from 'node:perf_hooks';
import { StewardAgent } from '../src/agent/index.js';
import type { Ed25519KeyPair } from '../src/domain/did.js';
import WebSocket from 'ws';

type Cmd = { cmd: 'start'; url: string; keys: Ed25519KeyPair; name: string } | { cmd: 'floor'; url: string } | { cmd: 'collect' } | { cmd: 'stop' };

const now = () => performance.timeOrigin + performance.now();
/** Message number (the `#<n>` at the end of the content) -> when the handler ran. */
let received = new Map<number, number>();
let agent: StewardAgent | undefined;
/** The floor's agent (bench/floor-server.ts /ws/mention): a plain socket that reads the same content. */
let floor: WebSocket | undefined;

function record(content: string, at: number): void {
  received.set(Number(content.slice(content.lastIndexOf('#') + 1)), at);
}

process.on('message', async (m: { id: number } & Cmd) => {
  try {
    if (m.cmd === 'start') {
      agent = new StewardAgent({
        url: m.url,
        keys: m.keys,
        name: m.name,
        version: '1.0.0',
        capabilities: ['api_call'],
        reconnect: false,
        onChannelMessage: (ctx) => record(ctx.message.content, now()),
      }).start();
      await agent.waitFor('ready', 30_000);
      return process.send!({ id: m.id });
    }
    if (m.cmd === 'floor') {
      const ws = new WebSocket(m.url.replace(/^http/, 'ws') + '/ws/mention', { perMessageDeflate: false });
      ws.on('message', (data: Buffer) => {
        const at = now();
        record((JSON.parse(data.toString()) as { message: { content: string } }).message.content, at);
      });
      await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
      floor = ws;
      return process.send!({ id: m.id });
    }
    if (m.cmd === 'collect') {
      const out = [...received];
      received = new Map();
      return process.send!({ id: m.id, received: out });
    }
    if (m.cmd === 'stop') {
      await agent?.stop();
      floor?.terminate();
      process.send!({ id: m.id });
      setTimeout(() => process.exit(0), 50);
    }
  } catch (err) {
    process.send!({ id: m.id, error: (err as Error).stack ?? String(err) });
  }
});
process.send!({ id: 0, hello: true });
