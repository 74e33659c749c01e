import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { readFileSync } from 'node:fs';
import { ConfigError, configTable, defaultNodeId, loadConfig } from '../src/config.js';
import { tempDir } from './helpers.js';
import { inShell, runCli } from './cli-process.js';

const test = suite('config');

test('defaults', () => {
  const c = loadConfig({});
  assert.is(c.port, 8080);
  assert.is(c.host, '0.0.0.0');
  assert.is(c.dataDir, './data');
  assert.is(c.mongodbUri, undefined);
  assert.is(c.publicUrl, 'http://localhost:8080');
  assert.is(c.bodyLimitBytes, 1024 * 1024);
  assert.is(c.logLevel, 'info');
  assert.is(c.allowUwsFallback, false);
  assert.is(c.ed25519, 'auto');
});

test('values are parsed and trailing slashes trimmed', () => {
  const c = loadConfig({ PORT: '9000', PUBLIC_URL: 'https://steward.example.org/', BODY_LIMIT_BYTES: '4096', STEWARD_ALLOW_UWS_FALLBACK: '1' });
  assert.is(c.port, 9000);
  assert.is(c.publicUrl, 'https://steward.example.org');
  assert.is(c.bodyLimitBytes, 4096);
  assert.is(c.allowUwsFallback, true);
});

test('bad values name the variable and the problem', () => {
  const cases: Array<[Record<string, string>, RegExp]> = [
    [{ PORT: 'eighty' }, /PORT="eighty": expected a whole number/],
    [{ PORT: '70000' }, /PORT="70000": must be at most 65535/],
    [{ LOG_LEVEL: 'loud' }, /LOG_LEVEL="loud": expected fatal/],
    [{ STEWARD_ED25519: 'nacl' }, /STEWARD_ED25519="nacl": expected auto, libsodium or openssl/],
    [{ PUBLIC_URL: 'ftp://x' }, /PUBLIC_URL="ftp:\/\/x": expected an http/],
    [{ MONGODB_URI: 'postgres://x' }, /MONGODB_URI="<redacted>": expected a mongodb:\/\//],
    [{ STEWARD_OWNER_DID: 'did:web:x' }, /STEWARD_OWNER_DID="did:web:x": expected an Ed25519 did:key/],
    [{ SMTP_URL: 'http://x' }, /SMTP_URL="<redacted>": expected smtp/],
    [{ MONGODB_URI: 'mongodb://localhost/steward' }, /STEWARD_SECRET_KEY: required when MONGODB_URI is set/],
    [{ STEWARD_SECRET_KEY: 'short' }, /STEWARD_SECRET_KEY="<redacted>": expected 32 bytes/],
    [{ STEWARD_ALLOW_UWS_FALLBACK: 'maybe' }, /STEWARD_ALLOW_UWS_FALLBACK="maybe"/],
  ];
  for (const [env, re] of cases) {
    try {
      loadConfig(env);
      assert.unreachable(`accepted ${JSON.stringify(env)}`);
    } catch (err) {
      assert.instance(err, ConfigError);
      assert.match((err as Error).message, re);
    }
  }
});

test('a 32-byte key is accepted as hex or base64', () => {
  const hex = 'ab'.repeat(32);
  assert.is(loadConfig({ STEWARD_SECRET_KEY: hex }).secretKey?.length, 32);
  const b64 = Buffer.alloc(32, 7).toString('base64');
  assert.is(loadConfig({ STEWARD_SECRET_KEY: b64 }).secretKey?.length, 32);
});

test('rate limits: COUNT/WINDOW with an optional burst, 0 for off; proxies and the metrics token', () => {
  const c = loadConfig({
    RATE_LIMIT_LOGIN_PER_ADDRESS: '600/1m+10000/10m',
    RATE_LIMIT_LOGIN_PER_DID: '0',
    RATE_LIMIT_CLAIM_PER_TOKEN: ' 5 / 30s ',
    TRUSTED_PROXIES: '10.0.0.0/8, 192.0.2.7,fd00::/8',
    METRICS_TOKEN: 'a-long-enough-metrics-token',
  });
  assert.equal(c.rateLimits.login, { address: { points: 600, seconds: 60, burst: { points: 10_000, seconds: 600 } }, key: null });
  assert.equal(c.rateLimits.claim.key, { points: 5, seconds: 30 });
  assert.equal(c.rateLimits.agent, { address: { points: 1200, seconds: 60, burst: { points: 40_000, seconds: 600 } }, key: null });
  assert.equal(c.trustedProxies, ['10.0.0.0/8', '192.0.2.7', 'fd00::/8']);
  assert.is(c.metricsToken, 'a-long-enough-metrics-token');
  const defaults = loadConfig({});
  assert.equal(defaults.trustedProxies, []);
  assert.is(defaults.metricsToken, undefined);

  const cases: Array<[Record<string, string>, RegExp]> = [
    [{ RATE_LIMIT_LOGIN_PER_ADDRESS: '600' }, /RATE_LIMIT_LOGIN_PER_ADDRESS="600": expected 0 \(off\) or COUNT\/WINDOW/],
    [{ RATE_LIMIT_AGENT_PER_ADDRESS: '10/1d' }, /RATE_LIMIT_AGENT_PER_ADDRESS/],
    [{ RATE_LIMIT_WEBHOOK_PER_BRIDGE: '0/1m' }, /RATE_LIMIT_WEBHOOK_PER_BRIDGE/],
    [{ RATE_LIMIT_CLAIM_PER_ADDRESS: '5/1m+' }, /RATE_LIMIT_CLAIM_PER_ADDRESS/],
    [{ TRUSTED_PROXIES: '10.0.0.0/33' }, /TRUSTED_PROXIES="10.0.0.0\/33": expected IP addresses or CIDR subnets/],
    [{ TRUSTED_PROXIES: 'proxy.internal' }, /TRUSTED_PROXIES/],
    [{ METRICS_TOKEN: 'short' }, /METRICS_TOKEN="<redacted>": expected at least 16 characters/],
  ];
  for (const [env, re] of cases) {
    try {
      loadConfig(env);
      assert.unreachable(`accepted ${JSON.stringify(env)}`);
    } catch (err) {
      assert.instance(err, ConfigError);
      assert.match((err as Error).message, re);
    }
  }
});

test('a bad value stops the start with exit code 1 and names the variable', async () => {
  const r = await runCli(['serve'], { PORT: 'abc', DATA_DIR: await tempDir() }, 30_000);
  assert.is(r.code, 1);
  assert.match(r.stderr, /PORT="abc": expected a whole number/);
});

test('the server refuses to start on the uWS JavaScript fallback unless allowed', async () => {
  const r = await runCli(['serve'], { PORT: '0', HOST: '127.0.0.1', DATA_DIR: await tempDir(), UWS_USE_FALLBACK: '1', LOG_LEVEL: 'info' }, 30_000);
  assert.is(r.code, 1);
  assert.match(r.stderr, /refusing to start on the slow JavaScript fallback/);
  assert.match(r.stderr, /STEWARD_ALLOW_UWS_FALLBACK=1/);
});

const CLUSTER_BASE = { MONGODB_URI: 'mongodb://db.internal/steward', STEWARD_SECRET_KEY: 'ab'.repeat(32) };

test('cluster mode: NATS_URL with MongoDB gives the cluster settings, with their defaults', () => {
  assert.is(loadConfig({}).cluster, undefined, 'no NATS_URL: a single node');
  assert.is(loadConfig(CLUSTER_BASE).cluster, undefined);
  const c = loadConfig({ ...CLUSTER_BASE, NATS_URL: 'nats://n1:4222, nats://user:pw@n2:4222' }).cluster!;
  assert.equal(c, { natsServers: ['nats://n1:4222', 'nats://user:pw@n2:4222'], nodeId: defaultNodeId(), name: 'main', shards: 1024, leaseMs: 15_000, leaseMarginMs: 3000, requestTimeoutMs: 5000, busLossReleaseMs: 10_000, changePollMs: 5000 });
  const d = loadConfig({
    ...CLUSTER_BASE,
    NATS_URL: 'tls://token@nats.internal:4443',
    STEWARD_NODE_ID: 'eu-1_a',
    CLUSTER_NAME: 'prod',
    CLUSTER_SHARDS: '256',
    CLUSTER_LEASE_MS: '30000',
    CLUSTER_LEASE_MARGIN_MS: '5000',
    CLUSTER_REQUEST_TIMEOUT_MS: '2500',
    CLUSTER_BUS_LOSS_RELEASE_MS: '20000',
  }).cluster!;
  assert.equal(d, { natsServers: ['tls://token@nats.internal:4443'], nodeId: 'eu-1_a', name: 'prod', shards: 256, leaseMs: 30_000, leaseMarginMs: 5000, requestTimeoutMs: 2500, busLossReleaseMs: 20_000, changePollMs: 5000 });
  assert.is(defaultNodeId('web-3.eu.example.com'), 'web-3-eu-example-com');
  assert.is(defaultNodeId(''), 'node');
  assert.is(defaultNodeId('x'.repeat(80)).length, 64);
});

test('cluster mode refuses the embedded store, and bad cluster settings, naming what to do', () => {
  const cases: Array<[Record<string, string>, RegExp]> = [
    [{ NATS_URL: 'nats://n1:4222' }, /NATS_URL: cluster mode needs MONGODB_URI as well/],
    [{ ...CLUSTER_BASE, NATS_URL: 'http://user:secret-pw@n1:4222' }, /NATS_URL="<redacted>": expected nats:\/\/ or tls:\/\/ URLs/],
    [{ ...CLUSTER_BASE, NATS_URL: ' , ' }, /NATS_URL="<redacted>"/],
    [{ ...CLUSTER_BASE, NATS_URL: 'nats://n1', STEWARD_NODE_ID: 'node.1' }, /STEWARD_NODE_ID="node.1": expected 1 to 64 letters/],
    [{ ...CLUSTER_BASE, NATS_URL: 'nats://n1', CLUSTER_NAME: 'a b' }, /CLUSTER_NAME="a b"/],
    [{ ...CLUSTER_BASE, NATS_URL: 'nats://n1', CLUSTER_SHARDS: '0' }, /CLUSTER_SHARDS="0": must be at least 1/],
    [{ ...CLUSTER_BASE, NATS_URL: 'nats://n1', CLUSTER_LEASE_MS: '15000', CLUSTER_LEASE_MARGIN_MS: '5000' }, /CLUSTER_LEASE_MARGIN_MS=5000: must be below a third of CLUSTER_LEASE_MS/],
  ];
  for (const [env, re] of cases) {
    try {
      loadConfig(env);
      assert.unreachable(`accepted ${JSON.stringify(env)}`);
    } catch (err) {
      assert.instance(err, ConfigError);
      assert.match((err as Error).message, re);
      assert.not.match((err as Error).message, /secret-pw/);
    }
  }
});

test('a start in cluster mode on the embedded store is refused with exit code 1 and says why', async () => {
  const dataDir = await tempDir();
  const r = await runCli(['serve'], { PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, NATS_URL: 'nats://127.0.0.1:4222', MONGODB_URI: '' }, 30_000);
  assert.is(r.code, 1);
  assert.match(r.stderr, /NATS_URL: cluster mode needs MONGODB_URI as well/);
});

test('docs/configuration.md carries the generated configuration table', () => {
  const doc = readFileSync(new URL('../docs/configuration.md', import.meta.url), 'utf8');
  assert.ok(doc.includes(configTable()), 'docs/configuration.md table matches src/config.ts (run npm run docs:config)');
});

test('PORT=abc npm start, as typed in a checkout, names the bad setting before any build and exits 1', async () => {
  const r = await inShell('PORT=abc npm start', { HOME: await tempDir(), PATH: process.env.PATH! });
  assert.is(r.code, 1, r.stdout + r.stderr);
  assert.ok(r.stderr.includes('steward: invalid configuration:\n  - PORT="abc": expected a whole number'), r.stderr);
  assert.not.ok(r.stdout.includes('> steward@0.1.0 build'), `no build started:\n${r.stdout}`);
});

test.run();
