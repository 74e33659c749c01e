/**
 * Assembles the fleet area in one place, in a fixed order: the fleet service (agent actors,
 * registrations, certificates, sessions), the policy service, the agent gateway on /ws/agent,
 * token usage, intents, the agents API views, and the people's live feed on /ws/feed. Later areas
 * reach connected agents through `ctx.agentPush` (llm_config, skills_config,
 * channel_message_send) and `ctx.agentIntents` (workflows): both are provided here.
 */
import type { AppContext } from '../server.js';
import { FleetService } from './fleet.js';
import { PolicyService } from './policies.js';
import { TokenUsage } from './token-usage.js';
import { IntentService } from './intents.js';
import { AgentViews } from './agent-views.js';
import { AgentGateway } from '../ws/agent-gateway.js';
import { Feed } from '../ws/feed.js';

export interface Fleet {
  service: FleetService;
  policies: PolicyService;
  gateway: AgentGateway;
  tokens: TokenUsage;
  intents: IntentService;
  views: AgentViews;
  feed: Feed;
}

/** Builds the fleet, registers its WebSocket routes and its shutdown hooks. Call before the HTTP catch-all is attached. */
export async function createFleet(ctx: AppContext): Promise<Fleet> {
  const service = new FleetService(ctx);
  const policies = new PolicyService(ctx, service);
  const gateway = new AgentGateway(ctx, service);
  policies.gateway = gateway;
  const tokens = new TokenUsage(ctx);
  gateway.heartbeats = tokens;
  const intents = new IntentService(ctx, gateway);
  const views = new AgentViews(ctx, service, gateway, tokens);
  const feed = new Feed(ctx);
  const fleet: Fleet = { service, policies, gateway, tokens, intents, views, feed };

  // A deleted agent's usage stays in the global totals; its own usage document goes.
  service.onAgentDeleted((agent) => tokens.forgetAgent(agent._id));
  ctx.agentPush = gateway;
  ctx.agentIntents = intents;
  fleets.set(ctx, fleet);
  await policies.load();
  await service.start();
  await tokens.start();
  gateway.attach();
  feed.attach();

  // Close hooks run in reverse order: the feed stops, the token ledger drains and rolls up, then
  // lastSeen and certificates are written; the actor host flushes snapshots after all hooks.
  ctx.onClose(() => service.stop());
  ctx.onClose(() => gateway.flushLeaving());
  ctx.onClose(() => tokens.stop());
  ctx.onClose(() => feed.stop());
  return fleet;
}

const fleets = new WeakMap<AppContext, Fleet>();

/** The fleet of a running server (tests, benchmarks and tools reach its services here). */
export function fleetOf(ctx: AppContext): Fleet {
  const f = fleets.get(ctx);
  if (!f) throw new Error('this server has no fleet');
  return f;
}
