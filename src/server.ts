/**
 * Composition root of a running Steward: configuration -> store -> actor host -> routes ->
 * uWS app. `startSteward` returns a handle with the bound port and `close()` (graceful:
 * stop listening, close sockets with 1001, flush snapshots, close the store).
 */
import { readFile } from 'node:fs/promises';
import type { Config } from './config.js';
import type { Logger } from './log.js';
import { listenExclusive, loadUws, refusal as uwsRefusal, type LoadedUws, type TemplatedApp, type us_listen_socket, type WebSocket } from './http/uws.js';
import { Router } from './http/router.js';
import { selectEd25519 } from './domain/ed25519.js';
import { startCryptoWorker } from './domain/crypto-worker.js';
import { AppError } from './domain/errors.js';
import { attachHttp } from './http/adapter.js';
import { attachStatic } from './http/static.js';
import { createRateLimits, memoryStore, type RateLimits } from './services/rate-limits.js';
import { ClientAddresses } from './http/client-address.js';
import { createMetrics, type Metrics } from './http/metrics.js';
import { openStore, instrumentStore } from './store/index.js';
import { StoreUnavailableError, type Store } from './store/types.js';
import { embeddedStoreHoldsData, tightenDataDir } from './store/data-dir.js';
import { ActorHost } from './actors/host.js';
import { SecretBox, SecretKeyError, loadSecretKey } from './domain/secrets.js';
import { systemRoutes } from './http/routes/system.js';
import { authRoutes } from './http/routes/auth.js';
import { claimRoutes } from './http/routes/claims.js';
import { invitationRoutes } from './http/routes/invitations.js';
import { userRoutes } from './http/routes/users.js';
import { workspaceRoutes } from './http/routes/workspaces.js';
import { grantRoutes } from './http/routes/grants.js';
import { auditRoutes } from './http/routes/audit.js';
import { collections, ensureIndexes, type Collections } from './store/collections.js';
import { ServerIdentity } from './services/server-identity.js';
import { Sessions } from './services/sessions.js';
import { hashClearTokens } from './services/token-migration.js';
import { AuditLog } from './services/audit.js';
import { UserService } from './services/users.js';
import { WorkspaceService } from './services/workspaces.js';
import { ensureDefaultWorkspace, ensureOwner } from './services/bootstrap.js';
import { createAuthPolicy, type AgentLookup } from './http/auth.js';
import type { UserDoc, WorkspaceDoc } from './store/collections.js';
import { offlinePush, type AgentIntents, type AgentPush } from './services/agent-push.js';
import { WorkflowService, channelPosterFrom } from './services/workflows.js';
import { ScheduleService } from './services/schedules.js';
import { workflowRoutes } from './http/routes/workflows.js';
import { scheduleRoutes } from './http/routes/schedules.js';
import { createFleet } from './services/fleet-module.js';
import { agentRoutes } from './http/routes/agents.js';
import { policyRoutes } from './http/routes/policies.js';
import { fleetAdminRoutes } from './http/routes/fleet-admin.js';
import { SkillService } from './services/skills.js';
import { skillRoutes } from './http/routes/skills.js';
import { ModelService } from './services/models.js';
import { modelRoutes } from './http/routes/models.js';
import { llmConfigRoutes } from './http/routes/llm-config.js';
import { ChannelService } from './services/channels.js';
import { BridgeService } from './services/bridges.js';
import { channelRoutes } from './http/routes/channels.js';
import { messageRoutes } from './http/routes/messages.js';
import { bridgeRoutes } from './http/routes/bridges.js';

export class StartupError extends Error {
  override name = 'StartupError';
}

/** Open WebSockets by kind, for metrics and for closing them on shutdown. */
export class SocketRegistry {
  private readonly byKind = new Map<string, Set<WebSocket<unknown>>>();
  add(kind: string, ws: WebSocket<unknown>): void {
    let set = this.byKind.get(kind);
    if (!set) this.byKind.set(kind, (set = new Set()));
    set.add(ws);
  }
  delete(kind: string, ws: WebSocket<unknown>): void {
    this.byKind.get(kind)?.delete(ws);
  }
  counts(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const [k, s] of this.byKind) out[k] = s.size;
    return out;
  }
  /** Ends every socket with the given close code. */
  endAll(code: number, reason: string): void {
    for (const set of this.byKind.values()) {
      for (const ws of [...set]) {
        try {
          ws.end(code, reason);
        } catch {
          // already closed
        }
      }
    }
  }
}

/** Everything a route module or service may use. Later areas add their services here. */
export interface AppContext {
  config: Config;
  log: Logger;
  store: Store;
  actors: ActorHost;
  metrics: Metrics;
  router: Router;
  /** Rate limits per group (HTTP routes name theirs; the agent gateway counts hellos). */
  rateLimits: RateLimits;
  /** The client address of a connection, behind trusted proxies too. */
  clientAddresses: ClientAddresses;
  secrets: SecretBox;
  sockets: SocketRegistry;
  uws: LoadedUws;
  app: TemplatedApp;
  c: Collections;
  identity: ServerIdentity;
  sessions: Sessions;
  audit: AuditLog;
  /** Deletes people; later areas subscribe with onUserDeleted. */
  userService: UserService;
  /** Deletes workspaces; later areas subscribe with onWorkspaceDeleted. */
  workspaceService: WorkspaceService;
  /** The default workspace as it was at start (its id never changes). */
  defaultWorkspace: WorkspaceDoc;
  /** The owner created by this start (null when users already existed). */
  bootstrappedOwner: UserDoc | null;
  /** Reaches connected agents (provided by the fleet gateway). */
  agentPush: AgentPush;
  /** Sends intents with all their checks (provided by the fleet). */
  agentIntents: AgentIntents;
  /** Resolves agent sessions to agents; replaced by the fleet. */
  agentLookup: AgentLookup;
  /** Workspace skills, overrides, skills_config pushes and the external skills library. */
  skills: SkillService;
  /** Workflow definitions, runs and their executor (its `clock` is replaceable in tests). */
  workflows: WorkflowService;
  /** Cron schedules of workflows. */
  schedules: ScheduleService;
  version: string;
  startedAt: string;
  /** Hooks run at close(), before the store closes, in reverse order of registration. */
  onClose(fn: () => Promise<void> | void): void;
}

export interface Steward {
  ctx: AppContext;
  port: number;
  /** Base URL of this server on loopback, e.g. http://127.0.0.1:41234 */
  url: string;
  close(): Promise<void>;
}

async function readVersion(): Promise<string> {
  try {
    const pkg = JSON.parse(await readFile(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
    return pkg.version;
  } catch {
    const pkg = JSON.parse(await readFile(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };
    return pkg.version;
  }
}

/** Seams for tests: a wrapper put around the raw store (fault injection), before metrics wrap it. */
export interface StartOptions {
  wrapStore?: (store: Store) => Store;
  /** The built dashboard to serve at `/` (default dist/web of this package). */
  uiDir?: string;
}

export async function startSteward(config: Config, log: Logger, options: StartOptions = {}): Promise<Steward> {
  const uws = loadUws();
  if (!uws.native) {
    if (!config.allowUwsFallback) throw new StartupError(uwsRefusal(uws));
    log.warn({ uws: 'fallback', build: uws.build, detail: uws.detail }, 'running on the uWebSockets.js JavaScript fallback (slow)');
  } else {
    log.info({ uws: 'native', build: uws.build, binary: uws.detail, skipped: uws.skipped }, `uWebSockets.js native binary loaded: ${uws.build}`);
  }
  let ed;
  try {
    ed = selectEd25519(config.ed25519);
  } catch (err) {
    throw new StartupError(`STEWARD_ED25519=libsodium: ${(err as Error).message}`);
  }
  if (config.ed25519 === 'auto' && ed.name !== 'libsodium') log.warn({ ed25519: ed.name }, 'libsodium (sodium-native) does not load here; Ed25519 runs on OpenSSL, about half as fast');
  else log.info({ ed25519: ed.name }, `Ed25519 on ${ed.name}`);
  startCryptoWorker();

  const embedded = !config.mongodbUri;
  // A port in use is refused before anything touches the disk (a failed start changes nothing).
  if (config.port !== 0) await ensurePortFree(uws, config.host, config.port);
  const metrics = createMetrics();
  // Embedded: the store creates DATA_DIR (0700) and locks it against a second process.
  const rawStore = await openStore({ dataDir: config.dataDir, mongodbUri: config.mongodbUri, mongodbDb: config.mongodbDb, compactMinBytes: config.storeCompactMinBytes }).catch(
    (err: unknown) => {
      throw err instanceof StoreUnavailableError && embedded ? new StartupError(err.message) : err;
    },
  );
  let started = false;
  let closeStarted: (() => Promise<void>) | undefined;
  try {
    const steward = await build({ config, log, options, uws, embedded, metrics, rawStore, onCloseReady: (close) => (closeStarted = close) });
    started = true;
    return steward;
  } catch (err) {
    if (err instanceof SecretKeyError) throw new StartupError(err.message);
    throw err;
  } finally {
    // Whatever was started goes again, and the store's lock with it.
    if (!started) await (closeStarted ? closeStarted() : rawStore.close()).catch((err: unknown) => log.error({ err }, 'closing after a failed start failed'));
  }
}

/** Refuses a port another process listens on (exclusive listen, then let go at once). */
async function ensurePortFree(uws: LoadedUws, host: string, port: number): Promise<void> {
  const probe = uws.uws.App();
  const socket = await listenExclusive(uws.uws, probe, host, port);
  if (!socket) throw new StartupError(portRefused(host, port));
  uws.uws.us_listen_socket_close(socket);
  (probe as unknown as { close?: () => void }).close?.();
}

const portRefused = (host: string, port: number) =>
  `port ${port} on ${host} is in use by another process (or the address cannot be bound here); stop that process, or set PORT (or HOST) to a free one`;

/** Everything after the store is open; `onCloseReady` receives the close that undoes it, once there is one. */
async function build(b: {
  config: Config;
  log: Logger;
  options: StartOptions;
  uws: LoadedUws;
  embedded: boolean;
  metrics: Metrics;
  rawStore: Store;
  onCloseReady: (close: () => Promise<void>) => void;
}): Promise<Steward> {
  const { config, log, options, uws, embedded, metrics, rawStore, onCloseReady } = b;
  const secretKey = await loadSecretKey({
    configured: config.secretKey,
    dataDir: config.dataDir,
    embedded,
    mayCreate: !embedded || !(await embeddedStoreHoldsData(config.dataDir)),
  });
  const store = instrumentStore(options.wrapStore ? options.wrapStore(rawStore) : rawStore, metrics.storeRecorder);
  log.info({ store: store.kind }, store.kind === 'embedded' ? `embedded store in ${config.dataDir}` : 'MongoDB store connected');

  const actors = new ActorHost({ store, idleMs: config.actorIdleMs, log });
  metrics.setActorSource(() => actors.counts());

  const rateLimits = createRateLimits(config.rateLimits, memoryStore());
  const clientAddresses = new ClientAddresses(config.trustedProxies);
  const router = new Router({
    observe: ({ method, route, status, seconds, error }) => {
      metrics.observeHttp(method, route, status, seconds);
      if (error) log.error({ err: error, method, route, status }, 'request failed');
    },
    limits: rateLimits,
  });

  const app = uws.uws.App();
  const sockets = new SocketRegistry();
  metrics.setSocketSource(() => sockets.counts());
  const closeHooks: Array<() => Promise<void> | void> = [];
  let listenSocket: us_listen_socket | undefined;
  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      if (listenSocket) uws.uws.us_listen_socket_close(listenSocket);
      sockets.endAll(1001, 'server shutting down');
      for (const fn of closeHooks.reverse()) {
        try {
          await fn();
        } catch (err) {
          log.error({ err }, 'close hook failed');
        }
      }
      await actors.stop();
      await store.close();
      // Let the close frames go out, then drop every remaining connection (idle keep-alives).
      await new Promise((r) => setTimeout(r, 20));
      (app as unknown as { close?: () => void }).close?.();
    })());
  onCloseReady(close);

  const c = collections(store);
  await ensureIndexes(c, store.kind);
  const secrets = new SecretBox(secretKey.key);
  const identity = await ServerIdentity.load(c, secrets, secretKey.source);
  // Once the start can no longer be refused for its key: a refused start changes nothing on disk.
  await hashClearTokens(c, store, log);
  if (embedded) {
    const tightened = await tightenDataDir(config.dataDir);
    if (tightened.length > 0) {
      log.warn({ dataDir: config.dataDir, tightened }, `permissions tightened on ${tightened.length} path(s) in DATA_DIR: only its owner may read it (directories 0700, files 0600)`);
    }
  }
  const defaultWorkspace = await ensureDefaultWorkspace(c);
  const bootstrappedOwner = await ensureOwner(c, defaultWorkspace, config.ownerDid);
  log.info({ serverDid: identity.did }, 'server identity loaded');

  const sessions = new Sessions(c, config.sessionTtlMs);
  const ctx: AppContext = {
    config,
    log,
    store,
    actors,
    metrics,
    router,
    rateLimits,
    clientAddresses,
    secrets,
    c,
    identity,
    sessions,
    audit: new AuditLog(c, log),
    userService: new UserService(c, sessions, log),
    workspaceService: new WorkspaceService(c, log),
    defaultWorkspace,
    bootstrappedOwner,
    agentPush: offlinePush,
    agentIntents: {
      send: async () => {
        throw new AppError(409, 'agent_offline', 'the agent is not connected');
      },
    },
    agentLookup: async () => null,
    skills: SkillService.create(c, config, log, () => ctx.agentPush),
    workflows: new WorkflowService(),
    schedules: new ScheduleService(),
    sockets,
    uws,
    app,
    version: await readVersion(),
    startedAt: new Date().toISOString(),
    onClose: (fn) => closeHooks.push(fn),
  };

  router.setAuthPolicy(
    createAuthPolicy({ c, sessions: ctx.sessions, publicUrl: () => config.publicUrl, agent: () => ctx.agentLookup }),
  );
  // The fleet registers /ws/agent and /ws/feed, and provides agentPush, agentIntents, agentLookup.
  const fleet = await createFleet(ctx);
  ctx.skills.attach(ctx);
  // Decommissioned agents (DELETE /api/agents/:id): their skill overrides and channel memberships
  // go too. The LLM configuration lives on the agent document and goes with it.
  fleet.service.onAgentDeleted(async (agent) => {
    await ctx.skills.forgetAgent(agent._id);
  });
  ctx.workflows.attach(ctx);
  ctx.schedules.attach(ctx, ctx.workflows);
  // After the fleet: the model service subscribes to agents becoming ready through ctx.agentPush.
  const models = new ModelService(ctx);
  models.start();
  // Channels, messages and bridges; the live feed asks the channel service who may subscribe.
  const channels = new ChannelService(ctx);
  ctx.workflows.channelPoster = channelPosterFrom(channels);
  const bridges = new BridgeService(ctx, channels);
  fleet.feed.channelAccess = channels.feedTopic;
  channels.onAccessLost((channelId, did) =>
    fleet.feed.recheckChannel(channelId, did).catch((err: unknown) => log.error({ err, channelId }, 're-checking feed subscriptions failed')),
  );
  fleet.service.onAgentDeleted(async (agent) => {
    await channels.forgetMember(agent._id); // the channel service keeps its member caches true
  });
  // Leaving a workspace (or losing the account) ends feed subscriptions to its public channels.
  ctx.workspaceService.onMemberRemoved(async (_workspaceId, userId) => {
    const user = await c.users.findById(userId);
    if (user?.did) await fleet.feed.recheckPerson(user.did);
  });
  ctx.userService.onUserDeleted(async (user) => {
    if (user.did) await fleet.feed.recheckPerson(user.did);
  });
  await bridges.start();
  ctx.onClose(() => bridges.stop());
  router.add(
    ...systemRoutes(ctx),
    ...authRoutes(ctx),
    ...claimRoutes(ctx),
    ...invitationRoutes(ctx),
    ...userRoutes(ctx),
    ...workspaceRoutes(ctx),
    ...grantRoutes(ctx),
    ...auditRoutes(ctx),
    ...agentRoutes(ctx, fleet),
    ...policyRoutes(fleet),
    ...fleetAdminRoutes(ctx, fleet),
    ...skillRoutes(ctx),
    ...modelRoutes(ctx, models),
    ...llmConfigRoutes(ctx, models),
    ...channelRoutes(ctx, channels),
    ...messageRoutes(ctx, channels),
    ...bridgeRoutes(ctx, channels, bridges),
    ...workflowRoutes(ctx, ctx.workflows),
    ...scheduleRoutes(ctx, ctx.schedules),
  );
  // Running workflow runs resume and schedules are re-armed once every route exists. The workflow
  // executor registers its close hook here, last, so that it stops first at shutdown.
  await ctx.workflows.start();
  await ctx.schedules.start();

  attachHttp(app, router, {
    bodyLimitBytes: config.bodyLimitBytes,
    log,
    baseHeaders: { 'x-content-type-options': 'nosniff', 'cache-control': 'no-store' },
    clientAddress: (peer, forwardedFor) => clientAddresses.of(peer, forwardedFor),
  });
  // The dashboard: GET/HEAD handlers uWS tries before the router's, yielding every API path to it.
  attachStatic(app, { dir: options.uiDir, log });

  listenSocket = (await listenExclusive(uws.uws, app, config.host, config.port)) || undefined;
  if (!listenSocket) throw new StartupError(portRefused(config.host, config.port));
  const port = uws.uws.us_socket_local_port(listenSocket as never);
  if (config.publicUrlDefaulted) config.publicUrl = `http://localhost:${port}`;

  return { ctx, port, url: `http://127.0.0.1:${port}`, close };
}
