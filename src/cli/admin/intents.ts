/**
 * `steward intents send <agent> <action>`: POST /api/agents/{did}/intents, which waits for the
 * agent's intent_result. An agent that refuses (ok: false, e.g. a gate of its policy) makes the
 * command fail (exit 1) with the agent's words; --json still prints the answer.
 */
import type { Command } from 'commander';
import { agentDid } from './resolve.js';
import { int, jsonObject, jsonOption } from './options.js';
import { CliError, EXIT } from './errors.js';
import { json } from './output.js';
import type { Context } from './context.js';

interface IntentAnswer {
  intentId: string;
  ok: boolean;
  output?: unknown;
  error?: string;
}

export function registerIntents(program: Command, ctx: Context): void {
  const intents = program.command('intents').summary('send an intent to an agent').description('Intents: ask a connected agent to act.');

  intents
    .command('send')
    .summary('send an intent and print the answer')
    .description(
      "Sends an intent to a connected agent and prints its answer (POST /api/agents/{did}/intents). The action is a capability;\n" +
        'the agent checks it against its certificate and policy. Exit 1 when the agent refuses or fails it.',
    )
    .argument('<agent>', "the agent's DID, or its name when only one agent you may see has it")
    .argument('<action>', 'the action (a capability, e.g. api_call)')
    .option('-p, --params <json>', 'parameters, a JSON object (default {})', jsonObject)
    .option('-t, --timeout <ms>', 'how long to wait for the answer (the server default otherwise, 30 s)', int(100))
    .addOption(jsonOption())
    .action(async (ref: string, action: string, o: { params?: Record<string, unknown>; timeout?: number; json?: boolean }) => {
      const api = await ctx.api();
      const did = await agentDid(api, ref);
      const r = await api.post<IntentAnswer>(`/api/agents/${encodeURIComponent(did)}/intents`, {
        action,
        params: o.params ?? {},
        ...(o.timeout !== undefined ? { timeoutMs: o.timeout } : {}),
      });
      if (o.json) ctx.io.out(json(r));
      else if (r.ok) ctx.io.out(`Intent ${r.intentId}: ok\n${r.output === undefined ? '' : json(r.output)}`);
      if (!r.ok) throw new CliError(EXIT.failed, `the agent refused intent ${r.intentId}: ${r.error ?? '(no reason given)'}`);
    });
}
