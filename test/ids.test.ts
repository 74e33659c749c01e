import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { newId } from '../src/domain/ids.js';

test('record ids never start with a dash (a command line would take one for an option), and keep nanoid\'s alphabet and length', () => {
  const seen = new Set<string>();
  for (let i = 0; i < 20_000; i++) {
    const id = newId();
    assert.match(id, /^[A-Za-z0-9_][A-Za-z0-9_-]{20}$/);
    seen.add(id);
  }
  assert.is(seen.size, 20_000);
});

test.run();
