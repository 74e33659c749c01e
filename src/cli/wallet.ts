/**
 * `steward wallet`: a minimal wallet for people (DESIGN §3). It keeps one Ed25519 key in a file
 * (default ~/.steward/wallet.json, or STEWARD_WALLET_FILE; mode 0600), claims accounts from a
 * connection string, a wallet QR text or an invitation link, and approves browsers' sign-ins
 * (`steward login` signs the command line in with the same key). The private key never
 * leaves the file: nothing here prints it or sends it.
 *
 * Exit codes: 0 done, 1 failed (the reason on stderr).
 */
import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { didKeyFromPublicKey, generateKeyPair, signMessage, type Ed25519KeyPair } from '../domain/did.js';
import { claimMessage, loginMessage, parseClaimTarget } from '../domain/claims.js';
import { deviceMessage, parseApprovalTarget } from '../domain/device-codes.js';
import { stewardCommand } from '../domain/cli-command.js';
import { CLI_USER_AGENT } from './user-agent.js';

export const WALLET_USAGE = `usage: steward wallet <command> [options]

commands:
  create [--force]             create a new Ed25519 key and print its did:key
  did                          print the DID of the wallet
  claim <text> [--name NAME]   claim an account; <text> is a connection string (claim URL),
                               a wallet QR text ({walletUrl}/#<connectionString>&protocol=p2p&...)
                               or an invitation link ({server}/api/invitations/<token>)
  approve <server URL> <code>  sign a browser in as you: the user code it shows (or the verification URL
                               of its QR code alone); shows which browser asks, then asks you to confirm
    --yes                      approve without asking (scripts)
    --deny                     refuse the browser's request instead

To sign the command line in with the wallet's key: steward login <server URL> (steward login --help).

options:
  --file F                     the wallet file (default: $STEWARD_WALLET_FILE, else ~/.steward/wallet.json)
`;

interface WalletFile {
  version: 1;
  did: string;
  /** Raw Ed25519 public key, base64url. */
  publicKey: string;
  /** Raw Ed25519 private seed, base64url. */
  privateKey: string;
  createdAt: string;
}

export class WalletError extends Error {}

interface Io {
  out: (s: string) => void;
  err: (s: string) => void;
  /** One line typed by the person; null when there is none (standard input ended). */
  ask: (prompt: string) => Promise<string | null>;
}

const stdio: Io = { out: (s) => process.stdout.write(s), err: (s) => process.stderr.write(s), ask: askLine };

/** Writes `prompt` to standard error and reads one line from standard input (null at its end). */
async function askLine(prompt: string): Promise<string | null> {
  const { createInterface } = await import('node:readline');
  const rl = createInterface({ input: process.stdin, output: process.stderr, terminal: Boolean(process.stdin.isTTY) });
  return new Promise((resolve) => {
    let answered = false;
    rl.on('close', () => answered || resolve(null));
    rl.question(prompt, (line) => {
      answered = true;
      rl.close();
      resolve(line);
    });
  });
}

/** Runs `steward wallet ...`; resolves to the exit code. */
export async function wallet(argv: string[], env: NodeJS.ProcessEnv = process.env, io: Io = stdio): Promise<number> {
  try {
    const { positional, flags } = parseArgs(argv, ['file', 'name'], ['force', 'help', 'yes', 'deny']);
    const [cmd, ...args] = positional;
    const file = walletPath(env, flags.file);
    if (!cmd || cmd === 'help' || flags.help) {
      io.out(WALLET_USAGE);
      return cmd || flags.help ? 0 : 1;
    }
    switch (cmd) {
      case 'create': {
        const keys = await createWallet(file, Boolean(flags.force));
        io.out(`${keys.did}\n`);
        io.err(`wallet written to ${file}\n`);
        return 0;
      }
      case 'did':
        io.out(`${(await loadWallet(file)).did}\n`);
        return 0;
      case 'claim': {
        if (args.length !== 1) throw new WalletError('claim needs exactly one argument: the connection string, QR text or invitation link');
        const keys = await loadWallet(file);
        const r = await claim(keys, args[0]!, flags.name);
        io.out(`claimed ${r.did} on ${r.base}\n`);
        return 0;
      }
      case 'login': {
        const st = stewardCommand(env);
        const server = args[0] ?? '<server URL>';
        throw new WalletError(
          `'wallet login' does not sign this command line in: run '${st} login ${server}' (the session is saved for every command), ` +
            `or '${st} login ${server} --print-token' for a session token in a script`,
        );
      }
      case 'approve': {
        let target;
        try {
          target = parseApprovalTarget(args);
        } catch (err) {
          throw new WalletError(`approve: ${(err as Error).message}`);
        }
        if (flags.yes && flags.deny) throw new WalletError('approve: --yes and --deny cannot be given together');
        const keys = await loadWallet(file);
        return await approve(keys, target, { yes: Boolean(flags.yes), deny: Boolean(flags.deny) }, io);
      }
      default:
        throw new WalletError(`unknown wallet command '${cmd}'\n\n${WALLET_USAGE}`);
    }
  } catch (err) {
    io.err(`steward wallet: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  }
}

/** The wallet file: `--file`, else $STEWARD_WALLET_FILE, else ~/.steward/wallet.json. */
export function walletPath(env: NodeJS.ProcessEnv, flag?: string): string {
  return resolve(flag || env.STEWARD_WALLET_FILE || join(env.HOME || homedir(), '.steward', 'wallet.json'));
}

function parseArgs(argv: string[], valued: string[], booleans: string[]) {
  const positional: string[] = [];
  const flags: Record<string, string | undefined> & { force?: string; help?: string; yes?: string; deny?: string } = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '-h') {
      flags.help = 'true';
      continue;
    }
    if (!a.startsWith('--')) {
      positional.push(a);
      continue;
    }
    const [name, inline] = a.slice(2).split(/=(.*)/s, 2) as [string, string | undefined];
    if (booleans.includes(name)) flags[name] = 'true';
    else if (valued.includes(name)) {
      const v = inline ?? argv[++i];
      if (v === undefined) throw new WalletError(`--${name} needs a value`);
      flags[name] = v;
    } else throw new WalletError(`unknown option --${name}`);
  }
  return { positional, flags };
}

export async function createWallet(file: string, force: boolean): Promise<Ed25519KeyPair> {
  const keys = generateKeyPair();
  const doc: WalletFile = { version: 1, ...keys, createdAt: new Date().toISOString() };
  await mkdir(dirname(file), { recursive: true, mode: 0o700 });
  try {
    await writeFile(file, `${JSON.stringify(doc, null, 2)}\n`, { mode: 0o600, flag: force ? 'w' : 'wx' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') {
      throw new WalletError(`${file} already exists; use --force to replace it (the old key is then lost)`);
    }
    throw err;
  }
  await chmod(file, 0o600); // an overwritten file keeps its old mode otherwise
  return keys;
}

export async function loadWallet(file: string): Promise<Ed25519KeyPair> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
      throw new WalletError(`no wallet at ${file}; create one with 'steward wallet create'`);
    }
    throw err;
  }
  let doc: Partial<WalletFile>;
  try {
    doc = JSON.parse(text) as Partial<WalletFile>;
  } catch {
    throw new WalletError(`${file} is not a wallet file (not JSON)`);
  }
  if (typeof doc.did !== 'string' || typeof doc.publicKey !== 'string' || typeof doc.privateKey !== 'string') {
    throw new WalletError(`${file} is not a wallet file (did, publicKey and privateKey expected)`);
  }
  const pub = Buffer.from(doc.publicKey, 'base64url');
  if (pub.length !== 32 || didKeyFromPublicKey(pub) !== doc.did) {
    throw new WalletError(`${file} is damaged: its DID does not match its public key`);
  }
  return { did: doc.did, publicKey: doc.publicKey, privateKey: doc.privateKey };
}

/** Claims an account with the wallet's key; follows an invitation link through from-email first. */
export async function claim(keys: Ed25519KeyPair, input: string, name?: string): Promise<{ did: string; base: string }> {
  let target;
  try {
    target = parseClaimTarget(input);
  } catch (err) {
    throw new WalletError((err as Error).message);
  }
  if (target.kind === 'invitation') {
    const r = await call<{ connectionString: string; serverDid: string }>('POST', `${target.base}/api/users/invite/from-email`, {
      token: target.token,
    });
    const next = parseClaimTarget(r.connectionString);
    if (next.kind !== 'claim') throw new WalletError('the server answered with an unexpected connection string');
    target = { ...next, serverDid: r.serverDid };
  }
  const info = await call<{ nonce: string; serverDid: string; expiresAt: string }>('GET', target.claimUrl);
  if (target.serverDid && info.serverDid !== target.serverDid) {
    throw new WalletError(`refusing to claim: the server says its DID is ${info.serverDid}, but the QR names ${target.serverDid}`);
  }
  const signature = signMessage(keys, claimMessage(target.token, info.nonce));
  const r = await call<{ ok: boolean; did: string }>('POST', target.claimUrl, {
    did: keys.did,
    publicKey: keys.publicKey,
    signature,
    ...(name ? { name } : {}),
  });
  return { did: r.did, base: target.base };
}

/** Logs in with the wallet's key; returns the session token. */
export async function login(keys: Ed25519KeyPair, serverUrl: string): Promise<string> {
  let base: string;
  try {
    const u = new URL(serverUrl);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error();
    base = (u.origin + u.pathname).replace(/\/+$/, '');
  } catch {
    throw new WalletError(`not a server URL: ${serverUrl}`);
  }
  const ch = await call<{ challengeId: string; nonce: string }>('POST', `${base}/api/auth/challenge`, { did: keys.did });
  const signature = signMessage(keys, loginMessage(ch.nonce));
  const r = await call<{ token: string }>('POST', `${base}/api/auth/login`, { challengeId: ch.challengeId, did: keys.did, signature });
  return r.token;
}

interface ApprovalInfo {
  nonce: string;
  userAgent: string | null;
  address: string | null;
  requestedAt: string;
  expiresAt: string;
}

/**
 * Device approval: signs in as the wallet's person, shows which browser asks (its user agent and
 * address, when it asked), asks for confirmation (unless `yes` or `deny`), then signs
 * `steward-device:<userCode>:<nonce>` and approves, or refuses. The session it signed in with
 * for this is ended afterwards. Exit code 0 when approved or refused as asked, 1 otherwise.
 */
export async function approve(
  keys: Ed25519KeyPair,
  target: { base: string; userCode: string },
  opts: { yes: boolean; deny: boolean },
  io: Io,
): Promise<number> {
  const { base, userCode } = target;
  const token = await login(keys, base);
  try {
    const url = `${base}/api/auth/device/${userCode}`;
    const info = await call<ApprovalInfo>('GET', `${url}/approve`, undefined, token);
    io.out(
      [
        `A browser asks to be signed in to ${base} as you (${keys.did}):`,
        `  Code:      ${userCode}`,
        `  Browser:   ${info.userAgent ?? '(it did not say)'}`,
        `  Address:   ${info.address ?? '(unknown)'}`,
        `  Asked at:  ${info.requestedAt} (the code expires at ${info.expiresAt})`,
        '',
      ].join('\n'),
    );
    let decision: 'approve' | 'deny' | null = opts.deny ? 'deny' : opts.yes ? 'approve' : null;
    if (!decision) {
      io.out('Approve only a browser you are using yourself, right now: whoever uses it acts as you.\n');
      const answer = (await io.ask('Approve this sign-in? y = approve, n = refuse it, anything else = leave it: '))?.trim().toLowerCase();
      decision = answer === 'y' || answer === 'yes' ? 'approve' : answer === 'n' || answer === 'no' ? 'deny' : null;
    }
    if (decision === 'deny') {
      await call('POST', `${url}/deny`, {}, token);
      io.out('Refused: the browser is not signed in.\n');
      return 0;
    }
    if (decision === null) {
      io.err('steward wallet: not approved (no answer); nothing was sent. Use --yes to approve without asking, or --deny to refuse.\n');
      return 1;
    }
    const signature = signMessage(keys, deviceMessage(userCode, info.nonce));
    await call('POST', `${url}/approve`, { signature }, token);
    io.out('Approved: the browser is signed in as you.\n');
    return 0;
  } finally {
    // The session this command signed in with is not needed any more.
    await call('POST', `${base}/api/auth/logout`, {}, token).catch(() => undefined);
  }
}

async function call<T>(method: 'GET' | 'POST', url: string, body?: unknown, token?: string): Promise<T> {
  let res: Response;
  try {
    res = await fetch(url, {
      method,
      headers: {
        'user-agent': CLI_USER_AGENT,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...(token ? { authorization: `Bearer ${token}` } : {}),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (err) {
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    throw new WalletError(`cannot reach ${new URL(url).origin}: ${cause?.code ?? cause?.message ?? (err as Error).message}`);
  }
  const text = await res.text();
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  if (!res.ok) {
    const e = (json as { error?: { code?: string; message?: string } } | undefined)?.error;
    throw new WalletError(`${method} ${new URL(url).pathname.replace(/\/api\/(user\/claim|invitations|auth\/device)\/[^/]+/, '/api/$1/…')} failed: ${res.status}${e ? ` ${e.code}: ${e.message}` : ''}`);
  }
  if (json === undefined) throw new WalletError(`${method} ${new URL(url).pathname} answered ${res.status} without JSON`);
  return json as T;
}
