/**
 * What the benchmark drivers (bench/run.ts, bench/channels.ts) share: command-line options and
 * the tables they print.
 */
const argv = process.argv.slice(2);

/** `--name N` on the command line, else the environment variable, else the default. */
export function flag(name: string, env: string, def: number): number {
  const i = argv.indexOf(`--${name}`);
  const v = i >= 0 ? argv[i + 1] : process.env[env];
  return v === undefined ? def : Number(v);
}

/** The benchmark named on the command line (the first word that is not an option or its value). */
export const which = argv.find((a) => !a.startsWith('--') && !/^\d+$/.test(a)) ?? 'all';

export const fmt = (n: number, digits: number) => (Number.isFinite(n) ? n.toFixed(digits) : 'n/a');

/** Nearest-rank percentile of an ascending list (NaN when it is empty). */
export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

/** Prints a Markdown table of measures under a heading. */
export function table(title: string, rows: Array<[string, string]>): void {
  const w = Math.max(...rows.map(([k]) => k.length), 7);
  console.log(`\n### ${title}\n`);
  console.log(`| ${'Measure'.padEnd(w)} | Value |`);
  console.log(`|${'-'.repeat(w + 2)}|-------|`);
  for (const [k, v] of rows) console.log(`| ${k.padEnd(w)} | ${v} |`);
}

/**
 * A table row of CPU per operation (µs, all the server's threads) against the floor's, measured in
 * the same run (bench/floor-server.ts): the ratio is the figure that moves least on a shared machine.
 */
export function floorRow(what: string, stewardUs: number, floorUs: number): [string, string] {
  return [`server CPU per ${what}, all threads: Steward / floor (ratio)`, `${fmt(stewardUs, 1)} / ${fmt(floorUs, 1)} µs (**×${fmt(stewardUs / floorUs, 2)}**)`];
}
