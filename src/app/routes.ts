/** The route table: every route module, each given the services it calls. */
import type { RouteDef } from '../http/router.js';
import type { SystemDeps } from '../http/routes/system.js';
import type { Config } from '../config.js';
import type { AuditLog } from '../services/audit.js';
import type { ServerIdentity } from '../services/server-identity.js';
import { systemRoutes } from '../http/routes/system.js';
import { authRoutes } from '../http/routes/auth.js';
import { claimRoutes } from '../http/routes/claims.js';
import { deviceRoutes } from '../http/routes/device.js';
import { meSessionRoutes } from '../http/routes/me-sessions.js';
import { invitationRoutes } from '../http/routes/invitations.js';
import { userRoutes } from '../http/routes/users.js';
import { workspaceRoutes } from '../http/routes/workspaces.js';
import { grantRoutes } from '../http/routes/grants.js';
import { auditRoutes } from '../http/routes/audit.js';
import { agentRoutes } from '../http/routes/agents.js';
import { policyRoutes } from '../http/routes/policies.js';
import { fleetAdminRoutes } from '../http/routes/fleet-admin.js';
import { fleetDataRoutes } from '../http/routes/fleet-data.js';
import type { ActorInspector } from '../services/actor-inspector.js';
import { skillRoutes } from '../http/routes/skills.js';
import { modelRoutes } from '../http/routes/models.js';
import { llmConfigRoutes } from '../http/routes/llm-config.js';
import { channelRoutes } from '../http/routes/channels.js';
import { messageRoutes } from '../http/routes/messages.js';
import { bridgeRoutes } from '../http/routes/bridges.js';
import { workflowRoutes } from '../http/routes/workflows.js';
import { scheduleRoutes } from '../http/routes/schedules.js';
import type { LoginService } from '../services/login.js';
import type { UserService } from '../services/users.js';
import type { WorkspaceService } from '../services/workspaces.js';
import type { GrantService } from '../services/grants.js';
import type { SkillService } from '../services/skills.js';
import type { ClaimService } from '../services/claims.js';
import type { DeviceApprovals } from '../services/device-approvals.js';
import type { PersonSessions } from '../services/person-sessions.js';
import type { InvitationService } from '../services/invitations.js';
import type { FleetService } from '../services/fleet.js';
import type { PolicyService } from '../services/policies.js';
import type { TokenUsage } from '../services/token-usage.js';
import type { TokenSeries } from '../services/token-series.js';
import type { FleetSummary } from '../services/fleet-summary.js';
import type { IntentService } from '../services/intents.js';
import type { AgentViews } from '../services/agent-views.js';
import type { ModelCatalogue } from '../services/model-catalogue.js';
import type { AgentLlmConfig } from '../services/llm-config.js';
import type { ChannelService } from '../services/channels.js';
import type { BridgeService } from '../services/bridges.js';
import type { WorkflowService } from '../services/workflows.js';
import type { ScheduleService } from '../services/schedules.js';

export interface RouteServices extends SystemDeps {
  config: Config;
  inspector: ActorInspector;
  audit: AuditLog;
  identity: ServerIdentity;
  userService: UserService;
  workspaceService: WorkspaceService;
  grants: GrantService;
  skills: SkillService;
  login: LoginService;
  devices: DeviceApprovals;
  personSessions: PersonSessions;
  claims: ClaimService;
  invitations: InvitationService;
  fleet: FleetService;
  policies: PolicyService;
  tokens: TokenUsage;
  summary: FleetSummary;
  tokenSeries: TokenSeries;
  intents: IntentService;
  views: AgentViews;
  models: ModelCatalogue;
  llmConfig: AgentLlmConfig;
  channels: ChannelService;
  bridges: BridgeService;
  workflows: WorkflowService;
  schedules: ScheduleService;
}

export function routeTable(s: RouteServices): RouteDef[] {
  return [
    ...systemRoutes({ config: s.config, version: s.version, store: s.store, metrics: s.metrics, routes: s.routes }),
    ...authRoutes({ login: s.login, config: s.config }),
    ...deviceRoutes({ devices: s.devices, config: s.config }),
    ...meSessionRoutes({ personSessions: s.personSessions }),
    ...claimRoutes({ claims: s.claims, identity: s.identity }),
    ...invitationRoutes({ invitations: s.invitations, claims: s.claims, identity: s.identity }),
    ...userRoutes({ users: s.userService }),
    ...workspaceRoutes({ workspaces: s.workspaceService }),
    ...grantRoutes({ grants: s.grants }),
    ...auditRoutes({ audit: s.audit }),
    ...agentRoutes({ fleet: s.fleet, views: s.views, intents: s.intents, config: s.config }),
    ...policyRoutes({ policies: s.policies }),
    ...fleetAdminRoutes({ tokens: s.tokens, inspector: s.inspector }),
    ...fleetDataRoutes({ summary: s.summary, series: s.tokenSeries }),
    ...skillRoutes({ skills: s.skills }),
    ...modelRoutes({ models: s.models }),
    ...llmConfigRoutes({ llmConfig: s.llmConfig }),
    ...channelRoutes({ channels: s.channels }),
    ...messageRoutes({ channels: s.channels }),
    ...bridgeRoutes({ bridges: s.bridges }),
    ...workflowRoutes({ workflows: s.workflows }),
    ...scheduleRoutes({ schedules: s.schedules }),
  ];
}
