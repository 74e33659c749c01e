#!/usr/bin/env node
/**
 * The `steward` command.
 *   steward serve        run the server (configuration from the environment; see README)
 *   steward help         this text
 */
import { serve } from '../main.js';

const USAGE = `usage: steward <command>

commands:
  serve      run the Steward server (configured by environment variables, see README)
  help       show this text
`;

async function main(argv: string[]): Promise<void> {
  const [cmd = 'serve', ...rest] = argv;
  switch (cmd) {
    case 'serve':
      return serve();
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
