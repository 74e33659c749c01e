/** The nats-server the cluster tests start: the same code as `npm run cluster` (tools/cluster). */
export * from '../tools/cluster/nats-server.js';
