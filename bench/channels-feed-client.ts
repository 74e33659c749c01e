/**
 * Live-feed subscribers for bench/channels.ts, in their own process: opens many /ws/feed
 * sockets (the `ws` package), authenticates each with the token frame (several people's tokens
 * in turn), subscribes each to one channel, and records when each socket receives each `message.created` (wall clock in ms,
 * `performance.timeOrigin + performance.now()`, comparable across processes on one machine).
 */
import { performance } from 'node:perf_hooks';
import WebSocket from 'ws';

type Cmd = { cmd: 'connect'; url: string; tokens: string[]; channelId: string; count: number; concurrency: number } | { cmd: 'collect' } | { cmd: 'close' };

const now = () => performance.timeOrigin + performance.now();
/** Messages are numbered `fan-out #<i>`; the content is read from the frame text without parsing it. */
const MARK = '"content":"';
const MARK_QUOTE = MARK.length;
const sockets: WebSocket[] = [];
/** Message content -> receipt times, one per socket that received it. */
const received = new Map<string, number[]>();

function open(url: string, token: string, channelId: string): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url.replace(/^http/, 'ws') + '/ws/feed', { perMessageDeflate: false, skipUTF8Validation: true });
    ws.once('error', reject);
    // Closed before it subscribed (4413: the person holds FEED_SOCKETS_PER_PERSON sockets already).
    ws.once('close', (code, reason) => reject(new Error(`feed socket closed before subscribing: ${code} ${reason.toString()}`)));
    ws.once('open', () => ws.send(JSON.stringify({ type: 'auth', token })));
    ws.on('message', (data: Buffer) => {
      const at = now();
      const text = data.toString();
      if (text.startsWith('{"type":"message.created"')) {
        // The least work per frame: the subscribers share this process's CPU, and their delay is measured.
        const i = text.indexOf(MARK);
        const content = text.slice(i + MARK_QUOTE, text.indexOf('"', i + MARK_QUOTE));
        let list = received.get(content);
        if (!list) received.set(content, (list = []));
        list.push(at);
        return;
      }
      const f = JSON.parse(text) as { type: string };
      if (f.type === 'welcome') ws.send(JSON.stringify({ type: 'subscribe', channelId }));
      else if (f.type === 'subscribed') resolve(ws);
      else if (f.type === 'error') reject(new Error(text));
    });
  });
}

process.on('message', async (m: { id: number } & Cmd) => {
  try {
    if (m.cmd === 'connect') {
      for (let i = 0; i < m.count; i += m.concurrency) {
        // The sockets are spread over the people's tokens (each person holds at most FEED_SOCKETS_PER_PERSON).
        const batch = await Promise.all(Array.from({ length: Math.min(m.concurrency, m.count - i) }, (_, j) => open(m.url, m.tokens[(i + j) % m.tokens.length]!, m.channelId)));
        sockets.push(...batch);
      }
      return process.send!({ id: m.id, connected: sockets.length });
    }
    if (m.cmd === 'collect') {
      const out = Object.fromEntries(received);
      received.clear();
      return process.send!({ id: m.id, received: out });
    }
    if (m.cmd === 'close') {
      for (const ws of sockets) ws.terminate();
      process.send!({ id: m.id });
      setTimeout(() => process.exit(0), 50);
    }
  } catch (err) {
    process.send!({ id: m.id, error: (err as Error).stack ?? String(err) });
  }
});
process.send!({ id: 0, hello: true });
