/**
 * What the route modules are given while they move, one area at a time, to receiving only the
 * services they call.
 */
import type { Config } from '../../config.js';
import type { Logger } from '../../log.js';
import type { Collections } from '../../store/collections.js';
import type { Store } from '../../store/types.js';
import type { ActorHost } from '../../actors/host.js';
import type { AuditLog } from '../../services/audit.js';
import type { ServerIdentity } from '../../services/server-identity.js';
import type { Metrics } from '../metrics.js';
import type { RouteDef } from '../router.js';

export interface RouteContext {
  config: Config;
  log: Logger;
  c: Collections;
  store: Store;
  actors: ActorHost;
  audit: AuditLog;
  identity: ServerIdentity;
  metrics: Metrics;
  version: string;
  /** Every route of the server (for the OpenAPI document). */
  routes(): readonly RouteDef[];
}
