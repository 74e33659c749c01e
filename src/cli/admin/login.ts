/**
 * `steward login <server>`, `steward logout`, `steward whoami`: the session the other commands
 * use. Login proves the wallet's key (DESIGN §3: challenge, then the signed `steward-login:`
 * nonce) and saves the session token with the server's URL (session.ts); the token is printed
 * only when asked (--print-token, for scripts), and then nothing is saved.
 */
import type { Command } from 'commander';
import { loginMessage } from '../../domain/claims.js';
import { signMessage } from '../../domain/did.js';
import { loadWallet, walletPath, WalletError } from '../wallet.js';
import { Api, serverUrl } from './client.js';
import { CliError, EXIT } from './errors.js';
import { details, list } from './output.js';
import { jsonOption } from './options.js';
import { readSession, removeSession, sessionFile, writeSession } from './session.js';
import type { Context } from './context.js';

interface LoginAnswer {
  token: string;
  user: { id: string; did: string; name: string; email: string; isOwner: boolean; isAdmin: boolean; role: string };
}

interface Me {
  user: { did: string; name: string; email: string; isAdmin: boolean };
  workspaces: Array<{ slug: string; role: string }>;
  grants: unknown[];
}

export function registerSession(program: Command, ctx: Context): void {
  program
    .command('login')
    .summary('log in to a Steward server with your wallet key')
    .description(
      "Logs in to a Steward server with the key of 'steward wallet' (a challenge signed by the key) and saves the session\n" +
        'and the server URL in $XDG_CONFIG_HOME/steward/session.json (else ~/.config/steward/session.json), mode 0600.\n' +
        'A session saved before is ended on its server first. The session token is printed only with --print-token.',
    )
    .argument('<server>', 'the server URL, e.g. http://localhost:8080')
    .option('--wallet <file>', 'the wallet file (default: $STEWARD_WALLET_FILE, else ~/.steward/wallet.json)')
    .option('--print-token', "print only a new session's token, for a script (TOKEN=$(steward login URL --print-token)); nothing is saved")
    .addOption(jsonOption())
    .action(async (server: string, opts: { wallet?: string; json?: boolean; printToken?: boolean }) => {
      const base = serverUrl(server);
      const file = walletPath(ctx.env, opts.wallet);
      let keys;
      try {
        keys = await loadWallet(file);
      } catch (err) {
        throw new CliError(EXIT.failed, err instanceof WalletError ? err.message : `cannot read the wallet ${file}: ${(err as Error).message}`);
      }
      const api = new Api(base, undefined, ctx.cmd);
      let answer: LoginAnswer;
      try {
        const ch = await api.post<{ challengeId: string; nonce: string }>('/api/auth/challenge', { did: keys.did });
        const signature = signMessage(keys, loginMessage(ch.nonce));
        answer = await api.post<LoginAnswer>('/api/auth/login', { challengeId: ch.challengeId, did: keys.did, signature });
      } catch (err) {
        if (err instanceof CliError && err.exitCode === EXIT.session) {
          throw new CliError(
            EXIT.failed,
            `${base} refused the login of ${keys.did}: this key is not a claimed account there (claim one with '${ctx.cmd} wallet claim <connection string>')`,
          );
        }
        if (err instanceof CliError && err.exitCode === EXIT.notFound) throw new CliError(EXIT.notFound, notSteward(base));
        throw err;
      }
      if (opts.printToken) return ctx.io.out(`${answer.token}\n`);
      const previous = await readSession(ctx.env);
      if (previous) await endQuietly(ctx, new Api(previous.server, previous.token));
      const saved = await writeSession(ctx.env, {
        server: base,
        token: answer.token,
        did: answer.user.did,
        name: answer.user.name,
        loggedInAt: new Date().toISOString(),
      });
      ctx.print(opts.json, { server: base, user: answer.user }, () => {
        const who = `${answer.user.name} (${answer.user.did})${answer.user.isAdmin ? ', a global admin' : ''}`;
        return `Logged in to ${base} as ${who}.\nSession saved in ${saved}.\n`;
      });
    });

  program
    .command('logout')
    .summary('end the session on the server and forget it here')
    .description(
      'Ends the saved session on its server (POST /api/auth/logout) and removes it from this machine. When the server\n' +
        'cannot be reached the session is kept, so that logout can be tried again; --force removes it here anyway.',
    )
    .option('--force', 'remove the saved session even when the server cannot end it')
    .addOption(jsonOption())
    .action(async (opts: { force?: boolean; json?: boolean }) => {
      const saved = await readSession(ctx.env);
      if (!saved) throw new CliError(EXIT.session, 'not logged in');
      const api = new Api(saved.server, saved.token);
      let answer: unknown = { ok: true };
      let note = '';
      try {
        answer = await api.post('/api/auth/logout');
      } catch (err) {
        if (err instanceof CliError && err.exitCode === EXIT.session) {
          note = ' (the session had already ended there)';
        } else if (opts.force) {
          ctx.io.err(`steward: ${err instanceof Error ? err.message : String(err)}; the session may still be valid on the server until it expires\n`);
          note = ' here only';
        } else if (err instanceof CliError) {
          throw new CliError(err.exitCode, `${err.message}\nThe session is still saved in ${sessionFile(ctx.env)}: run '${ctx.cmd} logout' again, or '${ctx.cmd} logout --force' to remove it here anyway.`);
        } else throw err;
      }
      await removeSession(ctx.env);
      ctx.print(opts.json, answer, () => `Logged out of ${saved.server}${note}.\n`);
    });

  program
    .command('whoami')
    .summary('who the saved session is, on which server')
    .description('Shows the saved session: the server, and your profile there (GET /api/users/me).')
    .addOption(jsonOption())
    .action(async (opts: { json?: boolean }) => {
      const api = await ctx.api();
      const me = await api.get<Me>('/api/users/me');
      ctx.print(opts.json, me, () =>
        details([
          ['Server', api.server],
          ['Name', me.user.name],
          ['DID', me.user.did],
          ['Email', me.user.email],
          ['Global admin', me.user.isAdmin ? 'yes' : 'no'],
          ['Workspaces', list(me.workspaces.map((w) => `${w.slug} (${w.role})`))],
          ['Grants', String(me.grants.length)],
        ]),
      );
    });
}

/** A 404 from the login routes: the address is not Steward's base URL (often one with /api added). */
function notSteward(base: string): string {
  const u = new URL(base);
  const root = u.origin + u.pathname.replace(/\/api(\/.*)?$/, '');
  const hint = root !== base ? `: give the server's base URL, ${root}, not ${base}` : ' (is this a Steward server?)';
  return `no Steward login at ${base}/api/auth/challenge${hint}`;
}

/** Ends an earlier session before a new one replaces it; a failure is only reported. */
async function endQuietly(ctx: Context, api: Api): Promise<void> {
  try {
    await api.post('/api/auth/logout');
  } catch (err) {
    if (err instanceof CliError && err.exitCode === EXIT.session) return; // already ended
    ctx.io.err(`steward: could not end the earlier session on ${api.server}: ${err instanceof Error ? err.message : String(err)}\n`);
  }
}
