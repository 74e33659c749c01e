/** Health, readiness, Prometheus metrics and the OpenAPI document. */
import { z } from 'zod';
import { route, type RouteDef } from '../router.js';
import { HttpError } from '../errors.js';
import { buildOpenApi } from '../openapi.js';
import type { AppContext } from '../../server.js';

export function systemRoutes(ctx: AppContext): RouteDef[] {
  let openapi: string | undefined;
  return [
    route({
      method: 'GET',
      path: '/healthz',
      auth: 'public',
      summary: 'Liveness: the process answers',
      tags: ['system'],
      response: z.object({ status: z.literal('ok'), version: z.string(), uptimeSeconds: z.number() }),
      handler: () => ({
        body: { status: 'ok', version: ctx.version, uptimeSeconds: Math.round(process.uptime()) },
      }),
    }),
    route({
      method: 'GET',
      path: '/readyz',
      auth: 'public',
      summary: 'Readiness: the store is reachable (503 otherwise)',
      tags: ['system'],
      response: z.object({ status: z.literal('ready'), store: z.enum(['embedded', 'mongodb']) }),
      handler: async () => {
        try {
          await withTimeout(ctx.store.ping(), 2000);
        } catch {
          throw new HttpError(503, 'not_ready', 'the store is not reachable');
        }
        return { body: { status: 'ready', store: ctx.store.kind } };
      },
    }),
    route({
      method: 'GET',
      path: '/metrics',
      auth: 'public',
      summary: 'Prometheus metrics (text exposition format)',
      tags: ['system'],
      handler: async () => ({
        raw: { contentType: ctx.metrics.registry.contentType, data: await ctx.metrics.registry.metrics() },
      }),
    }),
    route({
      method: 'GET',
      path: '/api/openapi.json',
      auth: 'public',
      summary: 'OpenAPI 3.1 description of every route, generated from the route table',
      tags: ['system'],
      handler: () => {
        openapi ??= JSON.stringify(buildOpenApi(ctx.router.routes(), { version: ctx.version, serverUrl: ctx.config.publicUrl }));
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
