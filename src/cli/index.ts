#!/usr/bin/env -S MALLOC_ARENA_MAX=2 node --max-semi-space-size=4
/**
 * The `steward` command.
 *   steward serve        run the server (configuration from the environment; see README)
 *   steward wallet ...   a key file for people: create, did, claim, login (src/cli/wallet.ts)
 *   steward agent ...    a demo agent on the SDK (src/cli/agent.ts)
 *   steward help         this text
 */
const USAGE = `usage: steward <command>

commands:
  serve      run the Steward server (configured by environment variables, see README)
  wallet     create a wallet key, claim an account, log in (steward wallet help)
  agent      run a demo agent: registers, waits for approval, echoes intents (steward agent --help)
  help       show this text
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
      process.stdout.write(USAGE);
      return;
    default:
      process.stderr.write(`steward: unknown command '${cmd}'\n\n${USAGE}`);
      process.exitCode = 2;
      void rest;
  }
}

await main(process.argv.slice(2));
