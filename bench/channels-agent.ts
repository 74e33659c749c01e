/**
 * The mentioned agent of bench/channels.ts (a), in its own process as a real agent would be: a
 * StewardAgent (the SDK) that records when its onChannelMessage handler runs for each message
 * (wall clock in ms, `performance.timeOrigin + performance.now()`, comparable across processes).
 */
import { performance } from 'node:perf_hooks';
import { StewardAgent } from '../src/agent/index.js';
import type { Ed25519KeyPair } from '../src/domain/did.js';

type Cmd = { cmd: 'start'; url: string; keys: Ed25519KeyPair; name: string } | { cmd: 'collect' } | { cmd: 'stop' };

const now = () => performance.timeOrigin + performance.now();
/** Message number (the `#<n>` at the end of the content) -> when the handler ran. */
let received = new Map<number, number>();
let agent: StewardAgent | undefined;

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
        onChannelMessage: (ctx) => {
          const at = now();
          const content = ctx.message.content;
          received.set(Number(content.slice(content.lastIndexOf('#') + 1)), at);
        },
      }).start();
      await agent.waitFor('ready', 30_000);
      return process.send!({ id: m.id });
    }
    if (m.cmd === 'collect') {
      const out = [...received];
      received = new Map();
      return process.send!({ id: m.id, received: out });
    }
    if (m.cmd === 'stop') {
      await agent?.stop();
      process.send!({ id: m.id });
      setTimeout(() => process.exit(0), 50);
    }
  } catch (err) {
    process.send!({ id: m.id, error: (err as Error).stack ?? String(err) });
  }
});
process.send!({ id: 0, hello: true });
