/**
 * An HTTP load like autocannon's: C keep-alive connections, each sending its next request as soon
 * as the last is answered, for D seconds. Run in the driver process against Steward and against
 * the floor alike, so both answer the same client.
 */
import { Agent, request } from 'node:http';
import { percentile } from './report.js';

export interface HttpLoad {
  requests: number;
  perSecond: number;
  /** Answers that were not 200. */
  errors: number;
  p50: number;
  p99: number;
}

export async function httpLoad(url: string, path: string, headers: Record<string, string>, seconds: number, connections: number): Promise<HttpLoad> {
  const { hostname, port } = new URL(url);
  const agent = new Agent({ keepAlive: true, maxSockets: connections });
  const ms: number[] = [];
  let errors = 0;
  const t0 = performance.now();
  const end = t0 + seconds * 1000;
  const one = () =>
    new Promise<void>((resolve) => {
      const t = performance.now();
      const req = request({ agent, hostname, port, path, headers }, (res) => {
        res.resume();
        res.on('end', () => {
          if (res.statusCode === 200) ms.push(performance.now() - t);
          else errors++;
          resolve();
        });
      });
      req.on('error', () => {
        errors++;
        resolve();
      });
      req.end();
    });
  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (performance.now() < end) await one();
    }),
  );
  const elapsed = (performance.now() - t0) / 1000;
  agent.destroy();
  ms.sort((a, b) => a - b);
  return { requests: ms.length, perSecond: ms.length / elapsed, errors, p50: percentile(ms, 50), p99: percentile(ms, 99) };
}
