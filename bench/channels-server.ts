/**
 * The Steward under test for the channel benchmarks (bench/channels.ts), in its own process,
 * driven over IPC: start, set up a workspace with a channel, posters and one agent member,
 * report counters, stop.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';
import { nanoid } from 'nanoid';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/log.js';
import { startSteward, type Steward } from '../src/server.js';
import { generateKeyPair } from '../src/domain/did.js';
import { Session } from 'node:inspector/promises';
import { writeFile } from 'node:fs/promises';
import { serveCommands } from './proc.js';
import { profileCommand } from './profiler.js';

/** BENCH_PROFILE=<file>: a CPU profile of the server from setup to stop is written there. */
let profiler: Session | undefined;

type Msg =
  | { cmd: 'start'; env: Record<string, string> }
  | { cmd: 'setup'; posters: number; agent?: { did: string; publicKey: string; name: string } }
  | { cmd: 'counters' }
  | { cmd: 'profile'; file?: string }
  | { cmd: 'stop' };

const loopDelay = monitorEventLoopDelay({ resolution: 5 });
loopDelay.enable();
/** Garbage-collection pauses since the last `counters`. */
let gc = { count: 0, totalMs: 0, maxMs: 0 };
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) {
    gc.count++;
    gc.totalMs += e.duration;
    gc.maxMs = Math.max(gc.maxMs, e.duration);
  }
}).observe({ entryTypes: ['gc'] });

let steward: Steward | undefined;
let cpuMark = process.cpuUsage();
let dataDir = '';


serveCommands<Msg>(
  async (raw) => {
    switch (raw.cmd) {
      case 'start': {
        dataDir = await mkdtemp(join(tmpdir(), 'steward-bench-channels-'));
        const config = loadConfig({
          PORT: '0',
          HOST: '127.0.0.1',
          DATA_DIR: dataDir,
          LOG_LEVEL: 'warn',
          STEWARD_OWNER_DID: generateKeyPair().did,
          ...raw.env,
        });
        steward = await startSteward(config, createLogger(config.logLevel));
        return { url: steward.url };
      }
      case 'setup': {
        const { c, sessions } = steward!.ctx;
        const now = new Date().toISOString();
        const ws = { _id: nanoid(), name: 'Bench', slug: 'bench', color: '#000000', description: '', isDefault: false, createdAt: now, updatedAt: now, createdBy: null };
        await c.workspaces.insertOne(ws);
        const channel = {
          _id: nanoid(),
          workspaceId: ws._id,
          name: 'bench',
          slug: 'bench',
          slugKey: `${ws._id}/bench`,
          description: '',
          topic: '',
          isPublic: true,
          isArchived: false,
          creatorDid: 'did:key:bench',
          createdAt: now,
          updatedAt: now,
        };
        await c.channels.insertOne(channel);
        const tokens: string[] = [];
        for (let i = 0; i < raw.posters; i++) {
          const keys = generateKeyPair();
          const userId = nanoid();
          await c.userDids.insertOne({ _id: keys.did, userId, createdAt: now });
          await c.users.insertOne({
            _id: userId,
            did: keys.did,
            publicKey: keys.publicKey,
            name: `poster-${i}`,
            email: `poster-${i}@bench.test`,
            emailLower: `poster-${i}@bench.test`,
            isOwner: false,
            isAdmin: false,
            role: 'member',
            registeredAt: now,
            directoryId: null,
            claimedAt: now,
            reportsTo: null,
            description: null,
          });
          await c.workspaceMembers.insertOne({ _id: nanoid(), workspaceId: ws._id, userId, role: 'member', isPrimary: true, joinedAt: now });
          await c.channelMembers.insertOne({ _id: nanoid(), channelId: channel._id, memberDid: keys.did, memberType: 'user', role: 'member', joinedAt: now, invitedBy: null });
          tokens.push((await sessions.create('user', userId)).token);
        }
        if (raw.agent) {
          await c.agents.insertOne({
            _id: raw.agent.did,
            name: raw.agent.name,
            publicKey: raw.agent.publicKey,
            version: '1.0.0',
            status: 'active',
            capabilities: ['api_call'],
            requestedCapabilities: ['api_call'],
            registeredAt: now,
            lastSeen: null,
          });
          await c.workspaceAgents.insertOne({ _id: nanoid(), workspaceId: ws._id, agentDid: raw.agent.did, isPrimary: true, joinedAt: now });
          await c.channelMembers.insertOne({ _id: nanoid(), channelId: channel._id, memberDid: raw.agent.did, memberType: 'agent', role: 'member', joinedAt: now, invitedBy: null });
        }
        loopDelay.reset();
        if (process.env.BENCH_PROFILE) {
          profiler = new Session();
          profiler.connect();
          await profiler.post('Profiler.enable');
          await profiler.post('Profiler.start');
        }
        return { channelId: channel._id, tokens };
      }
      case 'counters': {
        const cpu = process.cpuUsage(cpuMark);
        cpuMark = process.cpuUsage();
        const r = {
          gc,
          cpuMs: (cpu.user + cpu.system) / 1000,
          messages: await steward!.ctx.c.channelMessages.count({}),
          loopDelayP99Ms: loopDelay.percentile(99) / 1e6,
          loopDelayMaxMs: loopDelay.max / 1e6,
          rssMB: process.memoryUsage().rss / 1024 / 1024,
          sockets: steward!.ctx.sockets.counts(),
        };
        loopDelay.reset();
        gc = { count: 0, totalMs: 0, maxMs: 0 };
        return r;
      }
      case 'profile':
        // BENCH_PROFILE_DIR set: a CPU profile of one measured phase (start, then stop with a file name).
        await profileCommand(raw.file);
        return {};
    }
  },
  async () => {
    if (profiler) {
      const { profile } = await profiler.post('Profiler.stop');
      await writeFile(process.env.BENCH_PROFILE!, JSON.stringify(profile));
    }
    await steward?.close();
    await rm(dataDir, { recursive: true, force: true });
  },
);
