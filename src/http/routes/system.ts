/** Health, readiness, Prometheus metrics and the OpenAPI document. */
import { createHash, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import { rawResponse, route, type RouteDef } from '../router.js';
import { AppError } from '../../domain/errors.js';
import { HttpError } from '../errors.js';
import { buildOpenApi } from '../openapi.js';
import type { Config } from '../../config.js';
import type { Store } from '../../store/types.js';
import type { Metrics } from '../metrics.js';

export interface SystemDeps {
  config: Config;
  version: string;
  store: Store;
  metrics: Metrics;
  /** Every route of the server (for the OpenAPI document). */
  routes(): readonly RouteDef[];
  /** Cluster mode: this node's bus, lease and shards (src/cluster/node.ts status()). */
  cluster?: () => {
    nodeId: string;
    bus: string;
    member: boolean;
    nodes: number;
    ownedShards: number;
    shards: number;
    standby: boolean;
    busLossReleaseMs: number;
    storeClock?: { offsetMs: number; errorMs: number };
  };
}

export function systemRoutes(ctx: SystemDeps): RouteDef[] {
  let openapi: string | undefined;
  const metricsToken = ctx.config.metricsToken ? digest(ctx.config.metricsToken) : null;
  return [
    route({
      method: 'GET',
      path: '/healthz',
      auth: 'public',
      summary: 'Liveness: the process answers',
      tags: ['system'],
      responses: { 200: z.strictObject({ status: z.literal('ok'), version: z.string(), uptimeSeconds: z.number().int().min(0) }) },
      handler: () => ({
        body: { status: 'ok', version: ctx.version, uptimeSeconds: Math.round(process.uptime()) },
      }),
    }),
    route({
      method: 'GET',
      path: '/readyz',
      auth: 'public',
      summary: 'Readiness: the store is reachable, and in a cluster the bus is connected and the node a member (503 otherwise)',
      tags: ['system'],
      responses: {
        200: z.strictObject({
          status: z.literal('ready'),
          store: z.enum(['embedded', 'mongodb']),
          cluster: z
            .strictObject({
              nodeId: z.string(),
              bus: z.string(),
              nodes: z.number(),
              ownedShards: z.number(),
              shards: z.number(),
              storeClock: z.strictObject({ offsetMs: z.number(), errorMs: z.number() }).optional(),
            })
            .optional(),
        }),
      },
      handler: async () => {
        try {
          await withTimeout(ctx.store.ping(), 2000);
        } catch {
          throw new AppError(503, 'not_ready', 'the store is not reachable');
        }
        if (!ctx.cluster) return { body: { status: 'ready', store: ctx.store.kind } };
        // A node cut off from NATS cannot reach the sockets and actors of the others: a load
        // balancer sends new connections elsewhere until it is back.
        const st = ctx.cluster();
        if (st.bus !== 'connected') {
          const handed = st.standby ? `; cut off for more than ${st.busLossReleaseMs} ms, this node has handed its shards over to the connected nodes` : '';
          throw new AppError(503, 'not_ready', `the cluster bus is ${st.bus}${handed}; this node owns ${st.ownedShards} of ${st.shards} shards`);
        }
        if (!st.member) throw new AppError(503, 'not_ready', "this node's cluster lease is not fresh (the store is slow or unreachable)");
        const { nodeId, bus, nodes, ownedShards, shards, storeClock } = st;
        return { body: { status: 'ready', store: ctx.store.kind, cluster: { nodeId, bus, nodes, ownedShards, shards, ...(storeClock ? { storeClock } : {}) } } };
      },
    }),
    route({
      method: 'GET',
      path: '/metrics',
      auth: 'public',
      summary: 'Prometheus metrics (text exposition format); with METRICS_TOKEN set, only for `Authorization: Bearer <METRICS_TOKEN>`',
      tags: ['system'],
      responses: { 200: rawResponse('text/plain; version=0.0.4; charset=utf-8', 'Prometheus text exposition format') },
      handler: async ({ headers }) => {
        if (metricsToken && !presents(headers.authorization, metricsToken)) {
          throw new HttpError(401, 'unauthorized', 'GET /metrics needs the metrics bearer token', { 'www-authenticate': 'Bearer realm="metrics"' });
        }
        return { raw: { contentType: ctx.metrics.registry.contentType, data: await ctx.metrics.registry.metrics() } };
      },
    }),
    route({
      method: 'GET',
      path: '/api/openapi.json',
      auth: 'public',
      summary: 'OpenAPI 3.1 description of every route, generated from the route table',
      tags: ['system'],
      responses: { 200: rawResponse('application/json; charset=utf-8', 'This OpenAPI 3.1 document', { type: 'object' }) },
      handler: () => {
        openapi ??= JSON.stringify(buildOpenApi(ctx.routes(), { version: ctx.version, serverUrl: ctx.config.publicUrl }));
        return { raw: { contentType: 'application/json; charset=utf-8', data: openapi } };
      },
    }),
  ];
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('timeout')), ms);
    p.then(
      (v) => (clearTimeout(t), resolve(v)),
      (e) => (clearTimeout(t), reject(e)),
    );
  });
}

const digest = (text: string) => createHash('sha256').update(text, 'utf8').digest();

/** Whether an Authorization header carries the token; compared in constant time (over digests, so the length tells nothing either). */
function presents(authorization: string | undefined, tokenDigest: Buffer): boolean {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '');
  return m !== null && timingSafeEqual(digest(m[1]!), tokenDigest);
}
