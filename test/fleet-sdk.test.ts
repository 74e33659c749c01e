import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { WebSocketServer, type WebSocket as WsSocket } from 'ws';
import { StewardAgent } from '../src/agent/index.js';
import { generateKeyPair, signMessage } from '../src/domain/did.js';
import { certificateBytes, newCertificate, type Certificate } from '../src/domain/certificate.js';
import { waitFor } from './helpers.js';
import { once, readyAgent, startWithOwner, stopAll } from './fleet-helpers.js';
import { StandIn } from './stand-in-server.js';

const test = suite('agent SDK');

test('pushes: llm_config, skills_config (latest set kept), channel_message_send with a reply helper', async () => {
  const { s, owner } = await startWithOwner();
  const llm: unknown[] = [];
  const agent = await readyAgent(s, owner, {
    onLlmConfig: (c) => llm.push(c),
    onChannelMessage: async ({ reply }) => {
      await reply('on it');
    },
  });
  s.ctx.agentPush.push(agent.did, { type: 'llm_config', config: { provider: 'openai-compatible', model: 'm1', baseUrl: 'http://x/v1' } });
  // (The models area may push its own llm_config when the agent becomes ready: wait for ours.)
  await waitFor(() => llm.some((c: any) => c.model === 'm1'));
  assert.equal(agent.llmConfig, { provider: 'openai-compatible', model: 'm1', baseUrl: 'http://x/v1' });

  const skill = (name: string, content: string) => ({ id: name, workspaceId: 'w', name, description: null, version: null, isRequired: false, config: {}, content });
  s.ctx.agentPush.push(agent.did, { type: 'skills_config', skills: [skill('a', '# A')] });
  s.ctx.agentPush.push(agent.did, { type: 'skills_config', skills: [skill('b', '# B'), skill('c', '')] });
  await waitFor(() => agent.skills.length === 2);
  assert.equal(agent.skills.map((x) => x.name), ['b', 'c']);

  // The reply goes to the agent-response endpoint with the agent's session as bearer token.
  const fake = await StandIn.start({ respond: () => ({ status: 201, body: { message: { id: 'm2' } } }) });
  (agent as any).httpBase = fake.url;
  s.ctx.agentPush.push(agent.did, { type: 'channel_message_send', channelId: 'ch/1', message: { id: 'm1', content: '@agent hi', threadId: null } });
  await waitFor(() => fake.received.length === 1);
  const [reply] = fake.received;
  assert.equal({ url: reply!.url, auth: reply!.headers.authorization ?? '', body: reply!.body }, {
    url: '/api/channels/ch%2F1/messages/agent-response',
    auth: `Bearer ${agent.session!.token}`,
    body: { content: 'on it', threadId: 'm1' },
  });
  await fake.close();
  await stopAll(agent);
  await s.stop(true);
});

/** A fake Steward, to make the SDK face what a real one never sends. */
async function fakeServer(onConnection: (ws: WsSocket) => void) {
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' });
  await new Promise<void>((r) => wss.once('listening', () => r()));
  wss.on('connection', onConnection);
  return { url: `http://127.0.0.1:${(wss.address() as { port: number }).port}`, close: () => new Promise<void>((r) => wss.close(() => r())) };
}

test('the SDK refuses a certificate that is not signed by the server, or not about itself', async () => {
  const server = generateKeyPair();
  const keys = generateKeyPair();
  const accepted: string[] = [];
  let variant = 0;
  const fake = await fakeServer((ws) => {
    ws.on('message', (d) => {
      const f = JSON.parse(d.toString());
      if (f.type === 'hello') ws.send(JSON.stringify({ type: 'challenge', nonce: 'n'.repeat(24), serverDid: server.did }));
      else if (f.type === 'auth') {
        const terms = { capabilities: ['api_call' as const], resourceLimits: null, policyId: null, policyExpiresAt: null };
        const other = generateKeyPair();
        const cert: Certificate = newCertificate({ subject: variant === 1 ? other.did : keys.did, subjectPublicKey: keys.publicKey, issuer: server.did, terms });
        const signer = variant === 0 ? other : server; // 0: wrong signer; 1: someone else's certificate
        ws.send(JSON.stringify({ type: 'certificate_offer', certificate: cert, serverSignature: signMessage(signer, certificateBytes(cert)) }));
      } else if (f.type === 'certificate_accept') accepted.push(f.agentSignature);
    });
  });
  for (variant = 0; variant < 2; variant++) {
    const agent = new StewardAgent({ url: fake.url, keys, name: 'x', version: '1', capabilities: ['api_call'], reconnect: false });
    const errors: Error[] = [];
    agent.on('error', (e: Error) => errors.push(e));
    agent.start();
    await waitFor(() => agent.lastClose);
    assert.is(agent.lastClose!.code, 4000);
    assert.match(errors[0]!.message, variant === 0 ? /server signature does not verify/ : /subject is not this agent/);
  }
  assert.equal(accepted, [], 'nothing was co-signed');
  await fake.close();
});

test('unacknowledged heartbeat deltas are sent again after a reconnect, acknowledged ones never', async () => {
  const server = generateKeyPair();
  const keys = generateKeyPair();
  const beats: Array<{ conn: number; seq: number; p: number; c: number }> = [];
  let conn = 0;
  const fake = await fakeServer((ws) => {
    const n = ++conn;
    ws.on('message', (d) => {
      const f = JSON.parse(d.toString());
      if (f.type === 'hello') ws.send(JSON.stringify({ type: 'challenge', nonce: 'n'.repeat(24), serverDid: server.did }));
      else if (f.type === 'auth') {
        const cert = newCertificate({ subject: keys.did, subjectPublicKey: keys.publicKey, issuer: server.did, terms: { capabilities: ['api_call'], resourceLimits: null, policyId: null, policyExpiresAt: null } });
        ws.send(JSON.stringify({ type: 'certificate_offer', certificate: cert, serverSignature: signMessage(server, certificateBytes(cert)) }));
        (ws as any).cert = cert;
      } else if (f.type === 'certificate_accept') {
        const cert = (ws as any).cert;
        ws.send(JSON.stringify({ type: 'ready', agentId: keys.did, certificate: cert, serverSignature: signMessage(server, certificateBytes(cert)), agentSignature: f.agentSignature, session: { token: 't'.repeat(43), expiresAt: new Date(Date.now() + 1e6).toISOString() }, heartbeatIntervalMs: 3_600_000 }));
      } else if (f.type === 'heartbeat') {
        beats.push({ conn: n, seq: f.seq, p: f.sinceLastSync.promptTokens, c: f.sinceLastSync.completionTokens });
        if (n === 1 && f.seq === 1) ws.send(JSON.stringify({ type: 'heartbeat_ack', seq: 1 })); // only the first is acknowledged
      }
    });
  });
  const agent = new StewardAgent({ url: fake.url, keys, name: 'x', version: '1', capabilities: ['api_call'], reconnect: { initialDelayMs: 20, maxDelayMs: 40 } }).start();
  await agent.waitFor('ready');
  agent.recordUsage(10, 1);
  const acked = once(agent, 'heartbeatAck');
  agent.heartbeat();
  await acked;
  agent.recordUsage(20, 2);
  agent.heartbeat(); // not acknowledged
  agent.recordUsage(30, 3);
  agent.heartbeat(); // not acknowledged
  agent.recordUsage(40, 4); // not sent yet
  await waitFor(() => beats.length === 3);
  assert.equal(agent.unacknowledgedUsage(), { promptTokens: 90, completionTokens: 9 });
  // The connection drops; after the reconnect everything unacknowledged goes out once.
  (agent as any).ws.terminate();
  await waitFor(() => conn === 2 && agent.status === 'ready');
  agent.heartbeat();
  await waitFor(() => beats.length === 4);
  assert.equal(beats[3], { conn: 2, seq: 4, p: 90, c: 9 });
  await agent.stop();
  await fake.close();
});

test.run();
