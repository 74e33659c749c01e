/**
 * The live feed under bursts (docs/feed.md, "Batching and folding"; "A slow client"): hundreds
 * of agents coming online and re-certified at once reach a subscriber of `presence` and `actors`
 * as a few batches whose frames and folded counts add up to the events, never more; and a
 * subscriber that stops reading is closed with 4429 instead of growing the server's memory.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { generateKeyPair } from '../src/domain/did.js';
import { waitFor } from './helpers.js';
import { RawAgent, makeWorkspace, startWithOwner } from './fleet-helpers.js';
import { FeedClient } from './channels-helpers.js';

const test = suite('live feed batching');

const AGENTS = 200;
const MAX_FRAMES = 50;

test('a burst of presence and re-certification reaches a subscriber as a few batches, frames + folded = events', async () => {
  const { s, owner } = await startWithOwner({ AGENT_OFFLINE_GRACE_MS: '0', FEED_BATCH_WINDOW_MS: '100', FEED_BATCH_MAX_FRAMES: String(MAX_FRAMES) });
  try {
    const ws = await makeWorkspace(owner, 'Burst');
    // Agents approved into the workspace, as the fleet leaves them (no registration round trips).
    const now = new Date().toISOString();
    const keys = Array.from({ length: AGENTS }, () => generateKeyPair());
    await s.ctx.c.agents.insertMany(
      keys.map((k, i) => ({
        _id: k.did,
        name: `burst-${i}`,
        publicKey: k.publicKey,
        version: '1.0.0',
        status: 'active' as const,
        capabilities: ['file_access' as const],
        requestedCapabilities: ['file_access' as const],
        registeredAt: now,
        lastSeen: null,
        isOnline: false,
      })),
    );
    await s.ctx.c.workspaceAgents.insertMany(keys.map((k) => ({ _id: `${ws.id}:${k.did}`, workspaceId: ws.id, agentDid: k.did, isPrimary: true, joinedAt: now })));
    await s.ctx.fleet.roster.changed(keys.map((k) => k.did));

    const f = await FeedClient.connect(s.url, owner.token);
    f.send({ type: 'subscribe', topic: 'presence' });
    f.send({ type: 'subscribe', topic: 'actors', kind: 'agent' });
    await f.next((x) => x.type === 'subscribed' && x.topic === 'presence');
    await f.next((x) => x.type === 'subscribed' && x.topic === 'actors');

    // The events, counted where they are published (before any can reach the subscriber).
    let events = 0;
    const unlisten = s.ctx.actors.onTransition((t) => {
      if (t.kind === 'agent') events++;
    });
    s.ctx.fleet.gateway.onPresence(() => events++);
    let delivered = 0;
    let folded = 0;
    let wireFrames = 0;
    const counted = new Set<any>();
    const tally = () => {
      for (const w of f.wire) {
        if (counted.has(w)) continue;
        counted.add(w);
        const inner = w.type === 'batch' ? w.frames : [w];
        if (!inner.some((x: any) => x.type === 'presence' || x.type === 'actor.transition')) continue;
        wireFrames++;
        if (w.type === 'batch') {
          assert.ok(w.frames.length <= MAX_FRAMES, `a batch of ${w.frames.length} frames`);
          assert.is(w.folded, Object.values(w.foldedByType ?? {}).reduce((a: number, n: any) => a + n, 0), 'folded counted per type');
          folded += w.folded;
        }
        delivered += inner.length;
        assert.ok(delivered + folded <= events, `${delivered} delivered + ${folded} folded > ${events} events`);
      }
      return delivered + folded === events;
    };

    const agents = keys.map((k) => new RawAgent(s.url, k));
    await Promise.all(
      agents.map(async (a) => {
        await a.authenticate();
        await a.acceptNextOffer();
      }),
    );
    const policy = await owner.api.post('/api/policies', { workspaceId: ws.id, capabilities: ['file_access'], resourceLimits: { maxTokensPerDay: 1000 } });
    assert.is(policy.status, 201, policy.text);
    assert.is(policy.body.sentTo.length, AGENTS);
    await Promise.all(agents.map((a) => a.acceptNextOffer()));
    await waitFor(() => s.ctx.fleet.gateway.onlineCount() === AGENTS);
    await waitFor(tally, 20_000);
    assert.ok(events >= AGENTS * 3, `${events} events`);
    assert.ok(wireFrames * 5 <= events, `${wireFrames} frames for ${events} events`);

    // Going offline all at once: the same accounting.
    for (const a of agents) a.close();
    await waitFor(() => s.ctx.fleet.gateway.onlineCount() === 0);
    await waitFor(tally, 20_000);
    unlisten();
    f.close();
  } finally {
    await s.stop(true);
  }
});

test('a subscriber that stops reading is closed with 4429', async () => {
  const { s, owner } = await startWithOwner({ FEED_BATCH_WINDOW_MS: '10', AGENT_SEND_BUFFER_LIMIT_BYTES: String(64 * 1024) });
  try {
    const f = await FeedClient.connect(s.url, owner.token);
    f.send({ type: 'subscribe', topic: 'audit' });
    await f.next((x) => x.type === 'subscribed');
    f.ws.pause();
    const publisher = s.ctx.fleet.feed.publisher;
    // Rounds smaller than the limit: the 4429 close frame still fits within twice the limit.
    const blob = 'x'.repeat(4 * 1024);
    let rounds = 0;
    while (publisher.hasSubscribers('audit') && rounds < 5000) {
      for (let i = 0; i < 8; i++) {
        const at = new Date().toISOString();
        const entry = { id: `e${rounds}-${i}`, at, actor: 'system', actorType: 'system', action: 'test.big', targetType: 'test', target: null, details: { blob } };
        publisher.publish('audit', { type: 'audit', entry, at }, { adminOnly: true });
      }
      rounds++;
      await new Promise((r) => setTimeout(r, 15));
    }
    assert.not.ok(publisher.hasSubscribers('audit'), `still subscribed after ${rounds} rounds`);
    f.ws.resume();
    assert.is((await f.waitClosed(10_000)).code, 4429);
  } finally {
    await s.stop(true);
  }
});

test.run();
