/**
 * `npm run bench -- compare <git ref> [bench…] [--pairs P] [options]`: this tree against another
 * commit. The ref is checked out in a temporary worktree (sharing this tree's node_modules), then
 * each bench runs alternately on the two (new first in odd pairs, old first in even ones, so a
 * machine growing busier or quieter does not favour one), at least two pairs, each run a process
 * of its own with the same options. Each figure both print is shown with its ratio new / old (of
 * the means) and the spread (the least and greatest ratio of a pair); a figure the same in every
 * run (a count the options set) is left out. Benches: those of
 * bench/run.ts, and `mentions` and `fanout` of bench/channels.ts; default: heartbeat, reconnect,
 * recert, dashboard, mentions, fanout.
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { fmt } from './report.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const DEFAULT_BENCHES = ['heartbeat', 'reconnect', 'recert', 'dashboard', 'mentions', 'fanout'];

/** The script and its bench name for each bench compare knows. */
function command(bench: string): string[] {
  if (bench === 'mentions') return ['bench/channels.ts', 'mentions'];
  if (bench === 'fanout') return ['bench/channels.ts', 'feed'];
  return ['bench/run.ts', bench];
}

/** Runs one bench in `dir`; its output goes to the terminal as it comes and is returned. */
function runBench(dir: string, bench: string, options: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', ...command(bench), ...options], { cwd: dir, stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      process.stdout.write(d);
    });
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`${bench} in ${dir} ended with ${code}`))));
  });
}

/** Each number in a bench's table rows (not those inside a word, as in p99): "table › measure" (and " [k]" for the k-th number of a value holding several) -> it. */
export function figures(output: string): Map<string, number> {
  const out = new Map<string, number>();
  let title = '';
  for (const line of output.split('\n')) {
    if (line.startsWith('### ')) title = line.slice(4).replace(/\d[\d,.]*/g, '#').slice(0, 40);
    const m = /^\| (.+?) +\| (.*) \|$/.exec(line);
    if (!m || m[1] === 'Measure' || title.startsWith('the machine')) continue;
    const numbers = m[2]!.replace(/\*\*/g, '').match(/(?<![A-Za-z\d.])-?\d[\d,]*(\.\d+)?/g) ?? [];
    numbers.forEach((n, k) => out.set(`${title} › ${m[1]!.trim()}${numbers.length > 1 ? ` [${k + 1}]` : ''}`, Number(n.replace(/,/g, ''))));
  }
  return out;
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

export async function benchCompare(argv: string[]): Promise<void> {
  const at = argv.indexOf('compare');
  const ref = argv[at + 1];
  if (!ref || ref.startsWith('--')) {
    console.error('usage: npm run bench -- compare <git ref> [bench…] [--pairs P] [bench options]');
    process.exit(2);
  }
  const rest = argv.slice(at + 2);
  const benches: string[] = [];
  const options: string[] = [];
  let pairs = 2;
  for (let i = 0; i < rest.length; i++) {
    const a = rest[i]!;
    if (a === '--pairs') pairs = Math.max(2, Number(rest[++i]));
    else if (a.startsWith('--')) options.push(a, rest[++i] ?? '');
    else benches.push(a);
  }
  if (benches.length === 0) benches.push(...DEFAULT_BENCHES);
  const commit = execFileSync('git', ['rev-parse', '--short', ref], { cwd: root, encoding: 'utf8' }).trim();
  const dir = mkdtempSync(join(tmpdir(), `steward-compare-${commit}-`));
  execFileSync('git', ['worktree', 'add', '--detach', dir, commit], { cwd: root, stdio: 'inherit' });
  try {
    if (!existsSync(join(dir, 'node_modules'))) symlinkSync(join(root, 'node_modules'), join(dir, 'node_modules'));
    const results: Array<{ bench: string; rows: Array<[string, number[], number[]]> }> = [];
    for (const bench of benches) {
      const runs: Record<'new' | 'old', Array<Map<string, number>>> = { new: [], old: [] };
      for (let p = 0; p < pairs; p++) {
        const order: Array<'new' | 'old'> = p % 2 === 0 ? ['new', 'old'] : ['old', 'new'];
        for (const side of order) {
          console.log(`\n## compare: ${bench}, pair ${p + 1} of ${pairs}, ${side === 'new' ? 'this tree' : commit}\n`);
          runs[side].push(figures(await runBench(side === 'new' ? root : dir, bench, options)));
        }
      }
      // Figures both print, less those that are the same in every run (counts set by the options).
      const labels = [...runs.new[0]!.keys()].filter((k) => {
        const all = [...runs.new, ...runs.old].map((r) => r.get(k));
        return all.every((v) => v !== undefined) && all.some((v) => v !== all[0]);
      });
      results.push({ bench, rows: labels.map((k) => [k, runs.new.map((r) => r.get(k)!), runs.old.map((r) => r.get(k)!)]) });
    }
    console.log(`\n### compare: this tree (new) against ${commit} (old), ${pairs} pairs, options: ${options.join(' ') || 'none'}\n`);
    console.log('| bench | figure | new (each run) | old (each run) | new / old | spread (pairs) |');
    console.log('|---|---|---|---|---|---|');
    for (const { bench, rows } of results) {
      for (const [label, n, o] of rows) {
        const ratios = n.map((x, i) => x / o[i]!);
        const show = (xs: number[]) => xs.map((x) => fmt(x, 2)).join(', ');
        console.log(`| ${bench} | ${label} | ${show(n)} | ${show(o)} | **×${fmt(mean(n) / mean(o), 2)}** | ${fmt(Math.min(...ratios), 2)}–${fmt(Math.max(...ratios), 2)} |`);
      }
    }
  } finally {
    execFileSync('git', ['worktree', 'remove', '--force', dir], { cwd: root, stdio: 'inherit' });
    rmSync(dir, { recursive: true, force: true });
  }
}
