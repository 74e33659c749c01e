/**
 * How fast and how steady the machine is at the moment, read before the benchmarks run and
 * printed with their tables. On a shared virtual machine both change from day to day and from
 * minute to minute (the same code measured 1.9 s in (b) on one day and 3.3 s on another), so a
 * figure means little without the reading taken beside it:
 *
 * - the speed: Ed25519 signatures and verifications with Node's OpenSSL on one core;
 * - the steadiness: a thread per core spins, reading the clock, for a few seconds; every jump of
 *   the clock over 1 ms is time that core was taken away (by the hypervisor or another process).
 *   A server loses the same time, and a stall of 50 ms in (d) is 1,000 heartbeats late.
 */
import { Worker } from 'node:worker_threads';
import { availableParallelism } from 'node:os';
import { generateKeyPairSync, sign, verify } from 'node:crypto';
import { readFileSync } from 'node:fs';

export interface MachineReading {
  signUs: number;
  verifyUs: number;
  cores: number;
  /** Share of the spinning time the cores were taken away (jumps over 1 ms), in %. */
  lostPct: number;
  /** Longest jump, ms. */
  maxGapMs: number;
  /** Jumps over 5 ms, all cores together. */
  gapsOver5: number;
  spinMs: number;
}

const SPIN = `
const { parentPort, workerData } = require('node:worker_threads');
const end = performance.now() + workerData.ms;
let last = performance.now(), lost = 0, max = 0, over5 = 0;
for (;;) {
  const t = performance.now();
  if (t > end) break;
  const gap = t - last;
  if (gap > 1) { lost += gap; if (gap > max) max = gap; if (gap > 5) over5++; }
  last = t;
}
parentPort.postMessage({ lost, max, over5 });
`;

interface Spin {
  lost: number;
  max: number;
  over5: number;
}

function spin(ms: number): Promise<Spin> {
  return new Promise((resolve, reject) => {
    const w = new Worker(SPIN, { eval: true, workerData: { ms } });
    w.once('message', (m: Spin) => resolve(m));
    w.once('error', reject);
  });
}

/** Microseconds per call of fn, over `n` calls. */
function timeEach(n: number, fn: () => void): number {
  const t0 = performance.now();
  for (let i = 0; i < n; i++) fn();
  return ((performance.now() - t0) * 1000) / n;
}

export async function readMachine(spinMs = 3000): Promise<MachineReading> {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const message = Buffer.alloc(456, 0x61); // about a certificate's canonical text
  const signature = sign(null, message, privateKey);
  timeEach(50, () => verify(null, message, publicKey, signature)); // warm-up
  const signUs = timeEach(400, () => sign(null, message, privateKey));
  const verifyUs = timeEach(400, () => verify(null, message, publicKey, signature));
  const cores = availableParallelism();
  const spins = await Promise.all(Array.from({ length: cores }, () => spin(spinMs)));
  return {
    signUs,
    verifyUs,
    cores,
    lostPct: (100 * spins.reduce((a, s) => a + s.lost, 0)) / (spinMs * cores),
    maxGapMs: Math.max(...spins.map((s) => s.max)),
    gapsOver5: spins.reduce((a, s) => a + s.over5, 0),
    spinMs,
  };
}

/** The reading as table rows. */
export function machineRows(m: MachineReading): Array<[string, string]> {
  return [
    ['Ed25519 with OpenSSL, one core: sign / verify', `${m.signUs.toFixed(0)} / ${m.verifyUs.toFixed(0)} µs (a quiet day here: about 46 / 136 µs)`],
    [
      `cores taken away while ${m.cores} threads spun for ${(m.spinMs / 1000).toFixed(0)} s`,
      `${m.lostPct.toFixed(1)} % of the time, longest ${m.maxGapMs.toFixed(1)} ms, ${m.gapsOver5} stalls over 5 ms`,
    ],
  ];
}

/** The machine's CPU time so far by kind (Linux /proc/stat, in clock ticks); null elsewhere. */
export interface CpuTimes {
  busy: number;
  softirq: number;
  steal: number;
  idle: number;
}

export function readCpuTimes(): CpuTimes | null {
  let line: string | undefined;
  try {
    line = readFileSync('/proc/stat', 'latin1').split('\n').find((l) => l.startsWith('cpu '));
  } catch {
    return null;
  }
  if (!line) return null;
  // user nice system idle iowait irq softirq steal
  const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = line.trim().split(/\s+/).slice(1).map(Number);
  return { busy: user + nice + system + irq, softirq, steal, idle: idle + iowait };
}

/**
 * How long this process's main thread (its event loop) has waited, runnable, for a core so far
 * (ms; Linux /proc/<pid>/task/<pid>/schedstat, its second field); null elsewhere. Time the loop was
 * ready to run but the scheduler gave the core to another process (the load generators share the
 * two cores with the server): it adds to every latency the server measures for itself.
 */
export function readRunQueueWaitMs(): number | null {
  try {
    const fields = readFileSync(`/proc/${process.pid}/task/${process.pid}/schedstat`, 'latin1').trim().split(/\s+/);
    const ns = Number(fields[1]);
    return Number.isFinite(ns) ? ns / 1e6 : null;
  } catch {
    return null;
  }
}

/**
 * A table row: how the machine's CPU time went between two readings, in % of all its cores.
 * "Stolen" is time the hypervisor gave the virtual CPUs to something else although they had work;
 * on this VM it grows with the loopback traffic (up to 40 % of both cores in (d)).
 */
export function cpuTimesRow(a: CpuTimes | null, b: CpuTimes | null): [string, string] {
  const label = 'the machine over the phase: busy / softirq / stolen by the hypervisor / idle';
  if (!a || !b) return [label, 'n/a'];
  const d = { busy: b.busy - a.busy, softirq: b.softirq - a.softirq, steal: b.steal - a.steal, idle: b.idle - a.idle };
  const total = d.busy + d.softirq + d.steal + d.idle;
  const pct = (x: number) => `${total > 0 ? ((100 * x) / total).toFixed(0) : 'n/a'} %`;
  return [label, `${pct(d.busy)} / ${pct(d.softirq)} / ${pct(d.steal)} / ${pct(d.idle)}`];
}
