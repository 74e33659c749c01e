/**
 * Prometheus metrics (prom-client), one registry per server so several servers can live in one
 * process (tests). Served at GET /metrics.
 */
import client from 'prom-client';

export interface Metrics {
  registry: client.Registry;
  /** Counts one HTTP request and its latency. */
  observeHttp(method: string, route: string, status: number, seconds: number): void;
  /**
   * The recorder of one store operation's latency and outcome for a collection and method, made
   * once per pair (src/store/index.ts instrumentStore) so that recording allocates nothing.
   */
  storeRecorder(collection: string, op: string): (seconds: number, ok: boolean) => void;
  /** Records one heartbeat's time from arrival to acknowledgement (the ledger write in between). */
  observeHeartbeatAck(seconds: number): void;
  /** Sources read at scrape time. */
  setSocketSource(fn: () => Record<string, number>): void;
  setActorSource(fn: () => Record<string, number>): void;
  /** Cluster mode: messages on the bus and its requests' latency (src/cluster/bus-metered.ts). */
  busMeter: {
    message(direction: 'sent' | 'dropped' | 'received'): void;
    request(seconds: number, outcome: string): void;
  };
  /** Cluster mode: this node's view of the cluster, read at scrape time. */
  setClusterSource(fn: () => { ownedShards: number; nodes: number; busConnected: boolean }): void;
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

/** One labelled series of a LeanHistogram: `observe` allocates nothing. */
class LeanSeries {
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(
    private readonly buckets: readonly number[],
    readonly labels: Readonly<Record<string, string>>,
  ) {
    this.counts = new Float64Array(buckets.length);
  }

  observe(value: number): void {
    if (!Number.isFinite(value)) return;
    const buckets = this.buckets;
    let i = 0;
    while (i < buckets.length && value > buckets[i]!) i++;
    if (i < this.counts.length) this.counts[i]!++;
    this.sum += value;
    this.count++;
  }
}

/**
 * A histogram whose `observe` allocates nothing, for what is observed thousands of times a
 * second (a heartbeat's acknowledgement, a store operation): prom-client's builds a labels
 * object and a closure, validates and hashes the labels on every call, about 180 bytes of garbage
 * and a few microseconds, which showed in a fleet's profile. Each combination of label values is
 * a series made once (`series`) and kept by the caller. Registered with the registry as a metric
 * of its own, it is exposed exactly as a prom-client histogram is (series that were never
 * observed are left out, as prom-client leaves them out).
 */
class LeanHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  private readonly byKey = new Map<string, LeanSeries>();

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly buckets: readonly number[],
    private readonly labelNames: readonly string[] = [],
  ) {
    if (labelNames.length === 0) this.series();
  }

  /** The series for these label values (in the order of the label names), made on first use. */
  series(...values: string[]): LeanSeries {
    if (values.length !== this.labelNames.length) throw new Error(`${this.name}: ${this.labelNames.length} label values expected`);
    const key = values.join('\u0000');
    let s = this.byKey.get(key);
    if (!s) {
      const labels: Record<string, string> = {};
      this.labelNames.forEach((n, i) => (labels[n] = values[i]!));
      s = new LeanSeries(this.buckets, labels);
      this.byKey.set(key, s);
    }
    return s;
  }

  /** What the registry reads to expose a metric (prom-client's histograms give the same). */
  get(): { name: string; help: string; type: 'histogram'; values: Array<client.MetricValueWithName<string>>; aggregator: 'sum' } {
    const values: Array<client.MetricValueWithName<string>> = [];
    for (const s of this.byKey.values()) {
      if (s.count === 0 && this.labelNames.length > 0) continue; // an unlabelled histogram shows its zeros, as prom-client's does
      let cumulative = 0;
      for (let i = 0; i < this.buckets.length; i++) {
        cumulative += s.counts[i]!;
        values.push({ labels: { le: this.buckets[i]!, ...s.labels }, value: cumulative, metricName: `${this.name}_bucket` });
      }
      values.push({ labels: { le: '+Inf', ...s.labels }, value: s.count, metricName: `${this.name}_bucket` });
      values.push({ labels: { ...s.labels }, value: s.sum, metricName: `${this.name}_sum` });
      values.push({ labels: { ...s.labels }, value: s.count, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }

  reset(): void {
    for (const s of this.byKey.values()) {
      s.counts.fill(0);
      s.sum = 0;
      s.count = 0;
    }
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
  // Every store call is observed (a reconnecting fleet makes tens of thousands a second).
  const storeDuration = new LeanHistogram(
    'steward_store_operation_duration_seconds',
    'Store operation latency by collection, operation and outcome',
    [0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    ['collection', 'op', 'outcome'],
  );
  registry.registerMetric(storeDuration as unknown as client.Metric);
  const heartbeatAck = new LeanHistogram(
    'steward_heartbeat_ack_seconds',
    'Time from a heartbeat arriving to its heartbeat_ack being sent (its ledger write in between)',
    // Fine around the tens of milliseconds, where an acknowledgement target (such as p99 < 50 ms) is read.
    [0.001, 0.0025, 0.005, 0.01, 0.02, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.25, 0.5, 1, 2.5],
  );
  registry.registerMetric(heartbeatAck as unknown as client.Metric);
  const ackSeries = heartbeatAck.series();
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

  let cluster: (() => { ownedShards: number; nodes: number; busConnected: boolean }) | undefined;
  const busMessages = new client.Counter({
    name: 'steward_bus_messages_total',
    help: 'Cluster bus messages by direction (sent, dropped while disconnected, received)',
    labelNames: ['direction'] as const,
    registers: [registry],
  });
  const busRequests = new client.Histogram({
    name: 'steward_bus_request_duration_seconds',
    help: 'Cluster bus requests (commands to other nodes, gathers, intents) by outcome',
    labelNames: ['outcome'] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 15],
    registers: [registry],
  });
  new client.Gauge({
    name: 'steward_cluster_owned_shards',
    help: 'Shards this node owns (cluster mode)',
    registers: [registry],
    collect() {
      const c = cluster?.();
      if (c) this.set(c.ownedShards);
    },
  });
  new client.Gauge({
    name: 'steward_cluster_nodes',
    help: 'Live nodes of the cluster as this node last read them (cluster mode)',
    registers: [registry],
    collect() {
      const c = cluster?.();
      if (c) this.set(c.nodes);
    },
  });
  new client.Gauge({
    name: 'steward_bus_connected',
    help: '1 while the cluster bus is connected (cluster mode)',
    registers: [registry],
    collect() {
      const c = cluster?.();
      if (c) this.set(c.busConnected ? 1 : 0);
    },
  });
  const busDirection = children((v) => busMessages.labels(...v));
  const busOutcome = children((v) => busRequests.labels(...v));

  const httpChild = children((v) => ({ requests: httpRequests.labels(...v), duration: httpDuration.labels(...v) }));

  return {
    registry,
    observeHttp: (method, route, status, seconds) => {
      const child = httpChild([method, route, String(status)]);
      child.requests.inc();
      child.duration.observe(seconds);
    },
    storeRecorder: (collection, op) => {
      const ok = storeDuration.series(collection, op, 'ok');
      let error: LeanSeries | undefined; // made at the first failure, so a clean run shows no error series
      return (seconds, succeeded) => {
        if (succeeded) ok.observe(seconds);
        else (error ??= storeDuration.series(collection, op, 'error')).observe(seconds);
      };
    },
    observeHeartbeatAck: (seconds) => ackSeries.observe(seconds),
    setSocketSource: (fn) => (sockets = fn),
    setActorSource: (fn) => (actors = fn),
    busMeter: {
      message: (direction) => busDirection([direction]).inc(),
      request: (seconds, outcome) => busOutcome([outcome]).observe(seconds),
    },
    setClusterSource: (fn) => (cluster = fn),
  };
}
