/**
 * A TCP proxy to one address that a test can cut and restore: `cut()` drops every connection
 * through it and refuses new ones (closed as soon as they open), as a network partition between
 * one process and a service would; `restore()` lets connections through again.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';

export class TcpProxy {
  private readonly open = new Set<Socket>();
  private isCut = false;

  private constructor(
    private readonly server: Server,
    readonly port: number,
  ) {}

  /** A proxy on an ephemeral loopback port to `host:port`. */
  static async start(target: { host: string; port: number }): Promise<TcpProxy> {
    let self: TcpProxy | undefined;
    const server = createServer((client) => self!.pass(client, target));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    self = new TcpProxy(server, (server.address() as { port: number }).port);
    return self;
  }

  /** The proxy's address in the scheme given (`nats://127.0.0.1:P`). */
  url(scheme: string): string {
    return `${scheme}://127.0.0.1:${this.port}`;
  }

  get cutOff(): boolean {
    return this.isCut;
  }

  /** Drops every connection through the proxy, and every new one until restore(). */
  cut(): void {
    this.isCut = true;
    for (const s of this.open) s.destroy();
    this.open.clear();
  }

  restore(): void {
    this.isCut = false;
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private pass(client: Socket, target: { host: string; port: number }): void {
    if (this.isCut) return void client.destroy();
    const upstream = connect(target);
    this.open.add(client).add(upstream);
    const end = () => {
      client.destroy();
      upstream.destroy();
      this.open.delete(client);
      this.open.delete(upstream);
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
    client.pipe(upstream);
    upstream.pipe(client);
  }
}
