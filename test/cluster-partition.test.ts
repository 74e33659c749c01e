/**
 * One node cut off from NATS alone (through a TCP proxy the test cuts), while it still reaches the
 * store: past CLUSTER_BUS_LOSS_RELEASE_MS it hands its shards over to the connected node and says
 * so on /readyz, so the rest of the cluster is not left answering 503 for its actors; once the
 * proxy lets it through again it takes its share back. Never two owners of a shard meanwhile.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { waitFor } from './helpers.js';
import { startCluster, type ClusterNodeServer, type TestCluster } from './cluster-nodes.js';
import { TcpProxy } from './tcp-proxy.js';

const test = suite('cluster: one node cut off from NATS');
let cl: TestCluster;
let proxy: TcpProxy;

test.before(async () => {
  cl = await startCluster({ nodes: 1 });
  proxy = await TcpProxy.start({ host: '127.0.0.1', port: cl.nats.port });
});

test.after(async () => {
  await proxy.close();
  await cl.stop();
});

/** Shards both nodes count as their own at this instant (must be none). */
function doubleOwned(a: ClusterNodeServer, b: ClusterNodeServer): number[] {
  const mine = a.ctx.cluster!.shards.ownedShards();
  return [...b.ctx.cluster!.shards.ownedShards().keys()].filter((s) => mine.has(s));
}

test('cut off past the threshold: its shards go to the connected node, /readyz says why; back: it takes its share again', async () => {
  const A = cl.nodes[0]!;
  const B = await cl.add('n2', {}, { natsServers: [proxy.url('nats')] });
  await waitFor(() => B.ctx.cluster!.shards.ownedShards().size > 0, 20_000, 50);

  proxy.cut();
  const handed = await waitFor(
    async () => {
      assert.equal(doubleOwned(A, B), []);
      const r = await cl.as(B).get('/readyz');
      return B.ctx.cluster!.shards.ownedShards().size === 0 && A.ctx.cluster!.shards.ownedShards().size === 16 ? r : null;
    },
    20_000,
    50,
  );
  assert.is(handed.status, 503);
  assert.is(handed.body.error.code, 'not_ready');
  assert.match(handed.body.error.message, /handed its shards over/);
  assert.ok(B.logs.some((l) => l.includes('hands its shards over')), 'logged');
  assert.is((await cl.as(A).get('/readyz')).status, 200, 'the connected node stays ready');

  proxy.restore();
  await waitFor(
    async () => {
      assert.equal(doubleOwned(A, B), []);
      const r = await cl.as(B).get('/readyz');
      return r.status === 200 && B.ctx.cluster!.shards.ownedShards().size > 0;
    },
    30_000,
    50,
  );
});

test.run();
