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

/**
 * A histogram without labels whose `observe` allocates nothing, for one observation per heartbeat:
 * prom-client's builds a labels object, a closure and a label hash on every call, about 180 bytes
 * of garbage, which for a held fleet is a measurable part of all it allocates. Registered with the
 * registry as a metric of its own, it is exposed exactly as a prom-client histogram is.
 */
class LeanHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  private readonly counts: Float64Array;
  private sum = 0;
  private count = 0;

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly buckets: readonly number[],
  ) {
    this.counts = new Float64Array(buckets.length);
  }

  observe(value: number): void {
    if (!Number.isFinite(value)) return;
    let i = 0;
    while (i < this.buckets.length && value > this.buckets[i]!) i++;
    if (i < this.counts.length) this.counts[i]!++;
    this.sum += value;
    this.count++;
  }

  /** What the registry reads to expose a metric (prom-client's histograms give the same). */
  get(): { name: string; help: string; type: 'histogram'; values: Array<client.MetricValueWithName<string>>; aggregator: 'sum' } {
    const values: Array<client.MetricValueWithName<string>> = [];
    let cumulative = 0;
    for (let i = 0; i < this.buckets.length; i++) {
      cumulative += this.counts[i]!;
      values.push({ labels: { le: this.buckets[i]! }, value: cumulative, metricName: `${this.name}_bucket` });
    }
    values.push({ labels: { le: '+Inf' }, value: this.count, metricName: `${this.name}_bucket` });
    values.push({ labels: {}, value: this.sum, metricName: `${this.name}_sum` });
    values.push({ labels: {}, value: this.count, metricName: `${this.name}_count` });
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }

  reset(): void {
    this.counts.fill(0);
    this.sum = 0;
    this.count = 0;
  }
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
  const heartbeatAck = new LeanHistogram(
    'steward_heartbeat_ack_seconds',
    'Time from a heartbeat arriving to its heartbeat_ack being sent (its ledger write in between)',
    [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
  );
  registry.registerMetric(heartbeatAck as unknown as client.Metric);
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
