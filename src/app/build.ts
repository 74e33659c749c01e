/**
 * The composition root: every part of a running Steward, built once, in order, each given the
 * collaborators it uses. Services reach sockets only through the ports (src/services/ports.ts),
 * whose implementations — the agent gateway's connection map, the live feed's topics — are built
 * before the services that use them; the cross-area consequences (a deleted workspace, user or
 * agent; an agent coming online) are wired here, in one place, as hook lists.
 */
import type { Config } from '../config.js';
import type { Logger } from '../log.js';
import type { LoadedUws, us_listen_socket } from '../http/uws.js';
import type { Store } from '../store/types.js';
import { instrumentStore } from '../store/index.js';
import { collections, ensureIndexes } from '../store/collections.js';
import { tightenDataDir } from '../store/data-dir.js';
import { ActorHost } from '../actors/host.js';
import { SecretBox } from '../domain/secrets.js';
import { Router } from '../http/router.js';
import { createAuthPolicy } from '../http/auth.js';
import { attachHttp } from '../http/adapter.js';
import { attachStatic } from '../http/static.js';
import { ClientAddresses } from '../http/client-address.js';
import type { Metrics } from '../http/metrics.js';
import { SkillsLibrary } from '../integrations/skills-library.js';
import type { ServiceCore } from '../services/core.js';
import { createRateLimits, LIMIT_GROUPS, memoryStore } from '../services/rate-limits.js';
import { Lockout, TripLog } from '../services/lockout.js';
import { ServerIdentity } from '../services/server-identity.js';
import { Sessions } from '../services/sessions.js';
import { hashClearTokens } from '../services/token-migration.js';
import { migrateChannelCounters } from '../services/channel-counters.js';
import { AuditLog } from '../services/audit.js';
import { ensureDefaultWorkspace, ensureOwner } from '../services/bootstrap.js';
import { UserService } from '../services/users.js';
import { WorkspaceService } from '../services/workspaces.js';
import { GrantService } from '../services/grants.js';
import { LoginService } from '../services/login.js';
import { DeviceApprovals } from '../services/device-approvals.js';
import { PersonSessions } from '../services/person-sessions.js';
import { ClaimService } from '../services/claims.js';
import { InvitationService } from '../services/invitations.js';
import { AgentActors } from '../services/agent-actors.js';
import { PolicyService } from '../services/policies.js';
import { FleetService } from '../services/fleet.js';
import { TokenUsage } from '../services/token-usage.js';
import { TokenSeries } from '../services/token-series.js';
import { FleetSummary } from '../services/fleet-summary.js';
import { ActorInspector } from '../services/actor-inspector.js';
import { IntentService } from '../services/intents.js';
import { AgentRoster } from '../services/agent-roster.js';
import { AgentViews } from '../services/agent-views.js';
import { SkillService } from '../services/skills.js';
import { ModelCatalogue } from '../services/model-catalogue.js';
import { AgentLlmConfig } from '../services/llm-config.js';
import { LiteLlmClient } from '../integrations/litellm.js';
import { ChannelService } from '../services/channels.js';
import { BridgeService } from '../services/bridges.js';
import { WorkflowService } from '../services/workflows.js';
import { WorkflowRuns, channelPosterFrom } from '../services/workflow-runs.js';
import { ScheduleService } from '../services/schedules.js';
import { FeedRights } from '../services/feed-rights.js';
import { PresenceFeed } from '../services/presence-feed.js';
import { AgentConnections } from '../ws/agent/connections.js';
import { CertificateOffers } from '../ws/agent/offers.js';
import { Handshake } from '../ws/agent/handshake.js';
import { AgentGateway } from '../ws/agent/gateway.js';
import { Feed, FeedTopics } from '../ws/feed.js';
import { SocketRegistry } from '../ws/sockets.js';
import { routeTable } from './routes.js';
import type { Steward } from './handle.js';
import type { ActorPlacement, AgentLink, AgentPresence, PeerNodes } from '../services/ports.js';
import { LocalPlacement } from '../cluster/placement.js';
import { serveActorCommands } from '../services/actor-commands.js';
import { ActorDirectory } from '../services/actor-directory.js';
import type { Bus } from '../cluster/bus.js';
import { LocalBus } from '../cluster/bus-local.js';
import { connectNatsBus } from '../cluster/bus-nats.js';
import { MeteredBus } from '../cluster/bus-metered.js';
import { ClusterNode } from '../cluster/node.js';
import { storeTimeOf } from '../cluster/store-clock.js';
import { FiringClaims, NamedLease } from '../cluster/claims.js';
import { NoPeers } from '../cluster/peers.js';
import { ClusterAgentLink } from '../ws/agent/cluster-link.js';
import { FeedRelay } from '../ws/feed-relay.js';

export interface BuildInput {
  config: Config;
  log: Logger;
  uws: LoadedUws;
  embedded: boolean;
  metrics: Metrics;
  /** The store as opened (and wrapped by a test's fault injection, when there is one). */
  rawStore: Store;
  secretKey: { key: Buffer; source: string };
  version: string;
  /** The built dashboard to serve at `/` (default dist/web of this package). */
  uiDir?: string;
  /** Receives the close that undoes what was built, as soon as there is one (a failed start calls it). */
  onCloseReady(close: () => Promise<void>): void;
  /** Listens on the configured address; false when it is taken. */
  listen(app: ReturnType<LoadedUws['uws']['App']>): Promise<us_listen_socket | false>;
}

/** Builds every part, starts them in order, and listens; `close()` stops them in reverse order. */
export async function build(b: BuildInput): Promise<{ steward: Steward } | { portTaken: true }> {
  const { config, log, uws, embedded, metrics, version } = b;

  // -- The store, the actor host, the transports' shared parts, and shutdown ------------------------
  const store = instrumentStore(b.rawStore, metrics.storeRecorder);
  log.info({ store: store.kind }, store.kind === 'embedded' ? `embedded store in ${config.dataDir}` : 'MongoDB store connected');
  const actors = new ActorHost({ store, idleMs: config.actorIdleMs, log });
  metrics.setActorSource(() => actors.counts());
  const rateLimits = createRateLimits(config.rateLimits, memoryStore());
  const trips = new TripLog(log);
  const clientAddresses = new ClientAddresses(config.trustedProxies);
  const app = uws.uws.App();
  const sockets = new SocketRegistry();
  // The live feed's topics (the FeedPublisher port): what services publish to.
  const feedTopics = new FeedTopics(app);
  metrics.setSocketSource(() => sockets.counts());

  const closeHooks: Array<() => Promise<void> | void> = [];
  /** Runs `fn` at close, before the actor host and the store stop; hooks run in reverse order of registration. */
  const onClose = (fn: () => Promise<void> | void) => void closeHooks.push(fn);
  /** Cluster mode: what stops after the actor host (shards released, membership, bus), in order. */
  const afterActors: Array<() => Promise<void> | void> = [];
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
      for (const fn of afterActors) {
        try {
          await fn();
        } catch (err) {
          log.error({ err }, 'close hook failed');
        }
      }
      await store.close();
      // Let the close frames go out, then drop every remaining connection (idle keep-alives).
      await new Promise((r) => setTimeout(r, 20));
      (app as unknown as { close?: () => void }).close?.();
    })());
  b.onCloseReady(close);

  // -- The core every service uses ------------------------------------------------------------------
  const c = collections(store);
  await ensureIndexes(c, store.kind);
  const secrets = new SecretBox(b.secretKey.key);
  const identity = await ServerIdentity.load(c, secrets, b.secretKey.source);
  // Once the start can no longer be refused for its key: a refused start changes nothing on disk.
  await hashClearTokens(c, store, log);
  await migrateChannelCounters(c, log);
  if (embedded) {
    const tightened = await tightenDataDir(config.dataDir);
    if (tightened.length > 0) {
      log.warn({ dataDir: config.dataDir, tightened }, `permissions tightened on ${tightened.length} path(s) in DATA_DIR: only its owner may read it (directories 0700, files 0600)`);
    }
  }
  const defaultWorkspace = await ensureDefaultWorkspace(c);
  await ensureOwner(c, defaultWorkspace, config.ownerDid);
  log.info({ serverDid: identity.did }, 'server identity loaded');
  const sessions = new Sessions(c, config.sessionTtlMs);
  const audit = new AuditLog(c, log, feedTopics);
  // -- The bus: NATS in cluster mode (the node's lease taken before anything is served), else in-process
  let cluster: ClusterNode | undefined;
  let bus: Bus;
  if (config.cluster) {
    const cc = config.cluster;
    bus = new MeteredBus(await connectNatsBus({ servers: cc.natsServers, log, name: `steward-${cc.nodeId}` }), metrics.busMeter);
    cluster = new ClusterNode({
      bus,
      c,
      storeKind: store.kind,
      nodeId: cc.nodeId,
      clusterName: cc.name,
      shardCount: cc.shards,
      leaseMs: cc.leaseMs,
      marginMs: cc.leaseMarginMs,
      requestTimeoutMs: cc.requestTimeoutMs,
      busLossReleaseMs: cc.busLossReleaseMs,
      changePollMs: cc.changePollMs,
      log,
      // Leases and claims are judged on the store's clock, whatever the nodes' own clocks say.
      storeTime: storeTimeOf(store),
      meta: { version },
    });
    const node = cluster;
    afterActors.push(() => node.stopShards(), () => node.stop());
    await node.start();
    node.membership.onEvicted(() => {
      log.error({ nodeId: cc.nodeId }, 'another process took this node id over; this node stops');
      close().catch((err: unknown) => log.error({ err }, 'stopping an evicted node failed'));
    });
    log.info({ nodeId: cc.nodeId, nodeKey: node.nodeKey, cluster: cc.name }, 'joined the cluster');
    metrics.setClusterSource(() => {
      const st = node.status();
      return { ownedShards: st.ownedShards, nodes: st.nodes, busConnected: st.bus === 'connected' };
    });
  } else {
    bus = new LocalBus({ log });
    afterActors.push(() => bus.close());
  }
  const peers: PeerNodes = cluster?.peers ?? new NoPeers();
  // Cluster mode: an actor lives on the owner of its shard; the host spawns, writes and drops only those.
  const placement: ActorPlacement = cluster?.placement ?? new LocalPlacement();
  if (cluster) {
    actors.useOwnership(cluster.placement);
    cluster.placement.attachHost(actors);
  }
  const core: ServiceCore = { config, log, c, actors, placement, secrets, identity, sessions, audit };
  serveActorCommands(core);
  const actorDirectory = new ActorDirectory(core, peers);
  // Cluster mode: feed frames also reach the nodes whose browsers follow their topic.
  const relay = cluster
    ? new FeedRelay({ bus, subjects: cluster.subjects, nodeKey: cluster.nodeKey, log, leaseMs: cluster.leaseMs, deliver: (topic, text) => feedTopics.deliver(topic, text) })
    : undefined;
  if (relay) feedTopics.useRelay(relay);

  // -- People ---------------------------------------------------------------------------------------
  const userService = new UserService(core);
  const workspaceService = new WorkspaceService(core);
  const grants = new GrantService(core);
  // Failures counted per address and per principal, a principal anyone can name never locked against a clean address (lockout.ts).
  const login = new LoginService(
    core,
    new Lockout('failed logins', [
      { setting: LIMIT_GROUPS.loginFailure.settings.address, limiter: rateLimits.loginFailure.address, key: (a) => a.address, kind: 'own', where: 'from this address' },
      { setting: LIMIT_GROUPS.loginFailure.settings.key, limiter: rateLimits.loginFailure.key, key: (a) => a.principal, kind: 'named', where: 'for this DID' },
    ], trips),
  );
  const devices = new DeviceApprovals(
    core,
    new Lockout('wrong user codes', [
      { setting: LIMIT_GROUPS.userCode.settings.address, limiter: rateLimits.userCode.address, key: (a) => a.address, kind: 'own', where: 'from this address' },
      { setting: LIMIT_GROUPS.userCode.settings.key, limiter: rateLimits.userCode.key, key: (a) => a.principal, kind: 'own', where: 'from you' },
      { setting: LIMIT_GROUPS.userCodeTotal.settings.key, limiter: rateLimits.userCodeTotal.key, key: () => 'all', kind: 'named', where: 'on this server' },
    ], trips),
  );
  const personSessions = new PersonSessions(core);
  const claims = new ClaimService(core, { defaultWorkspace });
  const invitations = new InvitationService(core, { claims, defaultWorkspace });

  // -- The fleet: the connection map (the agent ports) first, the gateway that drives it last -------
  const connections = new AgentConnections(log);
  // In a cluster the agent ports route to the node that holds each socket; in one process they are the connection map.
  const link = cluster
    ? new ClusterAgentLink({
        local: connections,
        bus,
        subjects: cluster.subjects,
        nodeKey: cluster.nodeKey,
        presence: c.agentPresence,
        peers,
        liveKeys: () => cluster!.liveKeys(),
        log,
        decided: (did, decision) => handshake.decided(did, decision),
        // The fleet summary counts the sockets each node holds: this node no longer holds this one.
        movedAway: (did) => summary.connection(did, false),
      })
    : undefined;
  const agents: AgentLink = link ?? connections;
  const presence: AgentPresence = link ?? connections;
  const agentActors = new AgentActors(actors, log, placement);
  const offers = new CertificateOffers({ connections, identity, agentActors, log });
  const policies = new PolicyService(core, offers, peers);
  const fleet = new FleetService(core, { policies, agentActors, agents, presence, defaultWorkspace, feed: feedTopics });
  const summary = new FleetSummary(core, policies, peers);
  // In a cluster one node at a time rolls the token ledger up, under a lease.
  const rollupLease = cluster
    ? new NamedLease({ claims: c.clusterClaims, name: 'token-rollup', owner: cluster.nodeKey, leaseMs: cluster.leaseMs, marginMs: cluster.marginMs, log, clock: cluster.clock })
    : undefined;
  const tokens = new TokenUsage(
    core,
    (seconds) => metrics.observeHeartbeatAck(seconds),
    (did) => summary.workspacesOf(did),
    rollupLease && cluster ? { lease: rollupLease, settleMs: cluster.leaseMs, idClock: () => cluster!.clock.now() } : undefined,
  );
  const intents = new IntentService(core, agents);
  const roster = new AgentRoster(core, peers);
  const views = new AgentViews(core, { fleet, policies, tokens, presence, roster });
  const tokenSeries = new TokenSeries(core, { tokens, policies, views });
  const handshake = new Handshake({ config, log, identity, rateLimits, connections, offers, fleet, policies, agentActors, heartbeats: tokens });
  const gateway = new AgentGateway({ app, sockets, config, log, clientAddresses, connections, handshake, heartbeats: tokens, fleet, agentActors });

  // -- Skills, models, channels, workflows, and the people's live feed -------------------------------
  const library = new SkillsLibrary({ libraryUrl: config.skillsLibraryUrl, codeHostUrl: config.skillsCodeHostUrl, userAgent: 'steward' }, log);
  const skills = new SkillService(core, { agents, library });
  const proxy =
    config.proxyBaseUrl && config.proxyMasterKey ? new LiteLlmClient({ baseUrl: config.proxyBaseUrl, masterKey: config.proxyMasterKey, timeoutMs: config.proxyTimeoutMs }, log) : null;
  const llmConfig = new AgentLlmConfig(core, { agents, proxy });
  const models = new ModelCatalogue(core, { proxy, llmConfig });
  const channels = new ChannelService(core, { agents, feed: feedTopics, peers });
  const bridges = new BridgeService(core, { channels, version, ...(cluster ? { claims: { owner: cluster.nodeKey, claimMs: cluster.leaseMs, clock: cluster.clock } } : {}) });
  const runs = new WorkflowRuns(core, { intents, agents, channelPoster: channelPosterFrom(channels), feed: feedTopics });
  const workflows = new WorkflowService(core, runs);
  const schedules = new ScheduleService(core, {
    workflows,
    runs,
    peers,
    // In a cluster every node arms every schedule; the node whose claim of a firing succeeds runs it.
    ...(cluster ? { firings: new FiringClaims({ claims: c.clusterClaims, owner: cluster.nodeKey, clock: cluster.clock }) } : {}),
  });
  const feed = new Feed({ app, topics: feedTopics, sockets, config, log, sessions, actors, channelAccess: channels.feedTopic, rights: new FeedRights(c) });
  const presenceFeed = new PresenceFeed(c, feedTopics, log);

  // -- Consequences across areas (each list runs in the order written) ------------------------------
  // The agents list's rows follow the agents' records and their disconnections.
  fleet.onAgentChanged((did) => void roster.changed([did]));
  fleet.onAgentDeleted((agent) => void roster.changed([agent._id]));
  fleet.onSeen((did, at) => roster.seen(did, at));
  llmConfig.onAgentsChanged((dids) => void roster.changed(dids));
  // The fleet summary's counters follow the agents, their workspaces, sockets and runs.
  fleet.onAgentChanged((did) => summary.agentChanged(did));
  fleet.onAgentDeleted((agent) => summary.agentChanged(agent._id));
  workspaceService.onAgentMembershipChanged((_workspaceId, did) => summary.agentChanged(did));
  workspaceService.onWorkspaceDeleted((ws) => summary.workspaceDeleted(ws._id));
  workspaceService.onWorkspaceDeleted((ws) => tokens.forgetWorkspace(ws._id));
  agentActors.onDelivered((did, event) => {
    if (event.type === 'CONNECTED' || event.type === 'DISCONNECTED') summary.connection(did, event.type === 'CONNECTED');
    else summary.reissue(did, event.type === 'REISSUE_OFFERED');
    if (event.type === 'CONNECTED' || event.type === 'CERTIFICATE_STORED') summary.certificateStored(did, event.policyId);
  });
  runs.onRunStatus((change) => summary.runStatus(change));
  // ... and the agents whose certificate a policy change (or expiry) put out of date, online or not.
  policies.onTermsChanged((dids) => summary.termsChanged(dids));
  // An agent that completes its handshake gets its skills and its LLM configuration before `ready`.
  connections.onReady((did) => skills.agentReady(did));
  connections.onReady((did) => llmConfig.agentReady(did));
  // A decommissioned agent: its usage stays in the global totals; its overrides and channel memberships go.
  fleet.onAgentDeleted((agent) => tokens.forgetAgent(agent._id));
  fleet.onAgentDeleted(async (agent) => {
    await skills.forgetAgent(agent._id);
  });
  fleet.onAgentDeleted((agent) => channels.forgetMember(agent._id));
  // A deleted workspace takes its skills, workflows, model access and channels along.
  workspaceService.onWorkspaceDeleted((ws) => skills.workspaceDeleted(ws));
  workspaceService.onWorkspaceDeleted((ws) => workflows.workspaceDeleted(ws));
  workspaceService.onWorkspaceDeleted((ws) => models.workspaceDeleted(ws));
  workspaceService.onWorkspaceDeleted((ws) => channels.workspaceDeleted(ws));
  // Agents coming online and going offline reach the feed's presence topic.
  connections.onPresence((did, online) => presenceFeed.changed(did, online));
  // An agent joining or leaving a workspace gets its new skill set and LLM configuration.
  workspaceService.onAgentMembershipChanged((_workspaceId, did) => presenceFeed.membershipChanged(did));
  workspaceService.onAgentMembershipChanged((workspaceId, did) => skills.agentMembershipChanged(workspaceId, did));
  workspaceService.onAgentMembershipChanged((workspaceId, did) => llmConfig.agentMembershipChanged(workspaceId, did));
  // Access that ends, ends everywhere at once (docs/channels.md, "When access ends"): the store
  // changes first, then the feed sockets of every node re-ask the same rules (a node that missed
  // the broadcast in a bus outage has its feed sockets reconnect, below).
  const onEveryNode = <T>(topic: string, here: (data: T) => Promise<void> | void) => {
    const run = (data: T) => {
      try {
        Promise.resolve(here(data)).catch((err: unknown) => log.error({ err, topic }, 'ending access on the feed failed'));
      } catch (err) {
        log.error({ err, topic }, 'ending access on the feed failed');
      }
    };
    peers.onBroadcast(topic, (data) => run(data as T));
    return (data: T) => {
      run(data);
      peers.broadcast(topic, data);
    };
  };
  const sessionsEnded = onEveryNode<{ ids: string[]; reason: string }>('feed.sessions-ended', ({ ids, reason }) => feed.sessionsEnded(ids, reason));
  const personChanged = onEveryNode<{ did: string }>('feed.person-changed', ({ did }) => feed.recheckPerson(did));
  const channelAccessLost = onEveryNode<{ channelId: string; did: string | null }>('feed.channel-access-lost', ({ channelId, did }) =>
    feed.recheckChannel(channelId, did),
  );
  // A session that ends closes the feed sockets it authenticated.
  sessions.onEnded((ids, reason) => sessionsEnded({ ids, reason }));
  // A deleted person's schedules and channel memberships go, and their feed subscriptions end.
  userService.onUserDeleted((user) => schedules.userDeleted(user));
  userService.onUserDeleted((user) => channels.userDeleted(user));
  userService.onUserDeleted((user) => {
    if (user.did) personChanged({ did: user.did });
  });
  // A person whose role changed keeps only the feed topics they may still follow.
  userService.onRoleChanged((user) => {
    if (user.did) personChanged({ did: user.did });
  });
  // Whoever may no longer read a channel (left it, left its workspace, it went private) loses its feed subscription.
  channels.onAccessLost((channelId, did) => channelAccessLost({ channelId, did }));
  // Leaving a workspace (or being removed from it) leaves its channels, private ones too.
  workspaceService.onMemberRemoved(async (workspaceId, userId) => {
    const user = await c.users.findById(userId);
    if (!user?.did) return;
    await channels.leftWorkspace(workspaceId, user.did);
    personChanged({ did: user.did });
  });
  workspaceService.onAgentRemoved((workspaceId, did) => channels.leftWorkspace(workspaceId, did));

  // -- Cluster mode: where agents are, decisions to sockets on other nodes, catching up after an outage
  if (cluster && link && relay) {
    const node = cluster;
    fleet.onDecision((did, decision) => link.relayDecision(did, decision));
    node.onLiveChange((_live, left) => {
      link.nodesLeft(left, Date.now(), node.marginMs).catch((err: unknown) => log.warn({ err }, 'removing the agents of departed nodes failed'));
    });
    // Presence news sent while the bus was down is read from the change log; announcements missed
    // for good mean reading where every agent is. Browsers re-read what their feed shows.
    peers.onChangesLost(() => link.sync());
    peers.onResync(() => sockets.endKind('feed', 1012, 'the server reconnected to its cluster; reconnect'));
    await link.start();
    onClose(() => link.stop()); // after the sockets closed: their offline news goes out
  }

  // -- Start, in order; close stops in reverse order ------------------------------------------------
  await policies.load();
  onClose(() => policies.stop());
  await fleet.start();
  onClose(() => fleet.stop()); // lastSeen and certificates written, actor events delivered
  await summary.start();
  onClose(() => summary.stop());
  await roster.start();
  onClose(() => roster.stop());
  // Every announcement's handler is in place, and the full reads at start are done: follow the change log.
  cluster?.followChanges();
  await tokens.start();
  gateway.attach();
  onClose(() => gateway.flushLeaving()); // agents in their grace period are offline now
  onClose(() => tokens.stop()); // the token ledger drained and rolled up
  feed.attach();
  onClose(() => feed.stop());
  if (relay) {
    relay.start();
    onClose(() => relay.stop());
  }
  onClose(() => schedules.stop());
  await bridges.start();
  onClose(() => bridges.stop());
  login.start();
  onClose(() => login.stop());
  devices.start();
  onClose(() => devices.stop());

  const router = new Router({
    auth: createAuthPolicy({ sessions, publicUrl: () => config.publicUrl }),
    observe: ({ method, route, status, seconds, error }) => {
      metrics.observeHttp(method, route, status, seconds);
      if (error) log.error({ err: error, method, route, status }, 'request failed');
    },
    limits: rateLimits,
    limited: ({ group, per, key, address, waitMs }) => trips.tripped(LIMIT_GROUPS[group].settings[per] ?? group, key, address, waitMs),
    checkResponses: config.checkResponses
      ? (violation) => log.error({ violation }, `${violation.method} ${violation.route} answered ${violation.problem}`)
      : undefined,
  });
  router.add(
    ...routeTable({
      config,
      store,
      inspector: new ActorInspector(actors, actorDirectory),
      cluster: cluster ? () => cluster!.status() : undefined,
      audit,
      identity,
      metrics,
      version,
      routes: () => router.routes(),
      userService,
      workspaceService,
      grants,
      skills,
      login,
      devices,
      personSessions,
      claims,
      invitations,
      fleet,
      policies,
      tokens,
      summary,
      tokenSeries,
      intents,
      views,
      models,
      llmConfig,
      channels,
      bridges,
      workflows,
      schedules,
    }),
  );

  // Running workflow runs resume and schedules are re-armed once every route exists. The executor
  // stops first at close: agent sockets are already closing then, and an intent they abandon must
  // count as interrupted at the next start.
  await runs.start();
  onClose(() => runs.stop());
  await schedules.start();
  // Cluster mode: this node's share of the shards, each one's actors restored as it is taken.
  if (cluster) {
    const node = cluster;
    await node.startShards();
    // First at close: commands for this node's actors wait for the shards' next owners rather than reach stopping services.
    onClose(() => node.placement.stopServing());
  }

  attachHttp(app, router, {
    bodyLimitBytes: config.bodyLimitBytes,
    log,
    baseHeaders: { 'x-content-type-options': 'nosniff', 'cache-control': 'no-store' },
    clientAddress: (peer, forwardedFor) => clientAddresses.of(peer, forwardedFor),
  });
  // The dashboard: GET/HEAD handlers uWS tries before the router's, yielding every API path to it.
  attachStatic(app, { dir: b.uiDir, log });

  listenSocket = (await b.listen(app)) || undefined;
  if (!listenSocket) return { portTaken: true };
  const port = uws.uws.us_socket_local_port(listenSocket as never);
  if (config.publicUrlDefaulted) config.publicUrl = `http://localhost:${port}`;

  const fleetParts = { service: fleet, policies, gateway: connections, tokens, intents, views, feed, summary, roster };
  return {
    steward: {
      ctx: {
        config,
        log,
        store,
        c,
        actors,
        metrics,
        router,
        secrets,
        identity,
        sessions,
        audit,
        sockets,
        defaultWorkspace,
        version,
        userService,
        workspaceService,
        claims,
        placement,
        agentPush: connections,
        agents,
        cluster,
        agentIntents: intents,
        skills,
        workflows: runs,
        schedules,
        fleet: fleetParts,
      },
      port,
      url: `http://127.0.0.1:${port}`,
      close,
    },
  };
}
