// A suite that takes a store target: the runner runs it on the embedded store, then on the stand-in.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { backend, storeKind } from '../store-backend.js';

test('runs on the store of its pass', async () => {
  const b = await backend();
  console.log(`store kind: ${storeKind}, backend: ${b.kind}`);
  assert.is(b.kind, storeKind === 'embedded' ? 'embedded' : 'mongodb');
  await b.drop();
});

test.run();
