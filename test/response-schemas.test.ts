/**
 * What routes answer: every operation of the OpenAPI document carries the schema of its success
 * answers, the router refuses (500, logged) an answer that does not match what its route declares
 * when STEWARD_CHECK_RESPONSES is on (every test server has it on), and the JSON Schema files
 * derived from zod schemas are the committed ones.
 */
import { readFileSync } from 'node:fs';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { z } from 'zod';
import { rawResponse, route, type RouteDef } from '../src/http/router.js';
import { derivedSchemaFiles } from '../src/http/schema-files.js';
import { http, logLines, startServer, type TestServer } from './helpers.js';

const test = suite('response schemas');
const log = logLines();
let s: TestServer;
let unchecked: TestServer;

const Thing = z.strictObject({ id: z.string(), count: z.number().int().min(0), tags: z.array(z.string()) });

/** Routes that answer what they declare, and routes that do not (the cast stands for a bug the types did not catch). */
function testRoutes(): RouteDef[] {
  const wrong = <T>(value: unknown) => value as T;
  return [
    route({ method: 'GET', path: '/test/answers/good', auth: 'public', summary: 'matches', responses: { 200: Thing }, handler: () => ({ body: { id: 'a', count: 1, tags: [] } }) }),
    route({
      method: 'GET',
      path: '/test/answers/wrong-type',
      auth: 'public',
      summary: 'count is a string',
      responses: { 200: Thing },
      handler: () => ({ body: wrong<z.input<typeof Thing>>({ id: 'a', count: '1', tags: [] }) }),
    }),
    route({
      method: 'GET',
      path: '/test/answers/extra-field',
      auth: 'public',
      summary: 'a field the view does not have',
      responses: { 200: Thing },
      handler: () => ({ body: wrong<z.input<typeof Thing>>({ id: 'a', count: 1, tags: [], secret: 'x' }) }),
    }),
    route({
      method: 'POST',
      path: '/test/answers/other-status',
      auth: 'public',
      summary: 'answers a status it does not declare',
      responses: { 201: Thing },
      handler: () => ({ status: 200, body: { id: 'a', count: 1, tags: [] } }),
    }),
    route({
      method: 'GET',
      path: '/test/answers/raw',
      auth: 'public',
      summary: 'answers HTML where it declares SVG',
      responses: { 200: rawResponse('image/svg+xml', 'an image') },
      handler: () => ({ raw: { contentType: 'text/html; charset=utf-8', data: '<p>hi</p>' } }),
    }),
  ];
}

test.before(async () => {
  s = await startServer({ LOG_LEVEL: 'error' }, undefined, { logTo: log.sink });
  s.ctx.router.add(...testRoutes());
  unchecked = await startServer({ STEWARD_CHECK_RESPONSES: '0' });
  unchecked.ctx.router.add(...testRoutes());
});

test.after(async () => {
  await s?.stop(true);
  await unchecked?.stop(true);
});

/** Takes the violations the router recorded, so that the deliberate ones do not fail this file at its end. */
const takeViolations = () => s.ctx.router.violations.splice(0);

test('an answer that matches its declared schema goes out as it is', async () => {
  const r = await http(s.url, 'GET', '/test/answers/good');
  assert.is(r.status, 200);
  assert.equal(r.body, { id: 'a', count: 1, tags: [] });
  assert.equal(takeViolations(), []);
});

test('an answer its schema refuses is a logged 500 naming the route and the field', async () => {
  const cases: Array<[string, string, RegExp]> = [
    ['GET', '/test/answers/wrong-type', /GET \/test\/answers\/wrong-type answered 200 with a body its schema refuses: count: .*expected number/],
    ['GET', '/test/answers/extra-field', /GET \/test\/answers\/extra-field answered 200 with a body its schema refuses: .*secret/],
    ['POST', '/test/answers/other-status', /POST \/test\/answers\/other-status answered status 200, which it does not declare \(it declares 201\)/],
    ['GET', '/test/answers/raw', /GET \/test\/answers\/raw answered 200 as text\/html; charset=utf-8, where it declares image\/svg\+xml/],
  ];
  for (const [method, path, message] of cases) {
    const before = log.lines.length;
    const r = await http(s.url, method, path);
    assert.is(r.status, 500, `${method} ${path}`);
    assert.is(r.body.error.code, 'response_schema_violation');
    assert.match(r.body.error.message, message);
    const violations = takeViolations();
    assert.is(violations.length, 1, `${method} ${path}: one violation recorded`);
    assert.is(violations[0]!.route, path);
    const logged = log.lines.slice(before).map((l) => JSON.parse(l) as { level: number | string; msg: string });
    assert.ok(
      logged.some((l) => (l.level === 50 || l.level === 'error') && message.test(l.msg)),
      `${method} ${path}: logged as an error (${JSON.stringify(logged)})`,
    );
  }
  // A failed check does not leak the body it refused.
  const r = await http(s.url, 'GET', '/test/answers/extra-field');
  assert.not.ok(r.text.includes('"x"'));
  takeViolations();
});

test('without STEWARD_CHECK_RESPONSES the same answers go out unchecked', async () => {
  const r = await http(unchecked.url, 'GET', '/test/answers/wrong-type');
  assert.is(r.status, 200);
  assert.equal(r.body, { id: 'a', count: '1', tags: [] });
  assert.equal(unchecked.ctx.router.violations, []);
});

test('every operation of /api/openapi.json carries a schema for each success status its route declares', async () => {
  const r = await http(s.url, 'GET', '/api/openapi.json');
  assert.is(r.status, 200);
  const paths = r.body.paths as Record<string, Record<string, { responses: Record<string, { content?: Record<string, { schema?: Record<string, unknown> }> }> }>>;
  const byOperation = new Map(s.ctx.router.routes().map((d) => [`${d.method.toLowerCase()} ${d.path.replace(/:([A-Za-z0-9_]+)/g, '{$1}')}`, d]));
  let operations = 0;
  for (const [path, ops] of Object.entries(paths)) {
    for (const [method, op] of Object.entries(ops)) {
      operations++;
      const name = `${method} ${path}`;
      const def = byOperation.get(name);
      assert.ok(def, `${name} is a route of the table`);
      const success = Object.keys(op.responses).filter((status) => /^2\d\d$/.test(status));
      assert.ok(success.length > 0, `${name} documents a success answer`);
      assert.equal(success.sort(), Object.keys(def!.responses).sort(), `${name}: the statuses its route declares`);
      for (const status of success) {
        const content = Object.entries(op.responses[status]!.content ?? {});
        assert.is(content.length, 1, `${name} ${status} has one media type`);
        const [mediaType, { schema }] = content[0]!;
        assert.ok(schema && Object.keys(schema).length > 0, `${name} ${status} (${mediaType}) has a schema`);
        if (mediaType === 'application/json') assert.ok(schema.$ref !== undefined || schema.type !== undefined || schema.anyOf !== undefined, `${name} ${status}: a JSON Schema of the body`);
      }
    }
  }
  // Every route of the table is an operation (the test routes above included), the API's 118 among them.
  assert.is(operations, byOperation.size);
  assert.ok(operations - testRoutes().length >= 118, `${operations - testRoutes().length} operations of the API`);
});

test('the JSON Schema files derived from zod schemas are the committed ones (npm run schemas)', () => {
  const files = derivedSchemaFiles();
  assert.equal(files.map((f) => f.path).sort(), ['schemas/agent/skills_config.schema.json', 'schemas/error.schema.json']);
  for (const { path, text } of files) assert.fixture(readFileSync(new URL(`../${path}`, import.meta.url), 'utf8'), text, path);
});

test.run();
