/**
 * What the process-level cluster tests share: a local cluster (tools/cluster/local-cluster.ts,
 * the code of `npm run cluster`) with short leases and ownership logged, the owner's login over
 * HTTP, agents through a TCP balancer, people posting to one channel through the nodes while
 * faults happen, and the invariants checked afterwards:
 * - no shard ever had two owners: the nodes' ownership intervals (`shard acquired` / `shard lost`,
 *   logged at debug level on the store's clock), a killed process's holdings ending at the kill;
 * - the channel's `seq` unique and gap-free, and every acknowledged post stored once;
 * - the fleet's token totals equal to what the agents reported, once all of it was acknowledged,
 *   before and after the ledger is rolled up;
 * - every agent online.
 */
import { readFile } from 'node:fs/promises';
import * as assert from 'uvu/assert';
import { StewardAgent } from '../src/agent/index.js';
import { generateKeyPair, signMessage, type Ed25519KeyPair } from '../src/domain/did.js';
import { openMongoStore } from '../src/store/mongo.js';
import type { Store } from '../src/store/types.js';
import { startLocalCluster, type LocalCluster, type LocalClusterOptions, type LocalNode } from '../tools/cluster/local-cluster.js';
import { client, http, waitFor } from './helpers.js';
import { TcpBalancer } from './tcp-balancer.js';
import { stopAll } from './fleet-helpers.js';

export const SHARDS = 16;
export const LEASE_MS = 3000;

export class ProcessCluster {
  readonly ownerKeys: Ed25519KeyPair = generateKeyPair();
  readonly agents: StewardAgent[] = [];
  /** Tokens the agents recorded (each sent with a heartbeat, again until acknowledged). */
  readonly recorded = { promptTokens: 0, completionTokens: 0 };
  /** Posts the server acknowledged (201), by message id. */
  readonly acknowledged = new Set<string>();
  /** The posting loops running (keepPosting), stopped by stop() whatever a step left. */
  private readonly postings = new Set<{ stop(): Promise<{ sent: number; refused: number }> }>();
  /** Nodes out of the posting rotation (killed, paused, cut off). */
  readonly away = new Set<string>();
  /** When each node's processes were killed, in order (the test's clock is the stand-in's: both unfaked on this machine). */
  private readonly kills = new Map<string, number[]>();
  cl!: LocalCluster;
  lb!: TcpBalancer;
  store!: Store;
  token = '';
  channelId = '';

  /** Three nodes (unless told), short leases, ownership logged; the owner logged in on n1. */
  async start(opts: { nodes?: number; perNode?: LocalClusterOptions['perNode'] } = {}): Promise<void> {
    try {
      const { MONGODB_URI: _ignored, ...env } = process.env;
      this.cl = await startLocalCluster({
        nodes: opts.nodes ?? 3,
        port: 0,
        env: {
          ...env,
          ...(process.env.MONGODB_URI ? { MONGODB_URI: process.env.MONGODB_URI } : {}),
          LOG_LEVEL: 'debug',
          STEWARD_OWNER_DID: this.ownerKeys.did,
          CLUSTER_SHARDS: String(SHARDS),
          CLUSTER_LEASE_MS: String(LEASE_MS),
          CLUSTER_LEASE_MARGIN_MS: '500',
          CLUSTER_BUS_LOSS_RELEASE_MS: '3000',
          AGENT_OFFLINE_GRACE_MS: '0',
          TOKEN_ROLLUP_INTERVAL_SECONDS: '1',
        },
        ...(opts.perNode ? { perNode: opts.perNode } : {}),
      });
      this.store = await openMongoStore({ uri: this.cl.mongodbUri });
      this.lb = await TcpBalancer.start(this.cl.nodes.map((n) => n.port));
      this.token = await this.login(this.cl.nodes[0]!);
    } catch (err) {
      // uvu does not print a hook's failure: say what it was.
      console.error(err);
      throw err;
    }
  }

  async stop(): Promise<void> {
    // A step that failed left its posting loop running: it would keep the test process alive.
    await Promise.all([...this.postings].map((p) => p.stop()));
    await stopAll(...this.agents);
    await this.lb?.close();
    await this.store?.close();
    await this.cl?.stop();
  }

  get nodes(): LocalNode[] {
    return this.cl.nodes;
  }

  api(node: LocalNode) {
    return client(node.url, this.token);
  }

  live(): LocalNode[] {
    return this.cl.nodes.filter((n) => n.running && !this.away.has(n.nodeId));
  }

  async login(node: LocalNode): Promise<string> {
    const ch = await http(node.url, 'POST', '/api/auth/challenge', { json: { did: this.ownerKeys.did } });
    assert.is(ch.status, 200, ch.text);
    const signature = signMessage(this.ownerKeys, `steward-login:${ch.body.nonce}`);
    const r = await http(node.url, 'POST', '/api/auth/login', { json: { challengeId: ch.body.challengeId, did: this.ownerKeys.did, signature } });
    assert.is(r.status, 200, r.text);
    return r.body.token as string;
  }

  /** kill -9, noted for the ownership check. */
  async kill(node: LocalNode): Promise<void> {
    this.away.add(node.nodeId);
    this.kills.set(node.nodeId, [...(this.kills.get(node.nodeId) ?? []), Date.now()]);
    node.signal('SIGKILL');
    await node.exited();
  }

  /** `count` SDK agents through the balancer, approved by the owner, ready. */
  async addAgents(count: number): Promise<void> {
    for (let i = 0; i < count; i++) {
      const agent = new StewardAgent({
        url: this.lb.url,
        keys: generateKeyPair(),
        name: `proc-agent-${this.agents.length}`,
        version: '1.0.0',
        capabilities: ['api_call'],
        reconnect: { initialDelayMs: 50, maxDelayMs: 500 },
        heartbeatIntervalMs: 200,
      }).start();
      this.agents.push(agent);
      await agent.waitFor('pending');
      const r = await this.api(this.cl.nodes[0]!).post(`/api/registrations/${agent.registrationId}/approve`, { capabilities: ['api_call'] });
      assert.is(r.status, 200, r.text);
      await agent.waitFor('ready');
    }
    await this.allAgentsOnline();
  }

  async allAgentsOnline(timeoutMs = 60_000): Promise<void> {
    await waitFor(
      async () => {
        const r = await this.api(this.live()[0]!).get('/api/fleet/summary').catch(() => null);
        return r?.status === 200 && r.body.agents.online === this.agents.length;
      },
      timeoutMs,
      100,
    );
  }

  /** Until every running node in the rotation is ready and they own every shard between them. */
  async settled(timeoutMs = 60_000): Promise<void> {
    await waitFor(
      async () => {
        const rs = await Promise.all(this.live().map((n) => http(n.url, 'GET', '/readyz').catch(() => null)));
        return rs.every((r) => r?.status === 200) && rs.reduce((s, r) => s + (r!.body.cluster.ownedShards as number), 0) === SHARDS;
      },
      timeoutMs,
      100,
    );
  }

  /** Which node's log says it holds `shard` now (its last event for the shard is an acquisition). */
  async holderOf(shard: number): Promise<LocalNode | undefined> {
    for (const node of this.cl.nodes) {
      const events = (await ownershipEvents(node)).filter((e) => 'shard' in e && e.shard === shard);
      if (events.at(-1)?.msg === 'shard acquired') return node;
    }
    return undefined;
  }

  /**
   * Posts through the nodes in the rotation in turn until stopped, what is acknowledged recorded;
   * meanwhile every agent reports token usage, sent with its heartbeats.
   */
  keepPosting(): { stop(): Promise<{ sent: number; refused: number }> } {
    let running = true;
    let sent = 0;
    let refused = 0;
    const loop = (async () => {
      for (let i = 0; running; i++) {
        for (const [k, agent] of this.agents.entries()) {
          const p = 1 + ((i + k) % 7);
          agent.recordUsage(p, 2 * p);
          this.recorded.promptTokens += p;
          this.recorded.completionTokens += 2 * p;
        }
        const nodes = this.live();
        const node = nodes[i % nodes.length]!;
        const r = await this.api(node)
          .post(`/api/channels/${this.channelId}/messages`, { content: `m${i}` })
          .catch(() => null);
        if (r?.status === 201) {
          this.acknowledged.add(r.body.message.id);
          sent++;
        } else refused++;
        await new Promise((res) => setTimeout(res, 20));
      }
    })();
    const postings = this.postings;
    const handle = {
      async stop() {
        postings.delete(handle);
        running = false;
        await loop;
        return { sent, refused };
      },
    };
    postings.add(handle);
    return handle;
  }

  /** Until `more` posts past those acknowledged so far are acknowledged. */
  async postsFlow(more = 10, timeoutMs = 60_000): Promise<void> {
    const before = this.acknowledged.size;
    await waitFor(() => this.acknowledged.size >= before + more, timeoutMs, 20);
  }

  /** No shard had two owners at any instant; returns how many holdings there were. */
  async assertOneOwnerPerShard(): Promise<number> {
    const intervals = new Map<number, Array<{ node: string; epoch: number; from: number; until: number }>>();
    const add = (shard: number, h: { node: string; epoch: number; from: number; until: number }) => {
      const list = intervals.get(shard) ?? [];
      list.push(h);
      intervals.set(shard, list);
    };
    for (const node of this.cl.nodes) {
      const open = new Map<string, { epoch: number; from: number; shard: number }>();
      const kills = [...(this.kills.get(node.nodeId) ?? [])];
      for (const e of await ownershipEvents(node)) {
        if (e.msg === 'joined the cluster') {
          if (open.size === 0) continue;
          // A new process of this node: the previous one was killed with these holdings.
          const at = kills.shift();
          assert.ok(at !== undefined, `${node.nodeId}: holdings left open by a process that was not killed`);
          for (const o of open.values()) add(o.shard, { node: node.nodeId, epoch: o.epoch, from: o.from, until: at });
          open.clear();
        } else if (e.msg === 'shard acquired') open.set(`${e.shard}/${e.epoch}`, { epoch: e.epoch, from: e.from, shard: e.shard });
        else {
          const o = open.get(`${e.shard}/${e.epoch}`);
          if (!o) continue;
          open.delete(`${e.shard}/${e.epoch}`);
          add(e.shard, { node: node.nodeId, epoch: e.epoch, from: o.from, until: e.until });
        }
      }
      // Still open: held by a running process now, or by one killed last.
      const at = kills.shift() ?? Number.POSITIVE_INFINITY;
      for (const o of open.values()) add(o.shard, { node: node.nodeId, epoch: o.epoch, from: o.from, until: at });
    }
    let holdings = 0;
    for (const [shard, list] of intervals) {
      list.sort((a, b) => a.from - b.from);
      holdings += list.length;
      for (let i = 1; i < list.length; i++) {
        const prev = list[i - 1]!;
        const cur = list[i]!;
        assert.ok(prev.until <= cur.from, `shard ${shard}: ${prev.node}@${prev.epoch} until ${prev.until} overlaps ${cur.node}@${cur.epoch} from ${cur.from}`);
        assert.ok(cur.epoch > prev.epoch, `shard ${shard}: epochs rise`);
      }
    }
    return holdings;
  }

  /**
   * Once every agent's usage is acknowledged: the fleet's totals are what the agents recorded,
   * counted once, and still so once the ledger is rolled up (empty).
   */
  async assertTokensExact(): Promise<void> {
    await waitFor(() => this.agents.every((a) => a.unacknowledgedUsage().promptTokens === 0 && a.unacknowledgedUsage().completionTokens === 0), 60_000, 50).catch(
      (err: Error) => {
        throw new Error(`agents' usage not acknowledged: ${JSON.stringify(this.agents.map((a) => [a.status, a.unacknowledgedUsage()]))}: ${err.message}`);
      },
    );
    const totals = async () => {
      const r = await this.api(this.live()[0]!).get('/api/stats/tokens');
      assert.is(r.status, 200, r.text);
      return { promptTokens: r.body.allTime.promptTokens as number, completionTokens: r.body.allTime.completionTokens as number };
    };
    const acked = await totals();
    assert.equal(acked, this.recorded, `totals as acknowledged: ${JSON.stringify(acked)}, recorded ${JSON.stringify(this.recorded)}`);
    const ledger = this.store.collection<{ _id: string }>('token_ledger');
    await waitFor(async () => (await ledger.count({})) === 0, 60_000, 100).catch(async (err: Error) => {
      throw new Error(`the ledger is not rolled up: ${JSON.stringify((await ledger.find({}, { projection: { _id: 1 } })).map((d) => d._id))}: ${err.message}`);
    });
    const rolled = await totals();
    assert.equal(rolled, this.recorded, `totals once rolled up: ${JSON.stringify(rolled)}, recorded ${JSON.stringify(this.recorded)}`);
  }

  /** Every invariant, at the end of a file's faults: ownership moved, and at least `minMessages` were posted. */
  async assertInvariants(minMessages: number): Promise<void> {
    assert.ok((await this.assertOneOwnerPerShard()) > SHARDS, 'ownership moved');
    await this.assertTokensExact();
    assert.ok((await this.assertChannelIntact()) >= minMessages);
  }

  /** The channel's `seq` is 1…n, and every acknowledged post is stored once; returns n. */
  async assertChannelIntact(): Promise<number> {
    const messages = await this.store.collection<{ _id: string; channelId: string; seq: number }>('channel_messages').find({ channelId: this.channelId }, { sort: { seq: 1 } });
    const seqs = messages.map((m) => m.seq);
    assert.equal(seqs, Array.from({ length: seqs.length }, (_, i) => i + 1), 'seq 1…n, no gap, no repeat');
    const ids = new Set(messages.map((m) => m._id));
    assert.is(ids.size, messages.length);
    for (const id of this.acknowledged) assert.ok(ids.has(id), `acknowledged message ${id} stored`);
    return messages.length;
  }
}

type LogEvent =
  | { msg: 'shard acquired'; shard: number; epoch: number; from: number }
  | { msg: 'shard lost'; shard: number; epoch: number; until: number }
  | { msg: 'joined the cluster' };

/** A node's ownership events and process starts, in log order (every process of it). */
async function ownershipEvents(node: LocalNode): Promise<LogEvent[]> {
  const text = await readFile(node.logFile, 'utf8').catch(() => '');
  const out: LogEvent[] = [];
  for (const line of text.split('\n')) {
    if (!line.includes('"msg":"shard ') && !line.includes('"msg":"joined the cluster"')) continue;
    try {
      out.push(JSON.parse(line) as LogEvent);
    } catch {
      // a line cut by kill -9
    }
  }
  return out;
}
