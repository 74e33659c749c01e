import { startServer } from './helpers.js';
import { fleetOf } from '../src/services/fleet-module.js';
const s = await startServer();
const t = fleetOf(s.ctx).tokens;
const lat: number[] = [];
const end = Date.now() + 5000;
while (Date.now() < end) {
  for (let i = 0; i < 20; i++) { const t0 = performance.now(); t.record('did:key:z6Mk' + i, 1, 12, 3, () => lat.push(performance.now() - t0), () => true); }
  await new Promise((r) => setTimeout(r, 10));
}
await new Promise((r) => setTimeout(r, 200));
lat.sort((a, b) => a - b);
console.log('n', lat.length, 'p50', lat[lat.length >> 1].toFixed(2), 'p99', lat[Math.floor(lat.length * 0.99)].toFixed(2), 'max', lat[lat.length - 1].toFixed(2), 'writes', t.stats.ledgerWrites);
await s.stop(true);
