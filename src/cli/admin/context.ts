/** What every admin command gets: its environment and output, and the saved session's client. */
import { Api } from './client.js';
import { CliError, EXIT } from './errors.js';
import { json, type Io } from './output.js';
import { readSession } from './session.js';
import { stewardCommand, type StewardCommand } from '../../domain/cli-command.js';

export class Context {
  constructor(
    readonly env: NodeJS.ProcessEnv,
    readonly io: Io,
  ) {}

  /** The command as this process was started, for hints a person will run (`steward`, or `npm run steward --` in a checkout). */
  get cmd(): StewardCommand {
    return stewardCommand(this.env);
  }

  /** A client for the saved session's server; exit 3 when there is none. */
  async api(): Promise<Api> {
    const s = await readSession(this.env);
    if (!s) throw new CliError(EXIT.session, `not logged in: run '${this.cmd} login <server URL>' first`);
    return new Api(s.server, s.token, this.cmd);
  }

  /** `--json`: the value as JSON; else what `human` renders. */
  print(asJson: boolean | undefined, value: unknown, human: () => string): void {
    this.io.out(asJson ? json(value) : human());
  }
}

