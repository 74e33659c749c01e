import { startServer } from './helpers.js';
const s = await startServer();
const c = s.ctx.c;
const docs = Array.from({ length: 10000 }, (_, i) => ({ _id: 'did:key:z6Mk' + i, name: 'a' + i, publicKey: 'x', version: '1', status: 'active', capabilities: ['api_call'], requestedCapabilities: [], registeredAt: '', lastSeen: null } as any));
await c.agents.insertMany(docs);
await c.workspaceAgents.insertMany(docs.map((d, i) => ({ _id: 'm' + i, workspaceId: 'w', agentDid: d._id, isPrimary: true, joinedAt: '' })));
for (const [name, fn] of [
  ['agents.findById', (i: number) => c.agents.findById('did:key:z6Mk' + i)],
  ['workspaceAgents.find agentDid', (i: number) => c.workspaceAgents.find({ agentDid: 'did:key:z6Mk' + i })],
  ['certificates.find sorted', (i: number) => c.certificates.find({ agentDid: 'did:key:z6Mk' + i }, { sort: { acceptedAt: -1 }, limit: 1 })],
  ['sessions.findById', (i: number) => c.sessions.findById('agent:did:key:z6Mk' + i)],
] as const) {
  const t0 = performance.now();
  for (let i = 0; i < 5000; i++) await fn(i);
  console.log(name, ((performance.now() - t0) / 5000 * 1000).toFixed(0), 'µs');
  const t1 = performance.now();
  await Promise.all(Array.from({ length: 5000 }, (_, i) => fn(i)));
  console.log(name, 'concurrent', ((performance.now() - t1) / 5000 * 1000).toFixed(0), 'µs');
}
await s.stop(true);
