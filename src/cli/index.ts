#!/usr/bin/env -S MALLOC_ARENA_MAX=2 node --max-semi-space-size=4
/**
 * The `steward` command.
 *   steward serve        run the server (configuration from the environment; docs/configuration.md)
 *   steward wallet ...   a key file for people: create, did, claim, login (src/cli/wallet.ts)
 *   steward agent ...    a demo agent on the SDK (src/cli/agent.ts)
 *   steward login, agents, registrations, ...   admin commands over the HTTP API (src/cli/admin/)
 *   steward help         this text
 */
import { ADMIN_COMMANDS } from './admin/names.js';

const USAGE = `usage: steward <command>

server:
  serve          run the Steward server (configured by environment variables, docs/configuration.md)

identity:
  wallet         create a wallet key, claim an account (steward wallet help)
  login          log in to a server with your wallet key; the session is saved for the commands below
  logout         end the saved session
  whoami         who the saved session is, on which server

administration (docs/cli.md):
  agents         list agents, show one
  registrations  agents awaiting approval: list, approve, reject
  policies       capability policies: list, create, revoke
  intents        send an intent to an agent
  workflows      workflows: list, run, runs, cancel
  audit          the activity log

demo:
  agent          run a demo agent: registers, waits for approval, echoes intents (steward agent --help)

help:
  help [command] show this text, or a command's help (also: steward <command> --help)

Admin commands print tables, or the API's JSON with --json. Exit codes: 0 ok, 1 failed (the server's
or the agent's refusal), 2 usage error, 3 not logged in or session expired, 4 not found, 5 server unreachable.
`;

async function main(argv: string[]): Promise<void> {
  const [cmd = 'serve', ...rest] = argv;
  switch (cmd) {
    case 'serve': {
      // Imported on use, so that `steward wallet` does not load the server.
      const { serve } = await import('../main.js');
      return serve();
    }
    case 'wallet': {
      const { wallet } = await import('./wallet.js');
      process.exitCode = await wallet(rest);
      return;
    }
    case 'agent': {
      const { agentCommand } = await import('./agent.js');
      process.exitCode = await agentCommand(rest);
      return;
    }
    case 'help':
    case '--help':
    case '-h':
      if (rest[0] && ADMIN_COMMANDS.has(rest[0])) {
        const { runAdmin } = await import('./admin/index.js');
        process.exitCode = await runAdmin([...rest, '--help']);
        return;
      }
      process.stdout.write(USAGE);
      return;
    default:
      if (ADMIN_COMMANDS.has(cmd)) {
        // Imported on use, like the others: the admin commands load neither the server nor the SDK.
        const { runAdmin } = await import('./admin/index.js');
        process.exitCode = await runAdmin([cmd, ...rest]);
        return;
      }
      process.stderr.write(`steward: unknown command '${cmd}'\n\n${USAGE}`);
      process.exitCode = 2;
  }
}

await main(process.argv.slice(2));
