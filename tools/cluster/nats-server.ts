/**
 * A real nats-server for a test file or a local cluster (`npm run cluster`): started as a child
 * process on a free port of 127.0.0.1, ready once it has sent its INFO line to a TCP client,
 * killed at the end (and at process exit).
 * `kill()` stops it abruptly and `restart()` starts it again on the same port, for the paths
 * where the bus loses its server.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { connect, createServer } from 'node:net';
import { delimiter, join } from 'node:path';

export interface NatsServer {
  readonly port: number;
  /** The process id while it runs. */
  readonly pid: number | undefined;
  readonly url: string;
  /** Whether the process runs. */
  readonly running: boolean;
  /** Ends the process abruptly (SIGKILL) and waits for it to be gone. */
  kill(): Promise<void>;
  /** Starts the server again on the same port (after kill). */
  restart(): Promise<void>;
  /** Kills the server for good. */
  stop(): Promise<void>;
}

/** The nats-server binary: on PATH, or where Debian's package puts it. */
export function natsServerBinary(): string {
  const dirs = [...(process.env.PATH ?? '').split(delimiter), '/usr/sbin', '/usr/bin', '/usr/local/bin'];
  for (const dir of dirs) {
    if (!dir) continue;
    const p = join(dir, 'nats-server');
    try {
      accessSync(p, constants.X_OK);
      return p;
    } catch {
      // next
    }
  }
  throw new Error('nats-server is not installed (apt-get install nats-server); cluster mode on one machine and the cluster tests need it');
}

const children = new Set<ChildProcess>();
process.on('exit', () => {
  for (const c of children) c.kill('SIGKILL');
});

/** A port of 127.0.0.1 free now (bench/cluster-server.ts takes its NATS monitor port from it too). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

/** Resolves when a TCP client on `port` receives the server's INFO line. */
function receivesInfo(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    let text = '';
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(2000, () => done(false));
    socket.on('data', (d) => {
      text += d.toString();
      if (text.startsWith('INFO ')) done(true);
    });
    socket.on('error', () => done(false));
    socket.on('close', () => done(false));
  });
}

/** `args` are added to the command line (e.g. `--user u --pass p`). */
export async function startNatsServer(args: string[] = []): Promise<NatsServer> {
  const binary = natsServerBinary();
  const port = await freePort();
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();

  const launch = async () => {
    let output = '';
    const c = spawn(binary, ['-a', '127.0.0.1', '-p', String(port), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    child = c;
    children.add(c);
    let gone = false;
    exited = new Promise<void>((resolve) =>
      c.once('exit', () => {
        gone = true;
        children.delete(c);
        resolve();
      }),
    );
    c.stdout!.on('data', (d) => (output += d));
    c.stderr!.on('data', (d) => (output += d));
    // Ready once it answers; a guard against a server that never comes up (not a timing assertion).
    const deadline = Date.now() + 20_000;
    while (!(await receivesInfo(port))) {
      if (gone) throw new Error(`nats-server exited at start:\n${output}`);
      if (Date.now() > deadline) throw new Error(`nats-server did not accept connections on ${port}:\n${output}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };

  const kill = async () => {
    if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
    child = undefined;
  };

  await launch();
  return {
    port,
    url: `nats://127.0.0.1:${port}`,
    get pid() {
      return child?.pid;
    },
    get running() {
      return child !== undefined && child.exitCode === null && child.signalCode === null;
    },
    kill,
    restart: async () => {
      await kill();
      await launch();
    },
    stop: kill,
  };
}
