/**
 * Prometheus metrics (prom-client), one registry per server so several servers can live in one
 * process (tests). Served at GET /metrics.
 */
import client from 'prom-client';

export interface Metrics {
  registry: client.Registry;
  httpRequests: client.Counter<'method' | 'route' | 'status'>;
  httpDuration: client.Histogram<'method' | 'route' | 'status'>;
  storeDuration: client.Histogram<'collection' | 'op' | 'outcome'>;
  /** Sources read at scrape time. */
  setSocketSource(fn: () => Record<string, number>): void;
  setActorSource(fn: () => Record<string, number>): void;
}

export function createMetrics(): Metrics {
  const registry = new client.Registry();
  client.collectDefaultMetrics({ register: registry, prefix: 'steward_process_' });
  let sockets: () => Record<string, number> = () => ({});
  let actors: () => Record<string, number> = () => ({});

  const httpRequests = new client.Counter({
    name: 'steward_http_requests_total',
    help: 'HTTP requests by method, route pattern and status',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [registry],
  });
  const httpDuration = new client.Histogram({
    name: 'steward_http_request_duration_seconds',
    help: 'HTTP request latency by method, route pattern and status',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [registry],
  });
  const storeDuration = new client.Histogram({
    name: 'steward_store_operation_duration_seconds',
    help: 'Store operation latency by collection, operation and outcome',
    labelNames: ['collection', 'op', 'outcome'] as const,
    buckets: [0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    registers: [registry],
  });
  new client.Gauge({
    name: 'steward_open_sockets',
    help: 'Open WebSocket connections by kind',
    labelNames: ['kind'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const [kind, n] of Object.entries(sockets())) this.set({ kind }, n);
    },
  });
  new client.Gauge({
    name: 'steward_live_actors',
    help: 'Live (in-memory) actors by kind',
    labelNames: ['kind'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const [kind, n] of Object.entries(actors())) this.set({ kind }, n);
    },
  });

  return {
    registry,
    httpRequests,
    httpDuration,
    storeDuration,
    setSocketSource: (fn) => (sockets = fn),
    setActorSource: (fn) => (actors = fn),
  };
}
