/**
 * A tiny TCP load balancer for the cluster tests: each connection goes to the next backend that
 * is up (round robin), byte for byte, so WebSocket upgrades pass through. `down(port)` takes a
 * backend out and cuts its connections at once, as a node's machine failing would; the agents
 * behind it reconnect through the balancer to the others.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';

export class TcpBalancer {
  private readonly up = new Set<number>();
  private readonly conns = new Map<number, Set<Socket>>();
  private next = 0;

  private constructor(
    private readonly server: Server,
    readonly port: number,
    readonly backends: number[],
  ) {
    for (const b of backends) this.up.add(b);
  }

  static async start(backends: number[]): Promise<TcpBalancer> {
    let self: TcpBalancer | undefined;
    const server = createServer((client) => self!.route(client));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    self = new TcpBalancer(server, (server.address() as { port: number }).port, backends);
    return self;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Takes a backend out: its open connections are destroyed, new ones go elsewhere. */
  down(port: number): void {
    this.up.delete(port);
    for (const s of this.conns.get(port) ?? []) s.destroy();
    this.conns.delete(port);
  }

  async close(): Promise<void> {
    for (const set of this.conns.values()) for (const s of set) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private route(client: Socket): void {
    const live = this.backends.filter((b) => this.up.has(b));
    if (live.length === 0) {
      client.destroy();
      return;
    }
    const port = live[this.next++ % live.length]!;
    const upstream = connect({ host: '127.0.0.1', port });
    let set = this.conns.get(port);
    if (!set) this.conns.set(port, (set = new Set()));
    set.add(client);
    set.add(upstream);
    const end = () => {
      client.destroy();
      upstream.destroy();
      set!.delete(client);
      set!.delete(upstream);
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
    client.pipe(upstream);
    upstream.pipe(client);
  }
}
