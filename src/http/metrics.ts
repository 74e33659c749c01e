/**
 * Prometheus metrics (prom-client), one registry per server so several servers can live in one
 * process (tests). Served at GET /metrics.
 */
import client from 'prom-client';

export interface Metrics {
  registry: client.Registry;
  /** Counts one HTTP request and its latency. */
  observeHttp(method: string, route: string, status: number, seconds: number): void;
  /** Records one store operation's latency. */
  observeStore(collection: string, op: string, ok: boolean, seconds: number): void;
  /** Records one heartbeat's time from arrival to acknowledgement (the ledger write in between). */
  observeHeartbeatAck(seconds: number): void;
  /** Sources read at scrape time. */
  setSocketSource(fn: () => Record<string, number>): void;
  setActorSource(fn: () => Record<string, number>): void;
}

/**
 * The labelled child of a metric for a list of label values, made once and kept: observing
 * through a labels object hashes the labels on every call, which shows at thousands of
 * observations per second (store operations under a fleet's load).
 */
function children<C>(make: (values: string[]) => C): (values: string[]) => C {
  const cache = new Map<string, C>();
  return (values) => {
    const key = values.join('\u0000');
    let child = cache.get(key);
    if (!child) {
      child = make(values);
      cache.set(key, child);
    }
    return child;
  };
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
  const heartbeatAck = new client.Histogram({
    name: 'steward_heartbeat_ack_seconds',
    help: 'Time from a heartbeat arriving to its heartbeat_ack being sent (its ledger write in between)',
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
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

  const httpChild = children((v) => ({ requests: httpRequests.labels(...v), duration: httpDuration.labels(...v) }));
  const storeChild = children((v) => storeDuration.labels(...v));

  return {
    registry,
    observeHttp: (method, route, status, seconds) => {
      const child = httpChild([method, route, String(status)]);
      child.requests.inc();
      child.duration.observe(seconds);
    },
    observeStore: (collection, op, ok, seconds) => storeChild([collection, op, ok ? 'ok' : 'error']).observe(seconds),
    observeHeartbeatAck: (seconds) => heartbeatAck.observe(seconds),
    setSocketSource: (fn) => (sockets = fn),
    setActorSource: (fn) => (actors = fn),
  };
}
