/**
 * skills_config with live SDK agents: the set after the handshake, after create, PATCH and
 * DELETE, after override changes, and only to the agents it concerns.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { StewardAgent } from '../src/agent/index.js';
import { frameValidators } from '../src/domain/wire-schemas.js';
import { generateKeyPair } from '../src/domain/did.js';
import { waitFor, type TestServer } from './helpers.js';
import type { TestUser } from './fixtures.js';
import { approve, enc, isError, makeWorkspace, newAgent, readyAgent, startWithOwner, stopAll } from './fleet-helpers.js';

const test = suite('skills-agents');
let s: TestServer;
let owner: TestUser;
const agents: StewardAgent[] = [];

test.before(async () => {
  ({ s, owner } = await startWithOwner());
});

test.after(async () => {
  await stopAll(...agents);
  await s.stop(true);
});

/** A ready SDK agent registered into `workspace`, recording every skills_config frame it receives. */
async function agentIn(workspace: string) {
  const frames: any[] = [];
  const keys = generateKeyPair();
  const agent = await readyAgent(s, owner, {
    keys,
    workspace,
    onSkillsConfig: (_skills, frame) => {
      assert.ok(frameValidators.skills_config(frame), `skills_config matches its schema: ${JSON.stringify(frameValidators.skills_config.errors)}`);
      frames.push(frame);
    },
  });
  agents.push(agent);
  return { agent, frames, keys };
}

const createSkill = async (body: Record<string, unknown>) => {
  const r = await owner.api.post('/api/skills', body);
  assert.is(r.status, 201, r.text);
  return r.body;
};

const names = (a: StewardAgent) => a.skills.map((k) => k.name);

test('after its handshake an agent receives its skill set, content included', async () => {
  const w = await makeWorkspace(owner, 'Ready Space');
  const k = await createSkill({ workspaceId: w.id, name: 'Greeting', description: 'Says hello', version: '1.0.0', config: { tone: 'warm' }, content: '# Greet\nSay hello.' });
  const { agent, frames } = await agentIn(w.slug);
  await waitFor(() => frames.length >= 1);
  assert.equal(frames[0], {
    type: 'skills_config',
    skills: [{ id: k.id, workspaceId: w.id, name: 'Greeting', description: 'Says hello', version: '1.0.0', isRequired: false, config: { tone: 'warm' }, content: '# Greet\nSay hello.' }],
  });
  assert.equal(agent.skills, frames[0].skills, 'the SDK keeps the latest set');
});

test('create, PATCH and DELETE each push the new set to every connected agent of the workspace, and to no other', async () => {
  const w = await makeWorkspace(owner, 'Push Space');
  const elsewhere = await makeWorkspace(owner, 'Quiet Space');
  const a = await agentIn(w.slug);
  const b = await agentIn(w.slug);
  const quiet = await agentIn(elsewhere.slug);
  await waitFor(() => a.frames.length === 1 && b.frames.length === 1 && quiet.frames.length === 1);
  assert.equal(a.agent.skills, []);

  const k = await createSkill({ workspaceId: w.id, name: 'Planner', content: 'v1' });
  await waitFor(() => a.frames.length === 2 && b.frames.length === 2);
  assert.equal(names(a.agent), ['Planner']);
  assert.is(a.agent.skills[0]!.content, 'v1');

  const p = await owner.api.patch(`/api/workspaces/${w.id}/skills/${k.id}`, { content: 'v2', config: { depth: 3 }, version: '2.0.0' });
  assert.is(p.status, 200);
  await waitFor(() => a.frames.length === 3 && b.frames.length === 3);
  for (const x of [a, b]) {
    assert.is(x.agent.skills[0]!.content, 'v2');
    assert.equal(x.agent.skills[0]!.config, { depth: 3 });
    assert.is(x.agent.skills[0]!.version, '2.0.0');
  }

  const d = await owner.api.del(`/api/workspaces/${w.id}/skills/${k.id}`);
  assert.is(d.status, 200);
  await waitFor(() => a.frames.length === 4 && b.frames.length === 4);
  assert.equal(a.agent.skills, []);
  assert.equal(b.agent.skills, []);

  // The agent of the other workspace got only its own set at connect time. A change in its own
  // workspace reaches it as its second frame, which proves nothing else came before.
  await createSkill({ workspaceId: elsewhere.id, name: 'Own' });
  await waitFor(() => quiet.frames.length === 2);
  assert.equal(quiet.frames.map((f) => f.skills.map((k: any) => k.name)), [[], ['Own']]);
});

test('overrides: the agent concerned gets its new set (opted out, then a replacing config); the others do not', async () => {
  const w = await makeWorkspace(owner, 'Override Push');
  const k = await createSkill({ workspaceId: w.id, name: 'Tunable', config: { level: 1 }, content: 'tune' });
  const a = await agentIn(w.slug);
  const b = await agentIn(w.slug);
  await waitFor(() => a.frames.length === 1 && b.frames.length === 1);
  const url = `/api/workspaces/${w.id}/skills/${k.id}/overrides/${enc(a.agent.did)}`;

  assert.is((await owner.api.put(url, { enabled: false })).status, 201);
  await waitFor(() => a.frames.length === 2);
  assert.equal(a.agent.skills, []);

  assert.is((await owner.api.put(url, { config: { level: 5 } })).status, 200);
  await waitFor(() => a.frames.length === 3);
  assert.equal(a.agent.skills.map((x) => x.config), [{ level: 5 }]);

  // A workspace-wide change reaches both; b sees its second frame only, so the overrides did not reach it.
  assert.is((await owner.api.patch(`/api/workspaces/${w.id}/skills/${k.id}`, { content: 'retuned' })).status, 200);
  await waitFor(() => a.frames.length === 4 && b.frames.length === 2);
  assert.equal(a.agent.skills.map((x) => [x.config, x.content]), [[{ level: 5 }, 'retuned']]);
  assert.equal(b.agent.skills.map((x) => [x.config, x.content]), [[{ level: 1 }, 'retuned']]);

  assert.is((await owner.api.del(url)).status, 200);
  await waitFor(() => a.frames.length === 5);
  assert.equal(a.agent.skills.map((x) => x.config), [{ level: 1 }]);
});

test('a required skill stays with the agent: opting out is refused (409) and no frame is sent', async () => {
  const w = await makeWorkspace(owner, 'Required Push');
  const k = await createSkill({ workspaceId: w.id, name: 'Safety', isRequired: true, content: 'Be safe.' });
  const a = await agentIn(w.slug);
  await waitFor(() => a.frames.length === 1);
  assert.equal(a.agent.skills.map((x) => [x.name, x.isRequired]), [['Safety', true]]);
  isError(await owner.api.put(`/api/workspaces/${w.id}/skills/${k.id}/overrides/${enc(a.agent.did)}`, { enabled: false }), 409, 'skill_required');
  await createSkill({ workspaceId: w.id, name: 'Later' });
  await waitFor(() => a.frames.length === 2);
  assert.equal(names(a.agent), ['Later', 'Safety']);
});

test('an agent in several workspaces receives the skills of all of them; a reconnect brings the current set', async () => {
  const w = await makeWorkspace(owner, 'Home Space');
  const v = await makeWorkspace(owner, 'Second Space');
  await createSkill({ workspaceId: w.id, name: 'Home Skill' });
  const a = await agentIn(w.slug);
  await waitFor(() => a.frames.length === 1);
  assert.is((await owner.api.post(`/api/workspaces/${v.id}/agents`, { agentDid: a.agent.did })).status, 201);
  await waitFor(() => a.frames.length === 2, 5000);
  await createSkill({ workspaceId: v.id, name: 'Second Skill' });
  await waitFor(() => a.frames.length === 3);
  assert.equal(a.agent.skills.map((x) => [x.name, x.workspaceId]).sort(), [
    ['Home Skill', w.id],
    ['Second Skill', v.id],
  ]);

  // Changes made while the agent is away arrive after it reconnects.
  await a.agent.stop();
  await waitFor(() => !s.ctx.agentPush.isOnline(a.agent.did));
  await createSkill({ workspaceId: w.id, name: 'While Away' });
  const back = newAgent(s, { keys: a.keys });
  agents.push(back);
  await back.waitFor('ready');
  await waitFor(() => back.skills.length === 3);
  assert.equal(back.skills.map((x) => x.name).sort(), ['Home Skill', 'Second Skill', 'While Away']);
});

test('an agent added to or removed from a workspace gets its new skill set at once', async () => {
  const home = await makeWorkspace(owner, 'Joining Home');
  const extra = await makeWorkspace(owner, 'Joining Extra');
  await createSkill({ workspaceId: extra.id, name: 'Extra Skill', content: 'more' });
  const { agent, frames } = await agentIn(home.slug);
  await waitFor(() => frames.length >= 1);
  assert.equal(names(agent), []);
  const add = await owner.api.post(`/api/workspaces/${extra.id}/agents`, { agentDid: agent.did });
  assert.is(add.status, 201, add.text);
  await waitFor(() => names(agent).includes('Extra Skill'));
  const del = await owner.api.del(`/api/workspaces/${extra.id}/agents/${enc(agent.did)}`);
  assert.is(del.status, 200, del.text);
  await waitFor(() => frames.length >= 3 && names(agent).length === 0);
});

test('a skill set larger than the send-buffer limit reaches the agent after its handshake, and again after it reconnects', async () => {
  const limit = 64 * 1024;
  const small = await startWithOwner({ AGENT_SEND_BUFFER_LIMIT_BYTES: String(limit) });
  const started: StewardAgent[] = [];
  try {
    const w = await makeWorkspace(small.owner, 'Large Skills');
    const content = (c: string) => c.repeat(40_000); // 120,000 bytes in UTF-8
    for (const [name, c] of [['Euro', '€'], ['Pound', '£']] as const) {
      const r = await small.owner.api.post('/api/skills', { workspaceId: w.id, name, content: content(c) });
      assert.is(r.status, 201, r.text);
    }
    /** What one connection of the agent received, in order: its ready, then its llm_config and skills_config frames. */
    const connect = async (keys: ReturnType<typeof generateKeyPair>, approveIt: boolean) => {
      const seen: string[] = [];
      let set: any[] = [];
      const agent = newAgent(small.s, {
        keys,
        workspace: w.slug,
        onLlmConfig: () => seen.push('llm_config'),
        onSkillsConfig: (skills, frame) => {
          assert.ok(frameValidators.skills_config(frame), `skills_config matches its schema: ${JSON.stringify(frameValidators.skills_config.errors)}`);
          seen.push('skills_config');
          set = skills;
        },
      });
      started.push(agent);
      agent.on('status', (st: string) => st === 'ready' && seen.push('ready'));
      if (approveIt) await approve(small.owner, agent);
      await agent.waitFor('ready');
      await waitFor(() => seen.includes('skills_config') && seen.includes('llm_config'));
      assert.is(seen[0], 'ready', 'ready first');
      assert.equal(seen.slice(1).sort(), ['llm_config', 'skills_config'], 'its llm_config and its skill set, once each');
      assert.equal(
        set.map((k) => [k.name, k.content]),
        [
          ['Euro', content('€')],
          ['Pound', content('£')],
        ],
        'the whole set, content included',
      );
      assert.ok(Buffer.byteLength(JSON.stringify({ type: 'skills_config', skills: set })) > limit, 'the frame is larger than the limit');
      return agent;
    };
    const keys = generateKeyPair();
    const first = await connect(keys, true);
    await first.stop();
    await waitFor(() => !small.s.ctx.agentPush.isOnline(keys.did));
    const again = await connect(keys, false);
    await waitFor(() => small.s.ctx.agentPush.isOnline(keys.did));
    await again.stop();
  } finally {
    await stopAll(...started);
    await small.s.stop(true);
  }
});

test.run();
