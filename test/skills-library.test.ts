/**
 * The external skills library against a local HTTP server that plays both the catalogue and the
 * raw-content code host, and records every request it receives.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startServer, type TestServer } from './helpers.js';
import { makeUser, type TestUser } from './fixtures.js';
import { isError, makeWorkspace } from './people-helpers.js';
import { startWithOwner } from './fleet-helpers.js';
import { splitFrontMatter } from '../src/integrations/skills-library.js';
import { deadUrl, StandIn, type Answer } from './stand-in-server.js';

const test = suite('skills-library');

/** Path -> the stand-in catalogue's or code host's answer; anything else is 404. */
const files = new Map<string, Answer>();
let up: StandIn;
let s: TestServer;
let owner: TestUser;
let t0: number;
const clock = { now: 0 };

const CATALOGUE = '/catalogue.json';
const catalogueV1 = {
  skills: [
    {
      id: 'acme/skills/pdf',
      name: 'PDF',
      description: 'Reads PDFs',
      source: 'acme/skills',
      skillId: 'pdf',
      installs: 1234,
      githubStars: 56,
      repoUrl: 'https://code.example/acme/skills',
      standalone: true,
      contentType: 'skill',
    },
    { source: 'acme/tools', skill_id: 'lint', name: 'Lint', installs: '7', github_stars: 3, content_type: 'prompt' },
    { name: 'no source, left out' },
  ],
};
const ENTRY_KEYS = ['contentType', 'description', 'githubStars', 'id', 'installs', 'name', 'repoUrl', 'skillId', 'source', 'standalone'];

const setCatalogue = (body: unknown, status = 200) => files.set(CATALOGUE, { status, body: JSON.stringify(body) });
const catalogueCalls = () => up.to(CATALOGUE).length;
const fileCalls = () => up.received.map((r) => r.url).filter((p) => p !== CATALOGUE);

test.before(async () => {
  up = await StandIn.start({ respond: (r) => files.get(r.url) ?? { status: 404, body: 'Not Found' } });
  ({ s, owner } = await startWithOwner({ SKILLS_LIBRARY_URL: `${up.url}${CATALOGUE}`, SKILLS_CODE_HOST_URL: `${up.url}/raw/` }));
  t0 = Date.now();
  clock.now = t0;
  s.ctx.skills.library.now = () => clock.now;
});

test.after(async () => {
  await s.stop(true);
  await up.close();
});

// --- the catalogue -----------------------------------------------------------------------------------

test('catalogue: no copy at all and upstream failing -> 502 in the error shape', async () => {
  setCatalogue({ error: 'down' }, 500);
  const r = await owner.api.get('/api/skills/library');
  isError(r, 502, 'skills_library_unavailable');
  assert.match(r.body.error.message, /HTTP 500/);
  assert.not.ok(r.text.includes(up.url), 'the upstream address is not in the error');
  assert.is(catalogueCalls(), 1);
});

test('catalogue: entries with the ten documented fields, normalised; entries without a source left out', async () => {
  setCatalogue(catalogueV1);
  const r = await owner.api.get('/api/skills/library');
  assert.is(r.status, 200, r.text);
  assert.is(r.headers['x-skills-library-stale'], undefined);
  assert.ok(Array.isArray(r.body));
  assert.is(r.body.length, 2);
  for (const e of r.body) assert.equal(Object.keys(e).sort(), ENTRY_KEYS);
  assert.equal(r.body[0], catalogueV1.skills[0]);
  assert.equal(r.body[1], {
    id: 'acme/tools/lint',
    name: 'Lint',
    description: '',
    source: 'acme/tools',
    skillId: 'lint',
    installs: 7,
    githubStars: 3,
    repoUrl: 'https://github.com/acme/tools',
    standalone: false,
    contentType: 'prompt',
  });
});

test('catalogue: cached for one hour (one upstream call), then refreshed', async () => {
  const calls = catalogueCalls();
  setCatalogue({ skills: [{ source: 'acme/new', skillId: 'fresh' }] });
  for (let i = 0; i < 3; i++) assert.is((await owner.api.get('/api/skills/library')).body.length, 2);
  clock.now = t0 + 59 * 60_000;
  assert.is((await owner.api.get('/api/skills/library')).body.length, 2);
  assert.is(catalogueCalls(), calls, 'no upstream call within the hour');
  clock.now = t0 + 61 * 60_000;
  const r = await owner.api.get('/api/skills/library');
  assert.equal(r.body.map((e: any) => e.skillId), ['fresh']);
  assert.is(catalogueCalls(), calls + 1);
  clock.now = t0 + 61 * 60_000 + 30 * 60_000;
  await owner.api.get('/api/skills/library');
  assert.is(catalogueCalls(), calls + 1);
});

test('catalogue: a failed refresh serves the stale copy with X-Skills-Library-Stale: true, retrying after a minute', async () => {
  files.set(CATALOGUE, { status: 200, body: '{ broken json' });
  clock.now = t0 + 3 * 60 * 60_000;
  const calls = catalogueCalls();
  const r = await owner.api.get('/api/skills/library');
  assert.is(r.status, 200);
  assert.is(r.headers['x-skills-library-stale'], 'true');
  assert.ok(r.headers['x-skills-library-fetched-at']);
  assert.equal(r.body.map((e: any) => e.skillId), ['fresh']);
  assert.is(catalogueCalls(), calls + 1);
  clock.now += 30_000;
  assert.is((await owner.api.get('/api/skills/library')).headers['x-skills-library-stale'], 'true');
  assert.is(catalogueCalls(), calls + 1, 'no new upstream call within the retry minute');
  setCatalogue(catalogueV1);
  clock.now += 31_000;
  const fresh = await owner.api.get('/api/skills/library');
  assert.is(fresh.headers['x-skills-library-stale'], undefined);
  assert.is(fresh.body.length, 2);
  assert.is(catalogueCalls(), calls + 2);
});

test('library endpoints are for global admins', async () => {
  const w = await makeWorkspace(owner, 'Lib Perm');
  const wsAdmin = await makeUser(s, { workspaces: { [w.id]: 'owner' } });
  isError(await wsAdmin.api.get('/api/skills/library'), 403, 'forbidden');
  isError(await wsAdmin.api.get('/api/skills/library/content?source=acme/skills&skillId=pdf'), 403, 'forbidden');
  isError(await wsAdmin.api.post('/api/skills/library/install', { workspaceId: w.id, source: 'acme/skills', skillId: 'pdf' }), 403, 'forbidden');
});

// --- SKILL.md content --------------------------------------------------------------------------------

const FM = '---\nname: PDF Tools\ndescription: "Reads: PDFs"\nversion: 1.1\n---\n\n# PDF\n\nUse the tools.\n';

test('content: tries each path on main then master, in order; answers {content, url} of the one that worked', async () => {
  up.clear();
  files.set('/raw/acme/skills/master/deep.md', { status: 200, body: '# Deep\n' });
  const r = await owner.api.get('/api/skills/library/content?source=acme/skills&skillId=deep');
  assert.is(r.status, 200, r.text);
  assert.equal(Object.keys(r.body).sort(), ['content', 'url']);
  assert.equal(fileCalls(), [
    '/raw/acme/skills/main/skills/deep/SKILL.md',
    '/raw/acme/skills/master/skills/deep/SKILL.md',
    '/raw/acme/skills/main/deep/SKILL.md',
    '/raw/acme/skills/master/deep/SKILL.md',
    '/raw/acme/skills/main/deep.md',
    '/raw/acme/skills/master/deep.md',
  ]);
  assert.equal(r.body, { content: '# Deep\n', url: `${up.url}/raw/acme/skills/master/deep.md` });

  up.clear();
  files.set('/raw/acme/skills/master/skills/pdf/SKILL.md', { status: 200, body: FM });
  files.set('/raw/acme/skills/main/pdf/SKILL.md', { status: 200, body: 'lower priority' });
  const first = await owner.api.get('/api/skills/library/content?source=acme/skills&skillId=pdf');
  assert.is(first.status, 200);
  assert.equal(fileCalls(), ['/raw/acme/skills/main/skills/pdf/SKILL.md', '/raw/acme/skills/master/skills/pdf/SKILL.md']);
  assert.is(first.body.url, `${up.url}/raw/acme/skills/master/skills/pdf/SKILL.md`);
  assert.is(first.body.content, '# PDF\n\nUse the tools.\n', 'front matter stripped');
});

test('content: 404 when SKILL.md exists at none of the paths', async () => {
  up.clear();
  const r = await owner.api.get('/api/skills/library/content?source=acme/skills&skillId=ghost');
  isError(r, 404, 'skill_file_not_found');
  assert.is(fileCalls().length, 6);
});

test('content: 400 when source or skillId is missing', async () => {
  isError(await owner.api.get('/api/skills/library/content?source=acme/skills'), 400, 'validation_failed');
  isError(await owner.api.get('/api/skills/library/content?skillId=pdf'), 400, 'validation_failed');
  isError(await owner.api.get('/api/skills/library/content'), 400, 'validation_failed');
  isError(await owner.api.get('/api/skills/library/content?source=&skillId=pdf'), 400, 'validation_failed');
});

test('content: path traversal and absolute URLs are refused before anything is fetched', async () => {
  up.clear();
  const bad: Array<[string, string]> = [
    ['acme/skills', '../../etc/passwd'],
    ['acme/skills', '..'],
    ['acme/skills', 'a/../../b'],
    ['acme/skills', '/etc/passwd'],
    ['acme/skills', 'http://evil.example/x'],
    ['acme/skills', '%2e%2e/x'],
    ['acme/skills', 'a\\..\\b'],
    ['acme/skills', 'a//b'],
    ['../acme', 'pdf'],
    ['acme/..', 'pdf'],
    ['acme/.', 'pdf'],
    ['https://evil.example/acme', 'pdf'],
    ['acme/skills/extra', 'pdf'],
    ['acme', 'pdf'],
    ['/acme/skills', 'pdf'],
  ];
  for (const [source, skillId] of bad) {
    const r = await owner.api.get(`/api/skills/library/content?source=${encodeURIComponent(source)}&skillId=${encodeURIComponent(skillId)}`);
    isError(r, 400, 'validation_failed');
  }
  // Encoded dots arrive decoded: %252e%252e is the literal text "%2e%2e", refused for its '%'.
  isError(await owner.api.get('/api/skills/library/content?source=acme/skills&skillId=%252e%252e'), 400, 'validation_failed');
  assert.equal(fileCalls(), [], 'nothing reached the code host');
});

test('content: a code host failure other than 404 is a 502 and does not fall through to later paths', async () => {
  up.clear();
  files.set('/raw/acme/flaky/main/skills/x/SKILL.md', { status: 503, body: 'busy' });
  files.set('/raw/acme/flaky/main/x.md', { status: 200, body: 'must not be served' });
  const r = await owner.api.get('/api/skills/library/content?source=acme/flaky&skillId=x');
  isError(r, 502, 'code_host_unavailable');
  assert.equal(fileCalls(), ['/raw/acme/flaky/main/skills/x/SKILL.md']);
});

test('front matter: stripped when delimited (LF or CRLF, --- or ... closing); other text unchanged', () => {
  assert.equal(splitFrontMatter(FM), { body: '# PDF\n\nUse the tools.\n', frontMatter: { name: 'PDF Tools', description: 'Reads: PDFs', version: 1.1 } });
  assert.is(splitFrontMatter('---\r\nname: x\r\n...\r\n\r\nBody\r\n').body, 'Body\r\n');
  assert.is(splitFrontMatter('\uFEFF---\nname: x\n---\nBody').body, 'Body');
  assert.is(splitFrontMatter('---\n---\nBody').body, 'Body');
  assert.is(splitFrontMatter('# Title\n---\nnot front matter\n---\n').body, '# Title\n---\nnot front matter\n---\n');
  assert.is(splitFrontMatter('---\nan unclosed rule\n\ntext').body, '---\nan unclosed rule\n\ntext');
  const bad = splitFrontMatter('---\n: [unbalanced\n---\nBody');
  assert.is(bad.body, 'Body');
  assert.is(bad.frontMatter, null);
});

// --- install in one call -----------------------------------------------------------------------------

test('install: one call creates the skill from SKILL.md (name, description, version from the front matter); 201 raw row', async () => {
  const w = await makeWorkspace(owner, 'Install Space');
  const r = await owner.api.post('/api/skills/library/install', { workspaceId: w.id, source: 'acme/skills', skillId: 'pdf', isRequired: true, config: { dpi: 300 } });
  assert.is(r.status, 201, r.text);
  assert.equal(r.body, {
    id: r.body.id,
    workspace_id: w.id,
    name: 'PDF Tools',
    description: 'Reads: PDFs',
    version: '1.1',
    is_required: 1,
    config: '{"dpi":300}',
    content: '# PDF\n\nUse the tools.\n',
    created_at: r.body.created_at,
  });
  const audit = await s.ctx.c.audit.findOne({ action: 'skill.install', target: r.body.id });
  assert.is((audit!.details as any).url, `${up.url}/raw/acme/skills/master/skills/pdf/SKILL.md`);

  // Given fields win over the front matter; without front matter the name is the skill id.
  const named = await owner.api.post('/api/skills/library/install', { workspaceId: w.id, source: 'acme/skills', skillId: 'pdf', name: 'PDF Again', description: null });
  assert.is(named.status, 201);
  assert.is(named.body.name, 'PDF Again');
  assert.is(named.body.description, null);
  const plain = await owner.api.post('/api/skills/library/install', { workspaceId: w.id, source: 'acme/skills', skillId: 'deep' });
  assert.is(plain.body.name, 'deep');
  assert.is(plain.body.content, '# Deep\n');
});

test('install: 409 name taken, 404 unknown workspace or no SKILL.md, 400 bad reference; nothing created', async () => {
  const w = await makeWorkspace(owner, 'Install Guard');
  assert.is((await owner.api.post('/api/skills/library/install', { workspaceId: w.id, source: 'acme/skills', skillId: 'pdf' })).status, 201);
  const before = await s.ctx.c.skills.count({});
  isError(await owner.api.post('/api/skills/library/install', { workspaceId: w.id, source: 'acme/skills', skillId: 'pdf' }), 409, 'skill_name_taken');
  isError(await owner.api.post('/api/skills/library/install', { workspaceId: 'nowhere', source: 'acme/skills', skillId: 'pdf' }), 404, 'not_found');
  isError(await owner.api.post('/api/skills/library/install', { workspaceId: w.id, source: 'acme/skills', skillId: 'ghost' }), 404, 'skill_file_not_found');
  isError(await owner.api.post('/api/skills/library/install', { workspaceId: w.id, source: 'acme/skills', skillId: '../x' }), 400, 'validation_failed');
  isError(await owner.api.post('/api/skills/library/install', { workspaceId: w.id, skillId: 'pdf' }), 400, 'validation_failed');
  isError(await owner.api.post('/api/skills/library/install', { source: 'acme/skills', skillId: 'pdf' }), 400, 'validation_failed');
  assert.is(await s.ctx.c.skills.count({}), before);
});

// --- not configured, unreachable -----------------------------------------------------------------------

test('without SKILLS_LIBRARY_URL the catalogue answers 503; an unreachable code host is a 502', async () => {
  const other = await startServer({ STEWARD_OWNER_DID: owner.user.did!, SKILLS_CODE_HOST_URL: await deadUrl() });
  try {
    const admin = await makeUser(other, { isAdmin: true });
    const r = await admin.api.get('/api/skills/library');
    isError(r, 503, 'skills_library_not_configured');
    assert.match(r.body.error.message, /SKILLS_LIBRARY_URL/);
    isError(await admin.api.get('/api/skills/library/content?source=acme/skills&skillId=pdf'), 502, 'code_host_unavailable');
  } finally {
    await other.stop(true);
  }
});

test.run();
