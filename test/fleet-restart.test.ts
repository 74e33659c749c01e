import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { openStore } from '../src/store/index.js';
import type { SnapshotDoc } from '../src/actors/host.js';
import { ownerOf } from './fixtures.js';
import { waitFor } from './helpers.js';
import { approve, fleet, newAgent, readyAgent, startWithOwner, stopAll } from './fleet-helpers.js';

const test = suite('fleet restart');

test('after a restart agents come back in their states, all offline until they reconnect', async () => {
  let { s, owner } = await startWithOwner();
  const active = await readyAgent(s, owner, { reconnect: false });
  const pending = newAgent(s, { reconnect: false });
  await pending.waitFor('pending');
  const rejected = newAgent(s, { reconnect: false });
  await rejected.waitFor('pending');
  assert.is((await owner.api.post(`/api/registrations/${rejected.registrationId}/reject`, { reason: 'no' })).status, 200);
  const serial = active.certificate!.certificate.serial;

  s = await s.restart();
  owner = await ownerOf(s);
  await stopAll(active, pending, rejected);

  const inspect = async (did: string) => (await owner.api.get(`/api/admin/actors/${encodeURIComponent(did)}?kind=agent`)).body.actor;
  const a = await inspect(active.did);
  assert.equal(a.state, { active: { connection: 'offline', certificate: 'current' } });
  assert.is(a.context.serial, serial);
  assert.is((await inspect(pending.did)).state, 'pending');
  const r = await inspect(rejected.did);
  assert.is(r.state, 'rejected');
  assert.is(r.status, 'done');
  const list = await owner.api.get('/api/agents');
  assert.equal(list.body.agents.map((x: any) => [x.id, x.isOnline]), [[active.did, false]]);
  assert.is(list.body.online, 0);
  assert.equal((await owner.api.get('/api/registrations')).body.registrations.map((x: any) => x.agentDid), [pending.did]);

  // The agent reconnects (to the new address) and is online again with its stored certificate.
  const back = newAgent(s, { keys: active['opts'].keys });
  await back.waitFor('ready');
  assert.is(back.certificate!.certificate.serial, serial);
  await waitFor(async () => (await inspect(active.did)).state.active?.connection === 'online');
  // The pending agent can still be approved after the restart.
  const again = newAgent(s, { keys: pending['opts'].keys });
  await approve(owner, again, ['api_call']);
  await again.waitFor('ready');
  await stopAll(back, again);
  await s.stop(true);
});

test('an agent left online by a crash is restored offline', async () => {
  let { s, owner } = await startWithOwner();
  const agent = await readyAgent(s, owner, { reconnect: false });
  await s.ctx.actors.flush();
  const dir = s.dataDir;
  await agent.stop();
  await s.stop();
  // Put back the snapshot a crash would have left: online.
  const store = await openStore({ dataDir: dir });
  const snaps = store.collection<SnapshotDoc>('actor_snapshots');
  const doc = (await snaps.findById(`agent:${agent.did}`))!;
  const snap = JSON.parse(doc.snapshot);
  assert.equal(snap.value, { active: { connection: 'offline', certificate: 'current' } }, 'graceful stop wrote offline');
  snap.value.active.connection = 'online';
  await snaps.updateOne({ _id: doc._id }, { $set: { snapshot: JSON.stringify(snap) } });
  await store.close();

  s = await s.restart();
  owner = await ownerOf(s);
  const a = (await owner.api.get(`/api/admin/actors/${encodeURIComponent(agent.did)}?kind=agent`)).body.actor;
  assert.equal(a.state, { active: { connection: 'offline', certificate: 'current' } });
  assert.is(fleet(s).gateway.isOnline(agent.did), false);
  await s.stop(true);
});

test('an approval is in the stored actor snapshot when it is answered, whatever the write delay', async () => {
  const { s, owner } = await startWithOwner({ AGENT_ACTOR_WRITE_DELAY_MS: '60000' });
  const agent = newAgent(s, { reconnect: false });
  await approve(owner, agent, ['api_call']);
  const doc = await s.ctx.store.collection<SnapshotDoc>('actor_snapshots').findById(`agent:${agent.did}`);
  assert.ok(doc, 'snapshot stored');
  const value = JSON.parse(doc!.snapshot).value;
  assert.type(value.active, 'object', `stored as active, not ${JSON.stringify(value)}`);
  await stopAll(agent);
  await s.stop(true);
});

test.run();
