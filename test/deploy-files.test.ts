/**
 * The deployment files users run but this machine cannot (no Docker here): deploy/compose.yaml,
 * deploy/haproxy.cfg, deploy/mongo-init.js and .github/workflows/ci.yml. Parsed with the `yaml`
 * package (merge keys on, as Compose reads them) and checked for the structure that makes them a
 * cluster: one replica set of three members and its initiation, three NATS servers routed to
 * each other, three Steward nodes with distinct ids, one cluster name and URLs that name
 * services of the file, every setting they are given a real one that parses, a load balancer
 * over exactly those nodes health-checked on /readyz with WebSocket tunnels kept open, and CI
 * jobs that run the README's test command with MONGODB_URI set on a replica set.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { loadConfig, VARIABLES } from '../src/config.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const deployDir = join(root, 'deploy');
const read = (path: string) => readFileSync(path, 'utf8');

type Service = {
  image?: string;
  build?: unknown;
  command?: string | string[];
  environment?: Record<string, string | number | boolean | null> | string[];
  depends_on?: string[] | Record<string, { condition?: string }>;
  volumes?: string[];
  ports?: string[];
  networks?: string[] | Record<string, { ipv4_address?: string } | null>;
};
const compose = parse(read(join(deployDir, 'compose.yaml')), { merge: true }) as { services: Record<string, Service> };
const services = compose.services;

/** A service's command as a list of arguments (a string is split on white space, as Compose does without quotes). */
function argv(s: Service): string[] {
  if (s.command === undefined) return [];
  return Array.isArray(s.command) ? s.command.map(String) : s.command.trim().split(/\s+/);
}

/** The value of `--name value` or `--name=value` in an argument list. */
function option(args: string[], name: string): string | undefined {
  for (let i = 0; i < args.length; i++) {
    if (args[i] === name) return args[i + 1];
    if (args[i]!.startsWith(`${name}=`)) return args[i]!.slice(name.length + 1);
  }
  return undefined;
}

function env(s: Service): Record<string, string> {
  const e = s.environment ?? {};
  if (Array.isArray(e)) return Object.fromEntries(e.map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]));
  return Object.fromEntries(Object.entries(e).map(([k, v]) => [k, v === null ? '' : String(v)]));
}

function dependsOn(s: Service): Record<string, string | undefined> {
  const d = s.depends_on ?? [];
  return Array.isArray(d) ? Object.fromEntries(d.map((n) => [n, undefined])) : Object.fromEntries(Object.entries(d).map(([n, v]) => [n, v?.condition]));
}

/**
 * Compose's interpolation of a value: `${NAME}`, `${NAME:-default}`, `${NAME-default}`,
 * `${NAME:?error}`, `${NAME?error}`, `$NAME` and `$$`. A `$` that starts none of these is an
 * error, as it is for Compose.
 */
function interpolate(value: string, vars: Record<string, string>): string {
  return value.replace(/\$(?:(\$)|\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?)([-?])([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*)|())/g, (_m, dollar, braced, colon, op, arg, bare, invalid) => {
    if (dollar) return '$';
    if (invalid !== undefined && !braced && !bare) throw new Error(`invalid interpolation in ${JSON.stringify(value)}`);
    const name = braced ?? bare;
    const v = vars[name];
    const unset = v === undefined || (colon === ':' && v === '');
    if (op === '-') return unset ? interpolate(arg, vars) : v!;
    if (op === '?') {
      if (unset) throw new Error(`${name} is required: ${arg}`);
      return v!;
    }
    return v ?? '';
  });
}

/** host:port pairs of a comma-separated list of URLs (`mongodb://a:1,b:2/db?x`, `nats://a:1,nats://b:2`). */
function hostsOf(urls: string): string[] {
  const m = /^mongodb:\/\/([^/]+)/.exec(urls);
  if (m) return m[1]!.split(',');
  return urls.split(',').map((u) => new URL(u.trim()).host);
}

const byImage = (prefix: string) => Object.keys(services).filter((n) => services[n]!.image?.startsWith(prefix) && argv(services[n]!)[0] !== 'mongosh');
const mongoMembers = () => byImage('mongo:');
const natsServers = () => byImage('nats:');
/** The Steward nodes: the services built from this repository. */
const stewardNodes = () => Object.keys(services).filter((n) => services[n]!.build !== undefined);
/** The one service that runs mongosh: the replica set's initiation. */
function initService(): string {
  const inits = Object.keys(services).filter((n) => argv(services[n]!)[0] === 'mongosh');
  assert.is(inits.length, 1, `one init service: ${inits.join(', ')}`);
  return inits[0]!;
}
/** What a user's shell supplies: the required secret key, nothing else. */
const userVars = { STEWARD_SECRET_KEY: 'ab'.repeat(32) };

const test = suite('deployment files: compose, HAProxy, CI workflow');

test('three MongoDB members in one replica set, and an init service that initiates exactly them and waits for them', () => {
  const members = mongoMembers();
  assert.is(members.length, 3, `mongo members: ${members.join(', ')}`);
  const sets = new Set(members.map((n) => option(argv(services[n]!), '--replSet')));
  assert.is(sets.size, 1, 'one replica set name');
  const rs = [...sets][0];
  assert.ok(rs, 'every member runs with --replSet');
  for (const n of members) assert.ok(argv(services[n]!).includes('--bind_ip_all'), `${n} listens beyond localhost`);

  const init = services[initService()]!;
  const e = env(init);
  assert.is(e.RS_NAME, rs, 'the init names the members\' replica set');
  assert.equal(e.RS_MEMBERS!.split(',').sort(), members.map((m) => `${m}:27017`).sort(), 'the init lists every member, and only them');
  assert.equal(Object.keys(dependsOn(init)).sort(), [...members].sort());
  for (const m of members) assert.is(dependsOn(init)[m], 'service_healthy', `the init waits for ${m} to answer`);
  assert.ok(option(argv(init), '--host')?.split(':')[0] && members.includes(option(argv(init), '--host')!.split(':')[0]!), 'the init connects to a member');

  // The script it runs is the one mounted from beside the file, and reads those two variables.
  const file = option(argv(init), '--file')!;
  const mount = (init.volumes ?? []).find((v) => v.split(':')[1] === file);
  assert.ok(mount, `the script ${file} is mounted`);
  const script = resolve(deployDir, mount!.split(':')[0]!);
  assert.ok(existsSync(script), script);
  const text = read(script);
  for (const needle of ['process.env.RS_NAME', 'process.env.RS_MEMBERS', 'rs.initiate(', 'PRIMARY', 'NotYetInitialized']) assert.ok(text.includes(needle), `the init script uses ${needle}`);
});

test('three NATS servers, one cluster, each routed to every other', () => {
  const nats = natsServers();
  assert.is(nats.length, 3, `nats servers: ${nats.join(', ')}`);
  const names = new Set<string>();
  const clusters = new Set<string>();
  for (const n of nats) {
    const args = argv(services[n]!);
    const listen = option(args, '--cluster');
    assert.ok(listen, `${n} listens for routes`);
    const routePort = new URL(listen!).port;
    clusters.add(option(args, '--cluster_name') ?? '');
    names.add(option(args, '--server_name') ?? option(args, '--name') ?? '');
    const routes = (option(args, '--routes') ?? '').split(',').filter(Boolean).map((r) => new URL(r).host);
    for (const other of nats.filter((o) => o !== n)) {
      const otherPort = new URL(option(argv(services[other]!), '--cluster')!).port;
      assert.ok(routes.includes(`${other}:${otherPort}`), `${n} has a route to ${other}:${otherPort} (${routes.join(', ')})`);
    }
    for (const r of routes) assert.ok(nats.includes(r.split(':')[0]!), `${n}'s route ${r} names a NATS service of the file`);
    assert.is(routePort, '6222');
  }
  assert.is(clusters.size, 1, 'one cluster name');
  assert.ok([...clusters][0], 'the cluster is named');
  assert.is(names.size, 3, 'distinct server names');
  assert.not.ok(names.has(''), 'every server is named');
});

test('three Steward nodes: distinct node ids, one cluster name, URLs naming the services of the file, every setting real and valid', () => {
  const nodes = stewardNodes();
  assert.is(nodes.length, 3, `steward nodes: ${nodes.join(', ')}`);
  const members = mongoMembers();
  const nats = natsServers();
  const rs = option(argv(services[members[0]!]!), '--replSet');
  const ids = new Set<string>();
  const clusterNames = new Set<string>();
  const secretKeys = new Set<string>();
  for (const n of nodes) {
    const e = env(services[n]!);
    for (const name of Object.keys(e)) assert.ok(name in VARIABLES, `${n}: ${name} is not a setting of src/config.ts`);
    const resolved = Object.fromEntries(Object.entries(e).map(([k, v]) => [k, interpolate(v, userVars)]));
    // The real configuration parser accepts what the node is given, in cluster mode.
    const config = loadConfig(resolved);
    assert.ok(config.cluster, `${n} runs in cluster mode`);
    ids.add(config.cluster!.nodeId);
    assert.is(config.cluster!.nodeId, e.STEWARD_NODE_ID, `${n} names its node id (the host name would differ per container)`);
    clusterNames.add(config.cluster!.name);
    secretKeys.add(resolved.STEWARD_SECRET_KEY!);
    assert.equal(hostsOf(resolved.MONGODB_URI!).sort(), members.map((m) => `${m}:27017`).sort(), `${n}: MONGODB_URI names every member`);
    assert.is(new URL(resolved.MONGODB_URI!.replace(/^mongodb:\/\/[^/]+/, 'mongodb://h')).searchParams.get('replicaSet'), rs, `${n}: the replica set's name`);
    assert.equal(config.cluster!.natsServers.map((u) => new URL(u).host).sort(), nats.map((s) => `${s}:4222`).sort(), `${n}: NATS_URL names every NATS server`);
    const deps = dependsOn(services[n]!);
    assert.is(deps[initService()], 'service_completed_successfully', `${n} starts once the replica set is initiated`);
    for (const s of nats) assert.ok(s in deps, `${n} starts after ${s}`);
  }
  assert.is(ids.size, 3, `distinct node ids: ${[...ids].join(', ')}`);
  assert.is(clusterNames.size, 1, 'one cluster name');
  assert.is(secretKeys.size, 1, 'one secret key for all nodes');
  // The secret key comes from the user, never from the file.
  assert.throws(() => interpolate(env(services[nodes[0]!]!).STEWARD_SECRET_KEY!, {}), /STEWARD_SECRET_KEY is required/);
});

/** haproxy.cfg as sections (`backend name` → its lines, comments and blank lines dropped). */
function haproxySections(text: string): Map<string, string[]> {
  const sections = new Map<string, string[]>();
  let current: string[] | undefined;
  for (const raw of text.split('\n')) {
    const line = raw.replace(/#.*$/, '').trim();
    if (line === '') continue;
    if (!/^\s/.test(raw)) {
      current = [];
      sections.set(line, current);
    } else current?.push(line.replace(/\s+/g, ' '));
  }
  return sections;
}

test('the load balancer: its backends are the three nodes, health-checked on /readyz, WebSocket tunnels kept open, client addresses trusted', () => {
  const lbs = Object.keys(services).filter((n) => (services[n]!.volumes ?? []).some((v) => v.includes('haproxy.cfg')));
  assert.is(lbs.length, 1);
  const lb = services[lbs[0]!]!;
  const mount = lb.volumes!.find((v) => v.includes('haproxy.cfg'))!;
  assert.is(mount.split(':')[1], '/usr/local/etc/haproxy/haproxy.cfg', 'where the haproxy image reads its configuration');
  const cfg = haproxySections(read(resolve(deployDir, mount.split(':')[0]!)));
  const defaults = cfg.get('defaults') ?? [];
  const frontend = [...cfg].find(([k]) => k.startsWith('frontend '))![1];
  const bind = frontend.find((l) => l.startsWith('bind '))!;
  assert.ok(lb.ports?.some((p) => String(p).endsWith(`:${bind.split(':').pop()}`)), `the bound port ${bind} is published`);
  const backendName = frontend.find((l) => l.startsWith('default_backend '))!.split(' ')[1];
  const backend = cfg.get(`backend ${backendName}`);
  assert.ok(backend, `backend ${backendName}`);
  const all = [...defaults, ...backend!];

  // HTTP mode (WebSocket upgrades pass through as tunnels), with a tunnel timeout beyond the
  // agents' idle timeout, and nothing refusing an Upgrade.
  assert.ok(all.includes('mode http'));
  const tunnel = all.find((l) => l.startsWith('timeout tunnel '));
  assert.ok(tunnel, 'timeout tunnel is set');
  const seconds = (v: string) => Number(/^(\d+)/.exec(v)![1]) * ({ ms: 0.001, s: 1, m: 60, h: 3600, d: 86400 }[/[a-z]+$/.exec(v)?.[0] ?? 'ms'] ?? 0.001);
  assert.ok(seconds(tunnel!.split(' ')[2]!) > Number(VARIABLES.AGENT_IDLE_TIMEOUT_SECONDS.default), tunnel);
  assert.not.ok([...cfg.values()].flat().some((l) => /deny|reject/.test(l) && /upgrade/i.test(l)), 'no rule refuses an Upgrade');
  assert.ok(all.includes('option forwardfor'), 'the client address is forwarded');

  // Health check: GET /readyz, expecting 200, on every server.
  assert.ok(backend!.includes('option httpchk'));
  assert.ok(backend!.some((l) => /^http-check send meth GET uri \/readyz( |$)/.test(l)), 'the check asks GET /readyz');
  assert.ok(backend!.includes('http-check expect status 200'));
  const checkedByDefault = backend!.some((l) => l.startsWith('default-server ') && l.split(' ').includes('check'));
  const servers = backend!.filter((l) => l.startsWith('server '));
  const nodes = stewardNodes();
  assert.equal(servers.map((l) => l.split(' ')[2]).sort(), nodes.map((n) => `${n}:${env(services[n]!).PORT ?? '8080'}`).sort(), 'the backends are the Steward nodes, on their port');
  for (const s of servers) assert.ok(checkedByDefault || s.split(' ').includes('check'), `${s} is health-checked`);

  // The nodes trust the balancer's fixed address for X-Forwarded-For.
  const nets = lb.networks as Record<string, { ipv4_address?: string }>;
  const address = Object.values(nets).find((n) => n?.ipv4_address)?.ipv4_address;
  assert.ok(address, 'the balancer has a fixed address');
  for (const n of nodes) assert.ok(loadConfig({ TRUSTED_PROXIES: env(services[n]!).TRUSTED_PROXIES! }).trustedProxies.includes(address!), `${n} trusts ${address}`);
});

test('CI: every job runs the README\'s test command, one with MONGODB_URI on a replica set it starts, and nats-server at hand', () => {
  const readme = read(join(root, 'README.md'));
  const testsSection = readme.slice(readme.indexOf('\n## Tests'));
  const command = /```sh\n([^\n]+)\n```/.exec(testsSection)![1]!.trim();
  assert.is(command, 'npm test');
  const ciRun = read(join(root, '.ci/run')).trim().split('\n');
  assert.is(ciRun[ciRun.length - 1], command, '.ci/run ends with the README\'s command');

  const wf = parse(read(join(root, '.github/workflows/ci.yml')), { merge: true }) as {
    jobs: Record<string, { env?: Record<string, string>; steps: Array<{ run?: string; uses?: string; env?: Record<string, string> }> }>;
  };
  const jobs = Object.entries(wf.jobs);
  assert.ok(jobs.length >= 2);
  const runsTests = (steps: Array<{ run?: string }>) =>
    steps.some((s) => s.run?.split('\n').some((l) => l.trim() === '.ci/run' || l.trim() === command || l.trim().startsWith(`${command} -- `)));
  for (const [name, job] of jobs) {
    assert.ok(job.steps.some((s) => s.uses?.startsWith('actions/checkout@')), `${name} checks out the code`);
    assert.ok(runsTests(job.steps), `${name} runs ${command}`);
  }
  const withMongo = jobs.filter(([, job]) => job.env?.MONGODB_URI ?? job.steps.some((s) => s.env?.MONGODB_URI));
  assert.ok(withMongo.length >= 1, 'a job sets MONGODB_URI');
  for (const [name, job] of withMongo) {
    const uri = job.env?.MONGODB_URI ?? job.steps.find((s) => s.env?.MONGODB_URI)!.env!.MONGODB_URI!;
    const rs = new URL(uri).searchParams.get('replicaSet');
    assert.ok(rs, `${name}: MONGODB_URI names a replica set`);
    const script = job.steps.map((s) => s.run ?? '').join('\n');
    assert.ok(new RegExp(`--replSet ${rs}\\b`).test(script), `${name} starts mongod with --replSet ${rs}`);
    assert.ok(script.includes(`RS_NAME=${rs}`) && script.includes('mongo-init.js'), `${name} initiates the set with deploy/mongo-init.js`);
    const testLine = script.split('\n').map((l) => l.trim()).find((l) => l.startsWith(`${command} -- `))!;
    assert.ok(testLine, `${name} runs ${command} on chosen suites`);
    const patterns = testLine.slice(`${command} -- `.length).split(/\s+/);
    for (const p of ['store', 'cluster']) assert.ok(patterns.includes(p), `${name} runs the ${p} suites`);
    assert.ok(/nats-server/.test(script), `${name} installs nats-server for the cluster suites`);
  }
});

test('the compose file points at files that exist beside it', () => {
  for (const [name, s] of Object.entries(services)) {
    for (const v of s.volumes ?? []) {
      const source = v.split(':')[0]!;
      if (source.startsWith('.')) assert.ok(existsSync(resolve(deployDir, source)), `${name}: ${source}`);
    }
    if (s.build) assert.ok(existsSync(join(resolve(deployDir, (s.build as { context: string }).context), (s.build as { dockerfile?: string }).dockerfile ?? 'Dockerfile')), `${name}: its Dockerfile`);
  }
  assert.ok(existsSync(join(dirname(deployDir), 'deploy', 'README.md')));
});

test('the Docker image copies no test tools: the MongoDB stand-in stays out of it', () => {
  const copied = read(join(root, 'Dockerfile'))
    .split('\n')
    .filter((l) => /^COPY\s/.test(l))
    .flatMap((l) => l.replace(/^COPY\s+(--\S+\s+)*/, '').split(/\s+/).slice(0, -1));
  assert.ok(copied.includes('src'), 'the image is built from src/');
  for (const source of copied) assert.not.ok(/^(\.\/)?(tools|test)(\/|$)|^\.$/.test(source), `the image copies ${source}`);
});

test.run();
