/** A runner fixture: notes when its one test starts and ends in RUNNER_TRACE (runner.test.ts reads the order). */
import { appendFileSync } from 'node:fs';
import { test } from 'uvu';


test('notes its start and its end', async () => {
  appendFileSync(process.env.RUNNER_TRACE!, 'beside start\n');
  // Long enough that two files started together overlap.
  await new Promise((r) => setTimeout(r, 1000));
  appendFileSync(process.env.RUNNER_TRACE!, 'beside end\n');
});

test.run();
