/**
 * Heartbeats across a crash: a real server in a child process, killed with SIGKILL while an agent
 * heartbeats, then started again on the same data. The agent follows the protocol (it keeps what
 * was not acknowledged, drops what `ready` says is stored, sends the rest again under the same
 * seqs): the totals must be exactly what it sent.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { rm } from 'node:fs/promises';
import { generateKeyPair } from '../src/domain/did.js';
import { ownerOf } from './fixtures.js';
import { client, startServer, tempDir, waitFor } from './helpers.js';
import { approvedKeys, heartbeat, RawAgent } from './fleet-helpers.js';
import { backend } from './store-backend.js';
import { StewardProcess } from './cli-process.js';

const test = suite('fleet heartbeats across a crash');

test('SIGKILL in the middle of heartbeats: after the restart ready says the last stored seq, and the resent ones are counted once', async () => {
  const store = await backend();
  const dataDir = await tempDir();
  const env = { DATA_DIR: dataDir, STEWARD_OWNER_DID: generateKeyPair().did, TOKEN_ROLLUP_INTERVAL_SECONDS: '1', ...store.env };
  // An approved agent and an owner session, made on the same data by a server in this process.
  const setup = await startServer(env, dataDir);
  const owner = await ownerOf(setup);
  const keys = await approvedKeys(setup, owner);
  await setup.stop();
  const children: StewardProcess[] = [];
  const start = async () => {
    const child = await StewardProcess.serve(env);
    children.push(child);
    return { child, api: client(child.url, owner.token) };
  };
  try {
    let { child, api } = await start();
    const totals = async () => (await api.get('/api/stats/tokens')).body.allTime;
    const rolledUp = async () => (await api.get(`/api/agents/${encodeURIComponent(keys.did)}`)).body.agent.tokenUsage.allTime;

    let raw = new RawAgent(child.url, keys);
    await raw.authenticate();
    assert.is((await raw.acceptNextOffer()).lastHeartbeatSeq, null);
    const acked = new Set<number>();
    let sent = 0;
    // Acknowledged heartbeats.
    while (sent < 200) raw.send(heartbeat(++sent, 1, 2));
    for (let i = 0; i < 200; i++) acked.add((await raw.next('heartbeat_ack')).seq);
    // Stored, and folded by a periodic roll-up, but their acknowledgements are never read: the
    // agent stops reading its socket, and the crash takes them.
    raw.ws.pause();
    while (sent < 400) raw.send(heartbeat(++sent, 1, 2));
    await waitFor(async () => (await totals()).promptTokens === 400, 30_000);
    await waitFor(async () => (await rolledUp()).promptTokens === 400, 30_000);
    // And some in flight when the server dies.
    while (sent < 500) raw.send(heartbeat(++sent, 1, 2));
    child.kill('SIGKILL');
    await child.exited;
    raw.ws.terminate();
    for (const f of raw.frames) if (f.type === 'heartbeat_ack') acked.add(f.seq);

    ({ child, api } = await start());
    const stored = (await totals()).promptTokens;
    assert.ok(stored >= 400 && stored <= 500, `stored ${stored}`);
    raw = new RawAgent(child.url, keys);
    await raw.authenticate();
    const ready = await raw.acceptNextOffer();
    // One connection's heartbeats are stored in order, so the stored ones are seqs 1..stored.
    assert.is(ready.lastHeartbeatSeq, stored, 'ready says the last stored seq');
    const resend: number[] = [];
    for (let seq = 1; seq <= sent; seq++) if (!acked.has(seq) && seq > ready.lastHeartbeatSeq) resend.push(seq);
    for (const seq of resend) raw.send(heartbeat(seq, 1, 2));
    raw.send(heartbeat(++sent, 1, 2)); // numbered on above both
    for (let i = 0; i <= resend.length; i++) await raw.next('heartbeat_ack');
    assert.equal(await totals(), { promptTokens: sent, completionTokens: 2 * sent }, 'each heartbeat counted once');

    // Killed again with nothing in flight: nothing lost, and ready still knows the last seq.
    child.kill('SIGKILL');
    await child.exited;
    raw.ws.terminate();
    ({ child, api } = await start());
    raw = new RawAgent(child.url, keys);
    await raw.authenticate();
    assert.is((await raw.acceptNextOffer()).lastHeartbeatSeq, sent);
    assert.equal(await totals(), { promptTokens: sent, completionTokens: 2 * sent });
    raw.close();
    child.kill('SIGTERM');
    assert.is(await child.exited, 0, 'a clean shutdown after it all');
  } finally {
    for (const c of children) if (!c.exit) c.kill('SIGKILL');
    await rm(dataDir, { recursive: true, force: true });
    await store.drop();
  }
});

test.run();
