/**
 * The dashboard's fleet screens in a real browser against a real Steward with real SDK agents:
 * the overview follows an agent from pending to online without a reload; a run's timeline shows
 * its steps complete as they do; runs are cancelled from the list of all runs with each outcome
 * said; an agent's actor page lights its state and shows a transition as it arrives. Each saves a
 * screenshot in docs/screenshots.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { Page } from 'playwright-core';
import type { StewardAgent } from '../src/agent/index.js';
import { startServer, waitFor, type TestServer } from './helpers.js';
import { newAgent, stopAll } from './fleet-helpers.js';
import { apiAs, launch, screenshot, signInOwner, type Browser } from './ui-helpers.js';

const test = suite('dashboard fleet screens in a browser');

let s: TestServer;
let browser: Browser;
let page: Page;
let agent: StewardAgent | undefined;
let token = '';
const api = (method: string, path: string, body?: unknown) => apiAs(s, () => token)(method, path, body);

/** Intents of the agent wait here until the test lets them through. */
let gate: { open: () => void; promise: Promise<void> } = makeGate();
function makeGate() {
  let open = () => {};
  const promise = new Promise<void>((ok) => (open = ok));
  return { open, promise };
}

test.before(async () => {
  s = await startServer();
  browser = await launch();
  page = await browser.newPage();
  token = await signInOwner(s, page, '/overview');
});

test.after(async () => {
  gate.open();
  await stopAll(agent);
  await browser?.close();
  await s?.stop(true);
});

/** Whether the page's subscription to a feed topic has reached the server. */
const subscribed = (topic: string) => s.ctx.fleet.feed.publisher.hasSubscribers(topic);
const figure = (label: string) => page.locator(`[data-figure="${label}"]`);

test('the overview shows a pending agent, then the same agent online once approved, without a reload', async () => {
  await page.goto(`${s.url}/overview`);
  await page.getByRole('heading', { name: 'Overview' }).waitFor();
  await page.getByText('Live', { exact: true }).waitFor();
  await waitFor(() => subscribed('presence'), 10_000);
  await page.evaluate('window.__sameDocument = true');

  agent = newAgent(s, {
    name: 'overview-agent',
    capabilities: ['api_call'],
    workspace: s.ctx.defaultWorkspace._id,
    onIntent: async () => {
      await gate.promise;
      return { done: true };
    },
  });
  await agent.waitFor('pending');
  const cell = page.locator(`.status-grid li[data-did="${agent.did}"]`);
  await page.locator(`.status-grid li[data-did="${agent.did}"][data-status="pending"]`).waitFor();
  await waitFor(async () => (await figure('Waiting for approval').textContent()) === '1', 10_000);
  // Every count says what it counts: the Agents card splits its total, the table counts approved agents.
  const summary = (await api('GET', '/api/fleet/summary')).body;
  await waitFor(async () => (await page.getByTestId('agents-breakdown').textContent()) === `${summary.agents.total - 1} approved, 1 pending, 0 rejected`, 10_000);
  assert.is(await figure('Agents').textContent(), String(summary.agents.total));
  await page.getByRole('columnheader', { name: 'Approved agents' }).waitFor();

  const regs = await api('GET', '/api/registrations');
  const reg = regs.body.registrations.find((r: any) => r.agentDid === agent!.did);
  assert.ok(reg, 'the registration is pending');
  assert.is((await api('POST', `/api/registrations/${reg.id}/approve`, { capabilities: ['api_call'] })).status, 200);
  await agent.waitFor('ready');

  await page.locator(`.status-grid li[data-did="${agent.did}"][data-status="online"]`).waitFor();
  await waitFor(async () => (await figure('Online').textContent()) === '1' && (await figure('Waiting for approval').textContent()) === '0', 10_000);
  assert.match((await cell.getAttribute('title')) ?? '', /overview-agent: online since/);
  assert.is(await page.evaluate('window.__sameDocument'), true, 'the page was not reloaded');
  await page.getByRole('img', { name: /Tokens used by the whole server/ }).waitFor();
  await screenshot(page, 'overview');
});

let workflowId = '';

test('a run started from the page shows its steps complete on its timeline as they do', async () => {
  const created = await api('POST', '/api/workflows', {
    name: 'Nightly report',
    workspaceId: s.ctx.defaultWorkspace._id,
    definition: {
      steps: [
        { id: 'prepare', name: 'Prepare', action: 'delay', params: { ms: 10 } },
        { id: 'ask', name: 'Ask the agent', action: 'api_call', agentDid: agent!.did, params: { q: 'report' }, dependsOn: ['prepare'] },
        { id: 'finish', name: 'Finish', action: 'delay', params: { ms: 10 }, dependsOn: ['ask'] },
      ],
    },
  });
  assert.is(created.status, 201, JSON.stringify(created.body));
  workflowId = created.body.id;
  await page.goto(`${s.url}/workflows/${workflowId}?tab=runs`);
  await page.getByRole('button', { name: 'Run now' }).click();
  await waitFor(() => new URL(page.url()).searchParams.has('run'), 10_000);
  const runId = new URL(page.url()).searchParams.get('run')!;
  await page.goto(`${s.url}/workflows/${workflowId}/runs/${runId}`);
  const step = (id: string, outcome: string) => page.locator(`.timeline li[data-step="${id}"][data-outcome="${outcome}"]`);
  // The agent holds the second step until the test lets it go: the page shows it running.
  await step('prepare', 'succeeded').waitFor();
  await step('ask', 'running').waitFor();
  await waitFor(() => subscribed('runs'), 10_000);
  gate.open();
  await step('ask', 'succeeded').waitFor();
  await step('finish', 'succeeded').waitFor();
  await page.getByRole('heading', { name: /Run/ }).getByText('completed').waitFor();
  await screenshot(page, 'run-timeline');
  const run = await api('GET', `/api/workflows/${workflowId}/runs/${runId}`);
  assert.is(run.body.status, 'completed');
});

test('runs are cancelled from the list of all runs, each with its outcome', async () => {
  gate = makeGate();
  const start = async () => (await api('POST', `/api/workflows/${workflowId}/run`, { params: {} })).body.runId as string;
  const one = await start();
  const two = await start();
  await page.goto(`${s.url}/runs?status=running`);
  assert.ok(new URL(page.url()).searchParams.get('status') === 'running', 'the filter is in the URL');
  await page.locator(`tr[data-run="${one}"]`).waitFor();
  await page.locator(`tr[data-run="${two}"]`).waitFor();
  await page.getByRole('checkbox', { name: new RegExp(`Select run ${one}`) }).check();
  await page.getByRole('checkbox', { name: new RegExp(`Select run ${two}`) }).check();
  await screenshot(page, 'runs');
  await page.getByRole('button', { name: 'Cancel 2 selected' }).click();
  await page.getByTestId('cancel-results').getByText('2 of 2 cancelled.').waitFor();
  for (const id of [one, two]) assert.is((await api('GET', `/api/workflows/${workflowId}/runs/${id}`)).body.status, 'cancelled');
  // The list follows the runs topic: cancelled runs leave the running filter.
  await page.locator(`tr[data-run="${one}"]`).waitFor({ state: 'detached' });
  gate.open();
});

test("an agent's actor page lights its state and shows a transition as it arrives", async () => {
  await page.goto(`${s.url}/actors?kind=agent`);
  await page.locator(`tr[data-actor="${agent!.did}"]`).getByRole('link').click();
  await page.getByRole('img', { name: /State chart of agent actors/ }).waitFor();
  await page.locator('g.state.current[data-state$="online"]').waitFor();
  await waitFor(() => subscribed('actors'), 10_000);
  // Nothing has happened since the page opened: it says since when it shows transitions.
  await page.getByText('No transition since you opened this page.').waitFor();
  await page.getByText(/records an actor's transitions while someone is looking at it/).waitFor();
  await agent!.stop();
  await page.locator('tr[data-event="DISCONNECTED"]').first().waitFor();
  await page.locator('g.state.current[data-state$="offline"]').waitFor();
  assert.match((await page.getByTestId('actor-state').textContent()) ?? '', /offline/);

  // Laid out to fit, at a desktop's width and at a tablet's: every label inside the drawing and
  // the drawing inside the page, no event label over another or over a state's box.
  for (const width of [1280, 800]) {
    await page.setViewportSize({ width, height: 800 });
    const problems = (await page.evaluate(`(() => {
      const svg = document.querySelector('.state-chart svg');
      const frame = svg.getBoundingClientRect();
      const box = svg.closest('.dag').getBoundingClientRect();
      const out = [];
      const near = (a, b) => !(a.right <= b.left + 0.5 || b.right <= a.left + 0.5 || a.bottom <= b.top + 0.5 || b.bottom <= a.top + 0.5);
      if (frame.right > box.right + 0.5 || frame.left < box.left - 0.5) out.push('the drawing is wider than its frame');
      const texts = [...svg.querySelectorAll('text')].map((t) => ({ text: t.textContent, r: t.getBoundingClientRect(), event: t.classList.contains('event') && !t.classList.contains('loop') }));
      for (const t of texts) if (t.r.left < frame.left - 0.5 || t.r.right > frame.right + 0.5 || t.r.top < frame.top - 0.5 || t.r.bottom > frame.bottom + 0.5) out.push('cut: ' + t.text);
      const labels = texts.filter((t) => t.event);
      for (let i = 0; i < labels.length; i++) for (let j = i + 1; j < labels.length; j++) if (near(labels[i].r, labels[j].r)) out.push('labels overlap: ' + labels[i].text + ' / ' + labels[j].text);
      const boxes = [...svg.querySelectorAll('g.state rect')].map((r) => r.getBoundingClientRect());
      for (const l of labels) for (const b of boxes) if (near(l.r, b)) out.push('label on a state: ' + l.text);
      return out;
    })()`)) as string[];
    assert.equal(problems, [], `the state chart at ${width} px`);
  }
  await page.setViewportSize({ width: 1280, height: 800 });
  await screenshot(page, 'actor');
});

test('no page error and no content-security-policy violation happened', () => {
  assert.equal(browser.problems, []);
});

test.run();
