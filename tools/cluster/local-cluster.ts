/**
 * A cluster on one machine, every part its own process: a real nats-server, the MongoDB stand-in
 * (unless a MONGODB_URI is given) and N Steward nodes (`steward serve` from the sources), on ports
 * P, P+1, … with ids n1, n2, …. What `npm run cluster` runs, and what the process-level cluster
 * tests and the cluster bench start. For trying cluster mode and for tests, not for production.
 *
 * Each node's data directory is `<data>/<node id>`, its log (stdout and stderr) `<data>/<node id>.log`;
 * the stand-in keeps its databases under `<data>/store`. The nodes share one STEWARD_SECRET_KEY:
 * the environment's, or one made at the first start and kept in `<data>/secret-key`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';
import { freePort, startNatsServer, type NatsServer } from './nats-server.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CLI = join(ROOT, 'src/cli/index.ts');
const STANDIN = join(ROOT, 'tools/mongo-standin/main.ts');

export interface NodeOverrides {
  /** Environment of this node only (over the cluster's), e.g. a clock offset through faketime. */
  env?: Record<string, string>;
  /** Where this node reaches NATS (e.g. through a proxy a test can cut). */
  natsUrl?: string;
  /** Where this node reaches the store (e.g. through a proxy a test can cut). */
  mongodbUri?: string;
}

export interface LocalClusterOptions {
  nodes: number;
  /** The first node's port (the others follow); 0: a free port each. */
  port?: number;
  /** Where data and logs go; a temporary directory, removed by stop(), when absent. */
  dataDir?: string;
  /** The nodes' environment (default: this process's). MONGODB_URI in it is used instead of the stand-in. */
  env?: NodeJS.ProcessEnv;
  /** Per node (by index from 0), once NATS and the store run: its own environment, NATS or store address. */
  perNode?: (index: number, nodeId: string, parts: { natsUrl: string; mongodbUri: string }) => NodeOverrides | Promise<NodeOverrides>;
  /** What the launcher says about its parts (default: nothing). */
  say?: (line: string) => void;
  /** How long a part may take to become ready before the start is given up (default 120 s). */
  startTimeoutMs?: number;
}

export interface LocalNode {
  readonly nodeId: string;
  readonly port: number;
  readonly url: string;
  readonly dataDir: string;
  readonly logFile: string;
  /** The running process's id (undefined while it is not running). */
  readonly pid: number | undefined;
  readonly running: boolean;
  /** Resolves with how the current process ended. */
  exited(): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Sends a signal (SIGKILL, SIGSTOP, SIGCONT, SIGTERM…) to the process. */
  signal(sig: NodeJS.Signals): void;
  /** Stops the process gracefully (SIGTERM, SIGKILL after 30 s) and waits for it. */
  stop(): Promise<void>;
  /** Starts the node again on its port and data directory (after it stopped or was killed), until /readyz answers 200. */
  start(): Promise<void>;
}

export interface LocalCluster {
  nats: NatsServer;
  /** The store's URI as the nodes are given it (the stand-in's, or the environment's MONGODB_URI). */
  mongodbUri: string;
  /** The stand-in's process id (undefined when MONGODB_URI was given). */
  standinPid: number | undefined;
  nodes: LocalNode[];
  dataDir: string;
  /** Called when a node's process ends while the cluster runs (a kill from outside, a crash). */
  onNodeExit(listener: (node: LocalNode, how: { code: number | null; signal: NodeJS.Signals | null }) => void): void;
  /** Stops the nodes, then the stand-in and NATS; removes a temporary data directory. */
  stop(): Promise<void>;
}

/** Every child of every local cluster of this process, killed if the process exits without stopping them. */
const children = new Set<ChildProcess>();
process.on('exit', () => {
  for (const c of children) c.kill('SIGKILL');
});

export async function startLocalCluster(o: LocalClusterOptions): Promise<LocalCluster> {
  if (!Number.isInteger(o.nodes) || o.nodes < 1) throw new Error('--nodes must be a whole number of at least 1');
  const say = o.say ?? (() => undefined);
  const env = o.env ?? process.env;
  const temporary = o.dataDir === undefined;
  const dataDir = o.dataDir ?? (await mkdtemp(join(tmpdir(), 'steward-cluster-')));
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  const startTimeoutMs = o.startTimeoutMs ?? 120_000;
  let nats: NatsServer | undefined;
  let standin: ChildProcess | undefined;
  const nodes: LocalNode[] = [];
  const exitListeners = new Set<(node: LocalNode, how: { code: number | null; signal: NodeJS.Signals | null }) => void>();
  let stopping = false;
  let mongodbUri = env.MONGODB_URI ?? '';

  const stopAll = async () => {
    stopping = true;
    await Promise.all(nodes.map((n) => n.stop()));
    if (standin) await stopChild(standin);
    await nats?.stop();
    if (temporary) await rm(dataDir, { recursive: true, force: true });
  };

  try {
    nats = await startNatsServer();
    say(`nats-server on ${nats.url} (pid ${nats.pid})`);
    if (!mongodbUri) {
      ({ child: standin, uri: mongodbUri } = await startStandin(join(dataDir, 'store'), startTimeoutMs));
      say(`MongoDB stand-in on ${mongodbUri} (pid ${standin.pid})`);
    }
    const secretKey = env.STEWARD_SECRET_KEY || (await sharedSecretKey(dataDir));
    const first = o.port ?? 8080;
    for (let i = 0; i < o.nodes; i++) {
      const nodeId = `n${i + 1}`;
      const port = first === 0 ? await freePort() : first + i;
      const own = (await o.perNode?.(i, nodeId, { natsUrl: nats.url, mongodbUri })) ?? {};
      const nodeEnv: NodeJS.ProcessEnv = {
        ...env,
        MONGODB_URI: own.mongodbUri ?? mongodbUri,
        NATS_URL: own.natsUrl ?? nats.url,
        STEWARD_NODE_ID: nodeId,
        STEWARD_SECRET_KEY: secretKey,
        HOST: '127.0.0.1',
        PORT: String(port),
        DATA_DIR: join(dataDir, nodeId),
        ...own.env,
      };
      nodes.push(
        localNode(nodeId, port, nodeEnv, join(dataDir, `${nodeId}.log`), startTimeoutMs, (node, how) => {
          if (stopping) return;
          for (const l of exitListeners) l(node, how);
        }),
      );
    }
    // Started together: each waits out nothing of the others, and NATS and the store are up.
    await Promise.all(nodes.map((n) => n.start()));
  } catch (err) {
    await stopAll().catch(() => undefined);
    throw err;
  }
  return {
    nats,
    mongodbUri,
    standinPid: standin?.pid,
    nodes,
    dataDir,
    onNodeExit: (l) => void exitListeners.add(l),
    stop: stopAll,
  };
}

function localNode(
  nodeId: string,
  port: number,
  env: NodeJS.ProcessEnv,
  logFile: string,
  startTimeoutMs: number,
  onExit: (node: LocalNode, how: { code: number | null; signal: NodeJS.Signals | null }) => void,
): LocalNode {
  let child: ChildProcess | undefined;
  let ended: Promise<{ code: number | null; signal: NodeJS.Signals | null }> = Promise.resolve({ code: 0, signal: null });
  const url = `http://127.0.0.1:${port}`;
  const node: LocalNode = {
    nodeId,
    port,
    url,
    dataDir: env.DATA_DIR!,
    logFile,
    get pid() {
      return child?.pid;
    },
    get running() {
      return child !== undefined && child.exitCode === null && child.signalCode === null;
    },
    exited: () => ended,
    signal(sig) {
      if (node.running) child!.kill(sig);
    },
    async stop() {
      if (!child) return;
      const c = child;
      if (node.running) {
        c.kill('SIGCONT'); // a paused process cannot stop
        c.kill('SIGTERM');
        const timer = setTimeout(() => c.kill('SIGKILL'), 30_000);
        await ended;
        clearTimeout(timer);
      }
    },
    async start() {
      if (node.running) throw new Error(`${nodeId} runs already`);
      const log = createWriteStream(logFile, { flags: 'a', mode: 0o600 });
      const c = spawn(process.execPath, ['--import', 'tsx', CLI, 'serve'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
      child = c;
      children.add(c);
      c.stdout!.pipe(log, { end: false });
      c.stderr!.pipe(log, { end: false });
      ended = new Promise((resolve) =>
        c.once('exit', (code, signal) => {
          children.delete(c);
          // The pipes may still hold the last lines; the log closes once they are read.
          let open = 2;
          const closeLog = () => --open === 0 && log.end();
          c.stdout!.once('close', closeLog);
          c.stderr!.once('close', closeLog);
          resolve({ code, signal });
          onExit(node, { code, signal });
        }),
      );
      await waitReady(node, startTimeoutMs);
    },
  };
  return node;
}

/** Until GET /readyz answers 200; throws if the process ends first or the time runs out. */
async function waitReady(node: LocalNode, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (!node.running) {
      const how = await node.exited();
      throw new Error(`${node.nodeId} exited at start (code ${how.code}, signal ${how.signal}); see ${node.logFile}:\n${await tail(node.logFile)}`);
    }
    try {
      const res = await fetch(`${node.url}/readyz`, { signal: AbortSignal.timeout(2000) });
      if (res.status === 200) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`${node.nodeId} was not ready within ${timeoutMs} ms; see ${node.logFile}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The stand-in in its own process; resolves with the URI it prints once it accepts connections. */
async function startStandin(dir: string, timeoutMs: number): Promise<{ child: ChildProcess; uri: string }> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const child = spawn(process.execPath, ['--import', 'tsx', STANDIN, '--port', '0', '--data', dir], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  child.once('exit', () => children.delete(child));
  let errors = '';
  child.stderr!.on('data', (d) => (errors = (errors + String(d)).slice(-4000)));
  const lines = createInterface({ input: child.stdout! });
  const uri = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the MongoDB stand-in did not start within ${timeoutMs} ms:\n${errors}`)), timeoutMs);
    lines.on('line', (line) => {
      const m = /^MONGODB_URI=(\S+)/.exec(line);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the MongoDB stand-in exited at start (code ${code}):\n${errors}`));
    });
  }).catch(async (err: unknown) => {
    await stopChild(child);
    throw err;
  });
  return { child, uri };
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const gone = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await gone;
  clearTimeout(timer);
}

/** The nodes' shared secret key: kept in `<data>/secret-key` so a second start finds its data readable. */
async function sharedSecretKey(dataDir: string): Promise<string> {
  const file = join(dataDir, 'secret-key');
  try {
    return (await readFile(file, 'utf8')).trim();
  } catch {
    const key = randomBytes(32).toString('base64');
    await writeFile(file, `${key}\n`, { mode: 0o600 });
    await chmod(file, 0o600);
    return key;
  }
}

async function tail(file: string): Promise<string> {
  try {
    return (await readFile(file, 'utf8')).split('\n').slice(-15).join('\n');
  } catch {
    return '';
  }
}
