/**
 * The bus contract (test/bus-contract.ts) against the in-process bus and against NATS (a real
 * nats-server started for this file), and the subject names.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { LocalBus, LocalHub } from '../src/cluster/bus-local.js';
import { connectNatsBus } from '../src/cluster/bus-nats.js';
import { clusterSubjects, hashToken, token } from '../src/cluster/subjects.js';
import { checkSubject } from '../src/cluster/bus.js';
import { runBusContract } from './bus-contract.js';
import { startNatsServer } from './nats-server.js';

runBusContract('in-process', async () => {
  const hub = new LocalHub();
  return { connect: async (log) => new LocalBus({ hub, log }), cleanup: async () => undefined };
});

runBusContract('nats', async () => {
  const server = await startNatsServer();
  return {
    connect: (log) => connectNatsBus({ servers: [server.url], log, reconnectWaitMs: 50 }),
    cleanup: () => server.stop(),
  };
});

const subjects = suite('cluster subjects');

subjects('agent, shard, node, broadcast and feed subjects are valid NATS subjects whatever the input', () => {
  const s = clusterSubjects('prod-eu');
  const did = 'did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK';
  const agent = s.agent(did);
  assert.match(agent, /^steward\.prod-eu\.agent\.~[A-Za-z0-9_-]{22}$/);
  assert.is(s.agent(did), agent, 'stable');
  assert.is.not(s.agent(`${did}x`), agent);
  assert.is(s.shard(17), 'steward.prod-eu.shard.17');
  assert.is(s.bcast('policy-changed'), 'steward.prod-eu.bcast.policy-changed');
  assert.is(s.feed('actors', 'agent'), 'steward.prod-eu.feed.actors.agent');
  const odd = s.feed('actors', 'did:web:example.com:a b*>');
  assert.match(odd, /^steward\.prod-eu\.feed\.actors\.~[A-Za-z0-9_-]{22}$/);
  assert.is(s.node('node-1'), 'steward.prod-eu.node.node-1');
  assert.is(s.allFeeds, 'steward.prod-eu.feed.>');
  for (const subject of [agent, odd, s.node('host.example.com'), s.bcast('a.b')]) checkSubject(subject, false);
  checkSubject(s.allFeeds, true);
});

subjects('safe tokens are kept, others hashed; a hashed form never equals a kept one', () => {
  assert.is(token('actors'), 'actors');
  assert.is(token('a'.repeat(64)), 'a'.repeat(64));
  assert.is(token('a'.repeat(65)), hashToken('a'.repeat(65)));
  assert.is(token('a.b'), hashToken('a.b'));
  assert.ok(token('x~y').startsWith('~'));
  assert.throws(() => clusterSubjects('has.dot'), /cluster name/);
  assert.throws(() => clusterSubjects(''), /cluster name/);
  assert.throws(() => clusterSubjects('ok').shard(-1), /non-negative/);
  assert.throws(() => clusterSubjects('ok').feed(), /needs a topic/);
});

subjects.run();
