/**
 * What every service may use. Anything else a service needs — another service, a port — is
 * passed to its constructor by the composition root (src/app/), so a service's constructor says
 * what it depends on.
 */
import type { Config } from '../config.js';
import type { Logger } from '../log.js';
import type { Collections } from '../store/collections.js';
import type { ActorHost } from '../actors/host.js';
import type { SecretBox } from '../domain/secrets.js';
import type { ServerIdentity } from './server-identity.js';
import type { Sessions } from './sessions.js';
import type { AuditLog } from './audit.js';
import type { ActorPlacement } from './ports.js';

export interface ServiceCore {
  readonly config: Config;
  readonly log: Logger;
  readonly c: Collections;
  readonly actors: ActorHost;
  /** Where each actor lives and how a command reaches it (every actor is here in one process). */
  readonly placement: ActorPlacement;
  readonly secrets: SecretBox;
  readonly identity: ServerIdentity;
  readonly sessions: Sessions;
  readonly audit: AuditLog;
}
