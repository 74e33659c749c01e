/**
 * CPU profiles of a benchmark process (BENCH_PROFILE_DIR): `profile` without a file starts one,
 * `profile` with a file stops it and writes the .cpuprofile there, with an allocation profile
 * (sampled, collected objects included) beside it as .heapprofile.
 */
import { Session } from 'node:inspector/promises';
import { writeFile } from 'node:fs/promises';

let session: Session | undefined;

export async function profileCommand(file: string | undefined): Promise<void> {
  if (!file) {
    session = new Session();
    session.connect();
    await session.post('Profiler.enable');
    await session.post('Profiler.start');
    // Allocation sampling, counting what the garbage collector took again too (what churns).
    await session.post('HeapProfiler.startSampling', { samplingInterval: 16384, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true } as never);
    return;
  }
  if (!session) throw new Error('no profile is running');
  const { profile } = await session.post('Profiler.stop');
  await writeFile(file, JSON.stringify(profile));
  const { profile: heap } = await session.post('HeapProfiler.stopSampling');
  await writeFile(file.replace(/\.cpuprofile$/, '') + '.heapprofile', JSON.stringify(heap));
  session.disconnect();
  session = undefined;
}
