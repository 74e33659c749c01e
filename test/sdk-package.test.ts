/**
 * The agent SDK as a package (packages/agent/), the way a user gets it: packed with `npm pack`,
 * its files' imports read from the tarball, then installed into a project outside the repository
 * (offline, from npm's cache) whose strict tsconfig compiles the example of docs/sdk.md and a
 * check of the public types, and the compiled example run against a real Steward.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { builtinModules, createRequire } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import ts from 'typescript';
import { tempDir, waitFor, type TestServer } from './helpers.js';
import { startWithOwner } from './people-helpers.js';
import type { TestUser } from './fixtures.js';

const test = suite('sdk package');

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const PACKAGE_DIR = join(ROOT, 'packages', 'agent');
const TSC = createRequire(import.meta.url).resolve('typescript/bin/tsc');
/** Generous: npm, tsc and child processes on a loaded machine; never a measure of the behaviour. */
const LONG = 120_000;

interface Manifest {
  name: string;
  version: string;
  exports: Record<string, { types: string; default: string }>;
  dependencies: Record<string, string>;
  optionalDependencies?: Record<string, string>;
}

const ctx = {} as {
  work: string;
  tarball: string;
  /** The tarball's files, unpacked (`package/` inside it). */
  unpacked: string;
  manifest: Manifest;
  consumer: string;
  s: TestServer;
  owner: TestUser;
  children: ChildProcess[];
};

/** Runs a command to completion; rejects with its output when it fails. */
function run(cmd: string, args: string[], opts: { cwd: string; env?: NodeJS.ProcessEnv }): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(cmd, args, { cwd: opts.cwd, env: opts.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolvePromise(out) : reject(new Error(`${cmd} ${args.join(' ')} exited ${code}:\n${out}`))));
  });
}

/** Every file under `dir`, relative to it. */
function files(dir: string, base = dir): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? files(p, base) : [relative(base, p)];
  });
}

/**
 * The modules a JavaScript or declaration file loads: static imports and re-exports, `import()`,
 * `import('…')` types, `require('…')` and `createRequire(…)('…')`.
 */
export function modulesOf(file: string, text: string): string[] {
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, file.endsWith('.d.ts') ? ts.ScriptKind.TS : ts.ScriptKind.JS);
  const out: string[] = [];
  const visit = (node: ts.Node): void => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      out.push(node.moduleSpecifier.text);
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
      out.push(node.argument.literal.text);
    } else if (ts.isCallExpression(node) && node.arguments.length === 1 && ts.isStringLiteralLike(node.arguments[0]!)) {
      const callee = node.expression;
      const isImport = callee.kind === ts.SyntaxKind.ImportKeyword;
      const isRequire = ts.isIdentifier(callee) && callee.text === 'require';
      const isMadeRequire = ts.isCallExpression(callee) && ts.isIdentifier(callee.expression) && callee.expression.text === 'createRequire';
      if (isImport || isRequire || isMadeRequire) out.push(node.arguments[0].text);
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return out;
}

/** The package a bare specifier names (`@scope/name/sub` → `@scope/name`), or null for a built-in module. */
function packageOf(spec: string): string | null {
  if (spec.startsWith('node:') || builtinModules.includes(spec)) return null;
  const parts = spec.split('/');
  return spec.startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0]!;
}

/**
 * A lock for a project that depends on the tarball: the entries of `manifest`'s dependencies,
 * taken from the repository's lock, whose packages npm ci put in npm's cache. (`npm install
 * --offline` of the tarball alone would ask the cache for the registry's full documents of each
 * package, which npm ci never fetched.)
 */
function consumerLock(manifest: Manifest, tarballSpec: string, integrity: string): object {
  const rootLock = (JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, Record<string, unknown>> }).packages;
  const packages: Record<string, Record<string, unknown>> = {
    '': { name: 'sdk-consumer', dependencies: { [manifest.name]: tarballSpec } },
    [`node_modules/${manifest.name}`]: {
      version: manifest.version,
      resolved: tarballSpec,
      integrity,
      dependencies: manifest.dependencies,
      optionalDependencies: manifest.optionalDependencies ?? {},
    },
  };
  /** Where Node finds `name` from a package at lock path `from`, in the repository's layout (null: not installed). */
  const locate = (from: string, name: string): string | null => {
    for (let dir = from; ; dir = dir.includes('/node_modules/') ? dir.slice(0, dir.lastIndexOf('/node_modules/')) : '') {
      const candidate = dir ? `${dir}/node_modules/${name}` : `node_modules/${name}`;
      if (rootLock[candidate]) return candidate;
      if (!dir) return null;
    }
  };
  const required = new Set<string>();
  const seen = new Set<string>();
  const visit = (from: string, deps: Record<string, string>, optional: boolean): void => {
    for (const name of Object.keys(deps)) {
      const at = locate(from, name);
      if (at === null) {
        // An optional package the repository's platform did not install is left out here too.
        if (optional) continue;
        throw new Error(`package-lock.json has no ${name} for ${from}`);
      }
      if (!optional) required.add(at);
      if (seen.has(`${at}:${optional}`)) continue;
      seen.add(`${at}:${optional}`);
      const { dev: _dev, devOptional: _devOptional, optional: _optional, peer: _peer, ...entry } = rootLock[at]!;
      packages[at] = entry;
      visit(at, (entry.dependencies ?? {}) as Record<string, string>, optional);
      visit(at, (entry.optionalDependencies ?? {}) as Record<string, string>, true);
    }
  };
  visit(`node_modules/${manifest.name}`, manifest.dependencies, false);
  visit(`node_modules/${manifest.name}`, manifest.optionalDependencies ?? {}, true);
  for (const at of Object.keys(packages)) if (at.startsWith('node_modules/') && !required.has(at) && at !== `node_modules/${manifest.name}`) packages[at]!.optional = true;
  return { name: 'sdk-consumer', lockfileVersion: 3, requires: true, packages };
}

/** The first ts block of a Markdown text after `marker` (a whole program). */
function tsBlock(text: string, marker: string, where: string): string {
  const at = text.indexOf(marker);
  assert.ok(at >= 0, `${where} has '${marker}'`);
  const m = /```ts\n([\s\S]*?)```/.exec(text.slice(at));
  assert.ok(m, `a ts block follows '${marker}' in ${where}`);
  return m[1]!;
}

/** Uses of the public types that a strict project must accept, and misuses it must refuse (each @ts-expect-error fails the build when its line compiles). */
const TYPES_CHECK = `
import {
  AGENT_PROTOCOL_VERSION, CAPABILITIES, CLOSE, FATAL_CLOSE_CODES, Gates, StewardAgent, closeMeaning, gateMessages, generateKeyPair,
  type AgentStatus, type CertificateTerms, type Disconnection, type GateResult, type StewardAgentEvents, type StewardAgentOptions,
} from '@steward/agent';

const options: StewardAgentOptions = {
  url: 'http://127.0.0.1:9', keys: generateKeyPair(), name: 'types', version: '1', capabilities: [CAPABILITIES[0]!, 'api_call'], reconnect: false,
};
const agent = new StewardAgent(options);
const status: AgentStatus = agent.status;
agent.on('status', (s) => { const next: AgentStatus = s; return next; });
agent.on('disconnected', (d: Disconnection) => (d.willRetry ? d.retryInMs : d.code));
agent.on('close', (code, reason) => \`\${code.toFixed(0)} \${reason.trim()}\`);
agent.on('certificate', ({ certificate }) => certificate.capabilities.includes('api_call'));
agent.on('intentRefused', (intent) => intent.error.length + intent.action.length);
const statusArgs: StewardAgentEvents['status'] = ['ready'];
// Never called: each line must fail to compile.
export function misuses(): void {
  // @ts-expect-error: the status event passes an AgentStatus, not a number
  agent.on('status', (s: number) => s);
  // @ts-expect-error: no event of that name
  agent.on('statuss', () => undefined);
  // @ts-expect-error: not a capability
  new StewardAgent({ ...options, capabilities: ['teleport'] });
  // @ts-expect-error: with exactOptionalPropertyTypes an absent workspace is left out, not undefined
  new StewardAgent({ ...options, workspace: undefined });
  // @ts-expect-error: token counts are numbers
  agent.recordUsage('12', 3);
}

let now = Date.parse('2026-01-01T10:00:00Z');
const gates = new Gates(() => now);
const terms: CertificateTerms = { capabilities: ['api_call'], resourceLimits: { maxRequestsPerHour: 1 }, policyId: 'p1', policyExpiresAt: null };
const results: GateResult[] = [gates.admit('api_call', terms), gates.admit('api_call', terms), gates.admit('file_access', terms)];
now += 3_600_001;
results.push(gates.admit('api_call', terms));
console.log(JSON.stringify({
  protocol: AGENT_PROTOCOL_VERSION,
  status, statusArgs, results,
  rate: gateMessages.rate,
  rejectedIsFatal: FATAL_CLOSE_CODES.has(CLOSE.rejected),
  goingAway: closeMeaning(CLOSE.goingAway),
}));
`;

test.before(async () => {
  ctx.children = [];
  ctx.work = await tempDir('steward-sdk-');
  try {
    await pack();
  } catch (err) {
    // uvu swallows an error thrown by a hook (its tests then count as not passed, without a word): say it.
    console.error(`sdk package: packing failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    throw err;
  }
});

async function pack(): Promise<void> {
  // npm pack runs the package's prepack (npm run build:sdk), as it would for anyone packing it.
  await run('npm', ['pack', '--pack-destination', ctx.work], { cwd: PACKAGE_DIR });
  const name = readdirSync(ctx.work).find((n) => n.endsWith('.tgz'));
  assert.ok(name, `npm pack wrote a tarball into ${ctx.work}`);
  ctx.tarball = join(ctx.work, name);
  ctx.unpacked = join(ctx.work, 'unpacked');
  mkdirSync(ctx.unpacked);
  await run('tar', ['-xzf', ctx.tarball, '-C', ctx.unpacked], { cwd: ctx.work });
  ctx.manifest = JSON.parse(readFileSync(join(ctx.unpacked, 'package', 'package.json'), 'utf8')) as Manifest;
}

test.after(async () => {
  for (const c of ctx.children ?? []) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await ctx.s?.stop(true);
  if (ctx.work) rmSync(ctx.work, { recursive: true, force: true });
});

test('the packed SDK holds its build, declarations and schemas, and nothing of the server', () => {
  const packed = files(join(ctx.unpacked, 'package'));
  const entry = ctx.manifest.exports['.']!;
  for (const f of [entry.types, entry.default]) assert.ok(packed.includes(f.replace(/^\.\//, '')), `${f} (exports) is in the tarball`);
  assert.ok(packed.includes('schemas/certificate.schema.json') && packed.includes('schemas/agent/defs.schema.json'), 'the schemas the certificate check reads are in the tarball');
  // Compiled from src/agent/ and the part of src/domain/ it imports: no other folder of src/.
  const folders = [...new Set(packed.filter((f) => f.startsWith('dist/')).map((f) => f.split('/')[1]))].sort();
  assert.equal(folders, ['agent', 'domain'], `folders of dist/: ${folders.join(', ')}`);
  assert.not.ok(packed.some((f) => f.endsWith('.ts') && !f.endsWith('.d.ts')), 'no TypeScript sources');
});

test("the packed SDK's files load only each other, Node's built-in modules and its declared dependencies, and it uses every one it declares, at the repository's versions", () => {
  const dir = join(ctx.unpacked, 'package');
  const packed = new Set(files(dir));
  const declared = { ...ctx.manifest.dependencies, ...ctx.manifest.optionalDependencies };
  const wrong: string[] = [];
  const usedByCode = new Set<string>();
  const usedByTypes = new Set<string>();
  for (const file of packed) {
    if (!file.endsWith('.js') && !file.endsWith('.d.ts')) continue;
    for (const spec of modulesOf(file, readFileSync(join(dir, file), 'utf8'))) {
      if (spec.startsWith('.')) {
        const target = relative(dir, resolve(dir, dirname(file), spec));
        const found = file.endsWith('.d.ts') ? packed.has(target.replace(/\.js$/, '.d.ts')) : packed.has(target);
        if (!found) wrong.push(`${file}: '${spec}' is not in the package`);
        continue;
      }
      const pkg = packageOf(spec);
      if (pkg === null) continue;
      if (!(pkg in declared)) wrong.push(`${file}: '${spec}' is not a declared dependency`);
      (file.endsWith('.d.ts') ? usedByTypes : usedByCode).add(pkg);
    }
  }
  assert.equal(wrong, [], `imports outside the package's dependencies:\n  ${wrong.join('\n  ')}`);
  // A types package is used when the declarations load the package it types.
  const unused = Object.keys(declared).filter((d) => (d.startsWith('@types/') ? !usedByTypes.has(d.slice('@types/'.length)) : !usedByCode.has(d)));
  assert.equal(unused, [], `declared and never loaded: ${unused.join(', ')}`);
  assert.ok(usedByCode.has('sodium-native') && ctx.manifest.optionalDependencies?.['sodium-native'], 'sodium-native is loaded (when present) and optional');
  const root = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string>; devDependencies: Record<string, string> };
  for (const [name, version] of Object.entries(declared)) {
    assert.is(version, root.dependencies[name] ?? root.devDependencies[name], `${name}: the SDK's version is the repository's (one version of each, tested here)`);
  }
});

test("a strict TypeScript project installs the tarball offline and compiles the docs' example, the README's and a check of the public types against its declarations", async () => {
  ctx.consumer = join(ctx.work, 'consumer');
  mkdirSync(join(ctx.consumer, 'src'), { recursive: true });
  const spec = `file:${ctx.tarball}`;
  const integrity = `sha512-${createHash('sha512').update(readFileSync(ctx.tarball)).digest('base64')}`;
  writeFileSync(join(ctx.consumer, 'package.json'), JSON.stringify({ name: 'sdk-consumer', private: true, type: 'module', dependencies: { [ctx.manifest.name]: spec } }, null, 2));
  writeFileSync(join(ctx.consumer, 'package-lock.json'), JSON.stringify(consumerLock(ctx.manifest, spec, integrity), null, 2));
  // npm ci from the lock: tarballs by their integrity, from the cache only (npm never asks the registry).
  await run('npm', ['ci', '--offline', '--ignore-scripts', '--no-audit', '--no-fund'], { cwd: ctx.consumer });
  assert.ok(existsSync(join(ctx.consumer, 'node_modules', '@steward', 'agent', 'dist', 'agent', 'index.d.ts')));

  writeFileSync(
    join(ctx.consumer, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        target: 'ES2022',
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        lib: ['ES2023'],
        types: ['node'],
        strict: true,
        noImplicitAny: true,
        exactOptionalPropertyTypes: true,
        noUncheckedIndexedAccess: true,
        skipLibCheck: false,
        rootDir: 'src',
        outDir: 'build',
      },
      include: ['src'],
    }),
  );
  // The example of docs/sdk.md (below the comment naming this test), and the one of the packed README.
  writeFileSync(join(ctx.consumer, 'src', 'echo-agent.ts'), tsBlock(readFileSync(join(ROOT, 'docs', 'sdk.md'), 'utf8'), 'test/sdk-package.test.ts', 'docs/sdk.md'));
  writeFileSync(join(ctx.consumer, 'src', 'readme.ts'), tsBlock(readFileSync(join(ctx.unpacked, 'package', 'README.md'), 'utf8'), '# @steward/agent', "the package's README.md"));
  writeFileSync(join(ctx.consumer, 'src', 'types-check.ts'), TYPES_CHECK);
  try {
    await run(process.execPath, [TSC, '-p', 'tsconfig.json'], { cwd: ctx.consumer });
  } catch (err) {
    assert.unreachable(`tsc refused the consumer project: ${(err as Error).message}`);
  }

  const out = JSON.parse(await run(process.execPath, ['build/types-check.js'], { cwd: ctx.consumer }));
  assert.equal(out.protocol, 1);
  assert.equal(out.results, [
    { ok: true },
    { ok: false, gate: 4, error: 'Hourly request limit reached' },
    { ok: false, gate: 1, error: "Capability 'file_access' is not granted" },
    { ok: true },
  ]);
  assert.is(out.rejectedIsFatal, true);
  assert.equal(out.goingAway, { code: 1001, reconnect: true, meaning: 'Steward is shutting down' });
});

/** The compiled example, running with its output collected. */
function startExample(env: Record<string, string>): { out: () => string; exited: Promise<number | null>; child: ChildProcess } {
  const child = spawn(process.execPath, ['build/echo-agent.js'], { cwd: ctx.consumer, env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  ctx.children.push(child);
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((r) => child.on('close', (code) => r(code)));
  return { out: () => out, exited, child };
}

async function seen(p: ReturnType<typeof startExample>, re: RegExp): Promise<RegExpMatchArray> {
  return waitFor(() => {
    if (p.child.exitCode !== null) throw new Error(`the example exited (${p.child.exitCode}) before ${re}:\n${p.out()}`);
    return p.out().match(re);
  }, LONG);
}

test('the compiled example registers, is approved, answers an intent, reports its tokens in heartbeats, obeys a policy, and stops on SIGTERM; run again, without sodium-native, it loads its key and its gates', async () => {
  assert.ok(ctx.consumer && existsSync(join(ctx.consumer, 'build', 'echo-agent.js')), 'the example was compiled');
  Object.assign(ctx, await startWithOwner({ AGENT_HEARTBEAT_INTERVAL_SECONDS: '1' }));
  const api = ctx.owner.api;
  const keyFile = join(ctx.consumer, 'keys', 'echo.json');
  const env = { STEWARD_URL: ctx.s.url, AGENT_KEY_FILE: keyFile };

  const first = startExample(env);
  const created = await seen(first, /created \S+: (did:key:\S+) \(agent protocol 1\)/);
  const did = created[1]!;
  assert.is(statSync(keyFile).mode & 0o777, 0o600);
  await seen(first, /status pending/);
  const registration = (await api.get('/api/registrations')).body.registrations.find((r: { agentDid: string }) => r.agentDid === did);
  assert.ok(registration, 'Steward lists its registration');
  assert.match(first.out(), `registration ${registration.id} awaits`);
  assert.is((await api.post(`/api/registrations/${registration.id}/approve`, { capabilities: ['api_call'] })).status, 200);
  await seen(first, /status ready\ncertificate [0-9a-f]{32}: api_call; policy none/);

  const intents = `/api/agents/${encodeURIComponent(did)}/intents`;
  const answered = await api.post(intents, { action: 'api_call', params: { q: 1 } });
  assert.is(answered.status, 200, answered.text);
  assert.equal(answered.body.output, { echo: { q: 1 }, requestedBy: ctx.owner.user.did });
  // recordUsage(120, 30) in the handler travels in a heartbeat and is stored once.
  await waitFor(async () => {
    const usage = (await api.get(`/api/agents/${encodeURIComponent(did)}`)).body.agent.tokenUsage?.allTime;
    return usage?.promptTokens === 120 && usage?.completionTokens === 30;
  }, LONG);
  await seen(first, /heartbeat \d+ stored/);

  // A policy of one intent an hour: re-certified, and the next intent refused by the agent's gate 4.
  const policy = await api.post('/api/policies', { agentDid: did, capabilities: ['api_call'], resourceLimits: { maxRequestsPerHour: 1 } });
  assert.is(policy.status, 201, policy.text);
  await seen(first, new RegExp(`certificate [0-9a-f]{32}: api_call; policy ${policy.body.policy.id}`));
  const refused = await api.post(intents, { action: 'api_call', params: {} });
  assert.equal({ ok: refused.body.ok, error: refused.body.error }, { ok: false, error: 'Hourly request limit reached' });
  await seen(first, /intent api_call refused: Hourly request limit reached/);

  first.child.kill('SIGTERM');
  assert.is(await first.exited, 0, first.out());
  assert.match(first.out(), /status stopped\n?$/);
  await waitFor(async () => (await api.get(`/api/agents/${encodeURIComponent(did)}`)).body.agent.isOnline === false, LONG);

  // Run again: the same key (no new registration), and the gates' counters from their file; and
  // without sodium-native (a platform its binary does not install on), signing with OpenSSL.
  rmSync(join(ctx.consumer, 'node_modules', 'sodium-native'), { recursive: true });
  const second = startExample(env);
  await seen(second, new RegExp(`loaded \\S+: ${did} `));
  await seen(second, /status ready/);
  const again = await api.post(intents, { action: 'api_call', params: {} });
  assert.equal({ ok: again.body.ok, error: again.body.error }, { ok: false, error: 'Hourly request limit reached' });
  second.child.kill('SIGINT');
  assert.is(await second.exited, 0, second.out());
});

test.run();
