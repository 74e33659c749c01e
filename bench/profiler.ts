/**
 * CPU profiles of a benchmark process (BENCH_PROFILE_DIR): `profile` without a file starts one,
 * `profile` with a file stops it and writes the .cpuprofile there.
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
    return;
  }
  if (!session) throw new Error('no profile is running');
  const { profile } = await session.post('Profiler.stop');
  await writeFile(file, JSON.stringify(profile));
  session.disconnect();
  session = undefined;
}
