/**
 * Helpers for the admin CLI suites: a person's own home directory (a wallet with their key, a
 * config directory of their own), the `steward` command run there as a real child process, and
 * the checks every suite makes on what it printed.
 */
import * as assert from 'uvu/assert';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Ed25519KeyPair } from '../src/domain/did.js';
import { tempDir } from './helpers.js';
import { LONG, runCli, type CliResult } from './cli-process.js';

export type { CliResult };

export interface CliHome {
  home: string;
  /** $XDG_CONFIG_HOME, or null: the command then falls back to ~/.config. */
  xdg: string | null;
  /** Everything it printed, to search for secrets afterwards. */
  outputs: CliResult[];
  run(...args: string[]): Promise<CliResult>;
}

/** A home directory whose wallet (~/.steward/wallet.json) holds `keys`. */
export async function cliHome(keys?: Ed25519KeyPair, opts: { xdg?: boolean } = {}): Promise<CliHome> {
  const home = await tempDir('steward-home-');
  const xdg = opts.xdg === false ? null : join(home, 'xdg-config');
  if (keys) {
    await mkdir(join(home, '.steward'), { recursive: true, mode: 0o700 });
    const wallet = { version: 1, ...keys, createdAt: new Date().toISOString() };
    await writeFile(join(home, '.steward', 'wallet.json'), JSON.stringify(wallet), { mode: 0o600 });
  }
  const outputs: CliResult[] = [];
  return {
    home,
    xdg,
    outputs,
    async run(...args: string[]) {
      const r = await runSteward(args, { HOME: home, ...(xdg ? { XDG_CONFIG_HOME: xdg } : {}) });
      outputs.push(r);
      return r;
    },
  };
}

/** `steward <args>` as a child process with only this environment besides PATH and the Node options. */
export function runSteward(args: string[], env: Record<string, string>): Promise<CliResult> {
  return runCli(args, env, LONG, { isolated: true });
}

/** Exit 0 and the JSON it printed. */
export function ok<T = any>(r: CliResult): T {
  assert.is(r.code, 0, `exit ${r.code}: ${r.stderr}`);
  assert.is(r.stderr, '', 'nothing on stderr');
  return JSON.parse(r.stdout) as T;
}

/** The given exit code, and an error in words on stderr: `steward: <message>`, no JSON. */
export function fails(r: CliResult, code: number, message: RegExp | string): void {
  assert.is(r.code, code, `exit ${r.code} (stdout ${r.stdout}; stderr ${r.stderr})`);
  assert.match(r.stderr, /^steward: /);
  if (typeof message === 'string') assert.ok(r.stderr.includes(message), `stderr: ${r.stderr}`);
  else assert.match(r.stderr, message);
  assert.not.match(r.stderr, /[{}]/, 'the error is in words, not JSON');
}

/** The rows of a printed table as cells, cut at the header's column starts (every column but the last is padded to it). */
export function tableRows(text: string, headers: string[]): Array<Record<string, string>> {
  const lines = text.split('\n');
  const at = lines.findIndex((l) => headers.every((h) => l.includes(h)));
  assert.ok(at >= 0, `no table with ${headers.join(', ')} in:\n${text}`);
  const header = lines[at]!;
  const starts = headers.map((h) => header.indexOf(h));
  assert.equal([...starts].sort((a, b) => a - b), starts, 'columns in order');
  const rows: Array<Record<string, string>> = [];
  for (const line of lines.slice(at + 1)) {
    if (!line.trim() || line.startsWith('page ') || /^\d+ pending/.test(line)) break;
    const row: Record<string, string> = {};
    headers.forEach((h, i) => {
      const end = i + 1 < starts.length ? starts[i + 1]! : undefined;
      if (i > 0) assert.is(line[starts[i]! - 1], ' ', `column ${h} starts after a blank in: ${line}`);
      row[h] = line.slice(starts[i], end).trim();
    });
    rows.push(row);
  }
  return rows;
}
