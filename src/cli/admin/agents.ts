/**
 * `steward agents list|get`: GET /api/agents with its filters, GET /api/agents/{did}.
 */
import { Option, type Command } from 'commander';
import { agentDid } from './resolve.js';
import { capabilities, int, jsonOption } from './options.js';
import { details, list, table, time, yesNo, type Column } from './output.js';
import { usageError } from './errors.js';
import type { Context } from './context.js';

interface WorkspaceRef {
  id: string;
  name: string;
  slug: string;
}

interface AgentItem {
  id: string;
  name: string;
  capabilities: string[];
  capabilitiesInForce: string[] | null;
  llmProvider: string | null;
  llmModel: string | null;
  isOnline: boolean;
  registeredAt: string;
  lastSeen: string | null;
  workspace: WorkspaceRef | null;
}

interface AgentPage {
  agents: AgentItem[];
  total: number;
  page: number;
  pageSize: number;
  totalPages: number;
  online: number;
}

interface Tokens {
  promptTokens: number;
  completionTokens: number;
}

interface AgentDetail extends AgentItem {
  version: string;
  publicKey: string;
  workspaces: Array<WorkspaceRef & { isPrimary: boolean }>;
  policy: {
    id: string;
    scope: 'agent' | 'workspace';
    capabilities: string[];
    resourceLimits: Record<string, unknown> | null;
    expiresAt: string | null;
  } | null;
  certificate: { certificate: { serial: string; issuedAt: string; capabilities: string[] }; acceptedAt: string } | null;
  tokenUsage: { allTime: Tokens; daily: Tokens; monthly: Tokens };
}

const COLUMNS: Column<AgentItem>[] = [
  { header: 'DID', value: (a) => a.id },
  { header: 'NAME', value: (a) => a.name, max: 32 },
  { header: 'ONLINE', value: (a) => yesNo(a.isOnline) },
  { header: 'CAPABILITIES IN FORCE', value: (a) => capabilitiesText(a), max: 60 },
  { header: 'WORKSPACE', value: (a) => a.workspace?.slug ?? '' },
  { header: 'LAST SEEN', value: (a) => time(a.lastSeen) },
];

export function registerAgents(program: Command, ctx: Context): void {
  const agents = program.command('agents').summary('list agents, show one').description('Agents: list them with filters, show one.');

  agents
    .command('list')
    .summary('list agents (filters, pages)')
    .description('Lists the agents you may see (GET /api/agents), one page at a time.')
    .option('-q, --query <text>', 'name or DID contains this (case-insensitive)')
    .option('--online', 'only agents connected now')
    .option('--offline', 'only agents not connected now')
    .option('-w, --workspace <workspace>', 'only agents of this workspace (id or slug)')
    .option('-c, --capabilities <list>', 'only agents having all of these capabilities (comma-separated)', capabilities)
    .option('--page <n>', 'page number (default 1)', int(1))
    .option('--page-size <n>', 'agents per page (default 20, at most 100)', int(1, 100))
    .addOption(new Option('--sort-by <field>', 'sort by').choices(['name', 'registeredAt', 'lastSeen']))
    .addOption(new Option('--sort-dir <dir>', 'sort direction').choices(['asc', 'desc']))
    .addOption(jsonOption())
    .action(async (o: { query?: string; online?: boolean; offline?: boolean; workspace?: string; capabilities?: string[]; page?: number; pageSize?: number; sortBy?: string; sortDir?: string; json?: boolean }) => {
      if (o.online && o.offline) throw usageError('give --online or --offline, not both');
      const api = await ctx.api();
      const r = await api.get<AgentPage>('/api/agents', {
        q: o.query,
        online: o.online ? true : o.offline ? false : undefined,
        workspace: o.workspace,
        capabilities: o.capabilities?.join(','),
        page: o.page,
        pageSize: o.pageSize,
        sortBy: o.sortBy,
        sortDir: o.sortDir,
      });
      ctx.print(o.json, r, () => {
        const footer = `page ${r.page} of ${Math.max(r.totalPages, 1)}: ${r.total} agent${r.total === 1 ? '' : 's'}, ${r.online} online\n`;
        return r.agents.length === 0 ? `No agents match.\n${footer}` : `${table(COLUMNS, r.agents)}${footer}`;
      });
    });

  agents
    .command('get')
    .summary('show one agent')
    .description('Shows one agent (GET /api/agents/{did}): its workspaces, effective policy, certificate and token usage.')
    .argument('<agent>', "the agent's DID, or its name when only one agent you may see has it")
    .addOption(jsonOption())
    .action(async (ref: string, o: { json?: boolean }) => {
      const api = await ctx.api();
      const did = await agentDid(api, ref);
      const { agent: a } = await api.get<{ agent: AgentDetail }>(`/api/agents/${encodeURIComponent(did)}`);
      ctx.print(o.json, { agent: a }, () => {
        const t = a.tokenUsage;
        const cert = a.certificate;
        return details([
          ['DID', a.id],
          ['Name', a.name],
          ['Version', a.version],
          ['Online', yesNo(a.isOnline)],
          ['Capabilities in force', inForceText(a)],
          ...(differ(a) ? [['Approved', caps(a.capabilities)] as [string, string]] : []),
          ['Workspaces', list(a.workspaces.map((w) => (w.isPrimary ? `${w.slug} (primary)` : w.slug)))],
          ['Registered', time(a.registeredAt)],
          ['Last seen', time(a.lastSeen)],
          ['Model', a.llmProvider || a.llmModel ? `${a.llmProvider ?? '-'} / ${a.llmModel ?? '-'}` : ''],
          ['Policy', a.policy ? policyText(a.policy) : 'none (the capabilities approved at registration, no limits)'],
          ['Certificate', cert ? `serial ${cert.certificate.serial}, issued ${time(cert.certificate.issuedAt)}, co-signed ${time(cert.acceptedAt)}` : 'none'],
          ['Tokens', `today ${sum(t.daily)}, this month ${sum(t.monthly)}, all time ${sum(t.allTime)} (prompt + completion)`],
        ]);
      });
    });
}

/**
 * What the agent enforces now (its certificate's capabilities, as the dashboard shows them), and
 * beside it what was approved at registration when that differs (a policy narrowed or widened it).
 */
function capabilitiesText(a: AgentItem): string {
  return differ(a) ? `${inForceText(a)} (approved: ${caps(a.capabilities)})` : inForceText(a);
}

const caps = (xs: readonly string[]) => (xs.length > 0 ? xs.join(',') : 'none');
const inForceText = (a: AgentItem) => (a.capabilitiesInForce === null ? 'none yet (no certificate)' : caps(a.capabilitiesInForce));

const differ = (a: AgentItem) => a.capabilitiesInForce === null || [...a.capabilitiesInForce].sort().join() !== [...a.capabilities].sort().join();

function policyText(p: NonNullable<AgentDetail['policy']>): string {
  const limits = Object.entries(p.resourceLimits ?? {}).map(([k, v]) => `${k} ${Array.isArray(v) ? v.join(',') : String(v)}`);
  return [`${p.id} (${p.scope} policy): ${list(p.capabilities)}`, limits.length ? `limits: ${limits.join('; ')}` : 'no limits', p.expiresAt ? `expires ${time(p.expiresAt)}` : 'no expiry'].join('\n');
}

const sum = (t: Tokens) => (t.promptTokens + t.completionTokens).toLocaleString('en-US');
