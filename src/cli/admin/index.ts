/**
 * The admin commands of `steward` (docs/cli.md): login and logout, then agents, registrations,
 * policies, intents, workflows and the audit log through the HTTP API with the saved session.
 * Each command group is a file beside this one that adds its commands to the program; this file
 * parses (commander), runs, and turns every outcome into an exit code (errors.ts).
 */
import { Command, CommanderError } from 'commander';
import { CliError, EXIT } from './errors.js';
import type { Io } from './output.js';
import { Context } from './context.js';
import { registerSession } from './login.js';
import { registerAgents } from './agents.js';
import { registerRegistrations } from './registrations.js';
import { registerPolicies } from './policies.js';
import { registerIntents } from './intents.js';
import { registerWorkflows } from './workflows.js';
import { registerAudit } from './audit.js';

export { Context } from './context.js';

const stdio: Io = { out: (s) => process.stdout.write(s), err: (s) => process.stderr.write(s) };

export function buildProgram(ctx: Context): Command {
  const program = new Command(ctx.cmd)
    .description('Steward admin commands')
    .exitOverride()
    .showSuggestionAfterError()
    .configureOutput({
      writeOut: ctx.io.out,
      writeErr: ctx.io.err,
      outputError: (s, write) => write(s.replace(/^error: /, 'steward: ')),
    });
  registerSession(program, ctx);
  registerAgents(program, ctx);
  registerRegistrations(program, ctx);
  registerPolicies(program, ctx);
  registerIntents(program, ctx);
  registerWorkflows(program, ctx);
  registerAudit(program, ctx);
  return program;
}

/** Runs one admin command (`argv` starts with its group); resolves to the exit code. */
export async function runAdmin(argv: string[], env: NodeJS.ProcessEnv = process.env, io: Io = stdio): Promise<number> {
  const ctx = new Context(env, io);
  try {
    await buildProgram(ctx).parseAsync(argv, { from: 'user' });
    return EXIT.ok;
  } catch (err) {
    // Help asked for exits 0; anything else commander refuses (unknown command or option, missing
    // argument, a group without its subcommand) is a usage error, already explained on stderr.
    if (err instanceof CommanderError) return err.exitCode === 0 ? EXIT.ok : EXIT.usage;
    if (err instanceof CliError) {
      io.err(`steward: ${err.message}\n`);
      return err.exitCode;
    }
    io.err(`steward: ${err instanceof Error ? err.message : String(err)}\n`);
    return EXIT.failed;
  }
}
