/**
 * `steward agent`: a small demo agent on the SDK (src/agent/), to watch registration, approval,
 * certificates and intents end to end. It keeps its key in a file (created when missing), prints
 * its DID and every change of status, and answers intents by echoing their parameters.
 * It keeps trying to reach Steward (down, restarting, a wrong address), saying why each attempt
 * failed, and stops only on a close that means stop (rejected, replaced, refused key, protocol error).
 *
 * Exit codes: 0 stopped (Ctrl-C), 1 failed or refused (rejected, replaced, bad signature).
 */
import { resolve } from 'node:path';
import { StewardAgent } from '../agent/agent.js';
import type { Disconnection } from '../agent/disconnection.js';
import { fileGateState } from '../agent/gates.js';
import { loadOrCreateKeys } from '../agent/keys.js';
import { CAPABILITIES, type Capability } from '../domain/capabilities.js';
import { CLOSE } from '../domain/agent-protocol.js';
import { stewardCommand } from '../domain/cli-command.js';

export const AGENT_USAGE = `usage: steward agent [options]

Runs a demo agent that registers with a Steward server, waits for approval, co-signs its
certificate, sends heartbeats and answers intents by echoing their parameters. It keeps trying
to reach Steward whatever goes wrong, saying why, and exits 1 only when Steward tells it to stop
(registration rejected, replaced by another instance with the same key, key refused).

options:
  --url URL                 Steward's address (default $STEWARD_URL, else http://localhost:8080)
  --key FILE                the agent's key file, created when missing (default ./steward-agent.json);
                            the gates' counters are kept beside it (FILE without .json + .gates.json)
  --name NAME               the agent's name (default demo-agent)
  --capabilities a,b        capabilities to request (default api_call,file_access)
  --workspace W             workspace id or slug to register into (default: the default workspace)
`;

interface Io {
  out: (s: string) => void;
  err: (s: string) => void;
}

const stdio: Io = { out: (s) => process.stdout.write(s), err: (s) => process.stderr.write(s) };

function parse(argv: string[]): Record<string, string> {
  const flags: Record<string, string> = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--help' || a === '-h' || a === 'help') flags.help = '1';
    else if (a.startsWith('--')) {
      const [k, v] = a.includes('=') ? [a.slice(2, a.indexOf('=')), a.slice(a.indexOf('=') + 1)] : [a.slice(2), argv[++i]];
      if (v === undefined) throw new Error(`--${k} needs a value`);
      flags[k] = v;
    } else throw new Error(`unexpected argument '${a}'`);
  }
  return flags;
}

/** Runs the demo agent until SIGINT/SIGTERM (or `signal` aborts); resolves to the exit code. */
export async function agentCommand(argv: string[], env: NodeJS.ProcessEnv = process.env, io: Io = stdio, signal?: AbortSignal): Promise<number> {
  let flags: Record<string, string>;
  try {
    flags = parse(argv);
  } catch (err) {
    io.err(`steward agent: ${(err as Error).message}\n\n${AGENT_USAGE}`);
    return 1;
  }
  if (flags.help) {
    io.out(AGENT_USAGE);
    return 0;
  }
  const capabilities = (flags.capabilities ?? 'api_call,file_access').split(',').map((c) => c.trim()).filter(Boolean);
  const unknown = capabilities.filter((c) => !(CAPABILITIES as readonly string[]).includes(c));
  if (unknown.length > 0) {
    io.err(`steward agent: unknown capabilities ${unknown.join(', ')}; expected some of ${CAPABILITIES.join(', ')}\n`);
    return 1;
  }
  // Every line says when (UTC, as the CLI's tables do): an agent runs for days.
  const say = (text: string) => io.out(`${new Date().toISOString().slice(0, 19).replace('T', ' ')}Z ${text}`);
  const url = flags.url ?? env.STEWARD_URL ?? 'http://localhost:8080';
  const keyFile = resolve(flags.key ?? 'steward-agent.json');
  const { keys, created } = await loadOrCreateKeys(keyFile);
  say(`${created ? 'created' : 'using'} key ${keyFile}\n`);
  say(`DID ${keys.did}\n`);
  const gatesFile = `${keyFile.replace(/\.json$/, '')}.gates.json`;

  const agent = new StewardAgent({
    url,
    keys,
    name: flags.name ?? 'demo-agent',
    version: '1.0.0',
    capabilities: capabilities as Capability[],
    workspace: flags.workspace,
    gateState: fileGateState(gatesFile),
    onIntent: ({ action, params, requestedBy }) => {
      say(`intent ${action} from ${requestedBy}: answering with an echo\n`);
      return { echo: params, action, at: new Date().toISOString() };
    },
    onLlmConfig: (config) => say(`llm_config: ${config.model ? `${config.provider ?? ''} ${config.model}` : '(none)'}\n`),
    onSkillsConfig: (skills) => say(`skills_config: ${skills.map((s) => s.name).join(', ') || '(none)'}\n`),
    onChannelMessage: async ({ message, reply }) => {
      say(`channel message: ${message.content}\n`);
      await reply(`echo: ${message.content}`).catch((err: Error) => io.err(`reply failed: ${err.message}\n`));
    },
  });
  agent.on('status', (s: string) => {
    if (s === 'connecting' || s === 'reconnecting') return; // the connection lines below say it
    if (s === 'pending') {
      say(
        `status pending: registration ${agent.registrationId} awaits approval.\n` +
          `  approve it on the dashboard's Registrations page, or: ${stewardCommand(env)} registrations approve ${agent.registrationId} --capabilities ${capabilities.join(',')}\n`,
      );
    } else say(`status ${s}\n`);
  });
  agent.on('certificate', (c: { certificate: { serial: string; capabilities: string[]; policyId: string | null } }) =>
    say(`certificate ${c.certificate.serial}: capabilities ${c.certificate.capabilities.join(', ') || '(none)'}; policy ${c.certificate.policyId ?? 'none'}\n`),
  );
  agent.on('intentRefused', (f: { action: string; error: string }) => say(`intent ${f.action} refused: ${f.error}\n`));
  say(`connecting to ${url}\n`);
  agent.start();

  return new Promise<number>((done) => {
    let finished = false;
    const finish = (code: number) => {
      if (finished) return;
      finished = true;
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
      agent.stop().then(
        () => done(code),
        (err: unknown) => {
          io.err(`steward agent: closing the socket failed: ${(err as Error).message}\n`);
          done(code);
        },
      );
    };
    const onSignal = () => finish(0);
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
    if (signal?.aborted) finish(0);
    signal?.addEventListener('abort', () => finish(0));
    agent.on('disconnected', (d: Disconnection) => {
      if (d.willRetry) {
        say(`${d.code === null ? 'cannot connect' : 'disconnected'}: ${d.message}; retrying in ${(d.retryInMs! / 1000).toFixed(1)} s (attempt ${d.attempt})\n`);
        return;
      }
      io.err(`steward agent: stopped: ${d.message}${stopAdvice(d.code)}\n`);
      finish(1);
    });
  });
}

/** What a person can do after a close that means stop. */
function stopAdvice(code: number | null): string {
  switch (code) {
    case CLOSE.rejected:
      return '. Steward will not take this key back; an admin can delete the agent (DELETE /api/agents/{did}) so that it registers anew';
    case CLOSE.replaced:
      return '. Is another instance running with the same key file?';
    case CLOSE.badSignature:
      return '. This key is not the one the agent is registered with';
    default:
      return '';
  }
}
