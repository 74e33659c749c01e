/**
 * Where a CPU profile's time goes, by the kinds of work docs/performance.md tabulates:
 *
 *   node --import tsx bench/profile-summary.ts <file.cpuprofile> [more…]
 *
 * Each sample counts for the first frame, from the leaf up, that a rule below names (a native
 * call such as a socket write counts for the JavaScript that made it); samples no rule names are
 * "other Steward code"; idle time and the profiler's own work are left out of the shares.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

interface Frame {
  functionName: string;
  url: string;
}
interface Profile {
  nodes: Array<{ id: number; callFrame: Frame; children?: number[] }>;
  samples: number[];
  timeDeltas: number[];
}

/** The profiler's own work (starting and stopping it, writing the profile): left out like idle time. */
export const PROFILER = '(the profiler itself)';

/** In order: the first that matches a frame names its kind. */
const RULES: Array<[string, (f: Frame) => boolean]> = [
  [PROFILER, (f) => f.url === 'node:inspector' || /\/bench\/profiler\.js$/.test(f.url)],
  ['garbage collection', (f) => f.functionName === '(garbage collector)'],
  ['JSON', (f) => (f.url === '' && /^(parse|stringify)$/.test(f.functionName)) || /\/(json-text|json-depth)\.js$/.test(f.url)],
  ['validation', (f) => /node_modules\/(zod|ajv)\//.test(f.url) || /\/domain\/(wire-schemas|json-schema-view)\.js$/.test(f.url)],
  ['auth and crypto', (f) => /\/(http\/auth|services\/sessions|domain\/ed25519|domain\/crypto-worker|ws\/agent\/handshake|ws\/agent\/offers|services\/certificates)\.js$/.test(f.url)],
  ['rate limiting', (f) => /\/services\/(rate-limits|registration-limits)\.js$/.test(f.url)],
  ['metrics', (f) => /node_modules\/prom-client\//.test(f.url) || /\/http\/metrics\.js$/.test(f.url)],
  ['logging', (f) => /node_modules\/pino/.test(f.url) || /\/src\/log\.js$/.test(f.url)],
  ['feed', (f) => /\/ws\/feed[^/]*\.js$/.test(f.url) || /\/services\/(presence-feed|feed-rights)\.js$/.test(f.url)],
  ['store', (f) => /\/src\/store\//.test(f.url) || /node_modules\/(@seald-io\/nedb|mongodb)\//.test(f.url) || /node:internal\/fs\//.test(f.url)],
  ['actor', (f) => /\/src\/actors\//.test(f.url) || /\/(raise|StateMachine|xstate)[^/]*\.js$/.test(f.url)],
  ['HTTP and WebSocket (uWS, router, frames)', (f) => /\/src\/http\/|\/src\/ws\/agent\/(connection|connections|frames|gateway)\.js$|\/src\/app\/routes/.test(f.url)],
];

/** Milliseconds per kind of work in one profile (idle and the profiler's own bookkeeping apart). */
export function summarize(p: Profile): Map<string, number> {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const kindOf = new Map<number, string>();
  const kind = (id: number): string => {
    let k = kindOf.get(id);
    if (k !== undefined) return k;
    const f = byId.get(id)!.callFrame;
    if (f.functionName === '(idle)' || f.functionName === '(program)' || f.functionName === '(root)') k = f.functionName;
    else {
      k = RULES.find(([, test]) => test(f))?.[0] ?? '';
      if (!k) {
        const up = parent.get(id);
        k = up === undefined || byId.get(up)!.callFrame.functionName === '(root)' ? (f.url.includes('/src/') || f.url.includes('/dist/') ? 'other Steward code' : 'other (Node, libraries)') : kind(up);
      }
    }
    kindOf.set(id, k);
    return k;
  };
  const ms = new Map<string, number>();
  for (let i = 0; i < p.samples.length; i++) {
    const k = kind(p.samples[i]!);
    ms.set(k, (ms.get(k) ?? 0) + (p.timeDeltas[i] ?? 0) / 1000);
  }
  return ms;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  for (const file of process.argv.slice(2)) {
    const ms = summarize(JSON.parse(readFileSync(file, 'utf8')) as Profile);
    const counted = [...ms].filter(([k]) => k !== '(idle)' && k !== PROFILER);
    const busy = counted.reduce((a, [, v]) => a + v, 0);
    console.log(`\n${file}: ${busy.toFixed(0)} ms busy on the main thread, ${(ms.get('(idle)') ?? 0).toFixed(0)} ms idle`);
    for (const [k, v] of counted.sort((a, b) => b[1] - a[1])) {
      console.log(`  ${k.padEnd(44)} ${v.toFixed(0).padStart(7)} ms ${((100 * v) / busy).toFixed(1).padStart(5)} %`);
    }
  }
}
