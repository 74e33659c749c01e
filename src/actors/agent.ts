/**
 * The agent actor: one per agent (actor id = its DID), owning its lifecycle.
 *
 *   boot ─┬─▶ pending ──APPROVE──▶ approving ──(recordApproval)──▶ active
 *         │      └─────REJECT───▶ rejecting ──(recordRejection)─▶ rejected (final)
 *         ├─▶ active (an agent stored as active without a snapshot)
 *         └─▶ rejected
 *
 *   active (parallel)
 *     connection:  offline ──CONNECTED──▶ online ──DISCONNECTED──▶ offline
 *     certificate: none | current ──REISSUE_OFFERED──▶ reissuePending ──CERTIFICATE_STORED──▶ current
 *
 * The IO of a decision (recordApproval, recordRejection) is an invoked promise actor whose
 * implementation the fleet provides (src/services/fleet.ts), so the graph reads as the
 * specification and tests can swap it. Certificates themselves are written by the fleet's batched
 * writer; the actor only learns which serial is in force. Heartbeats never reach the actor: every
 * transition costs a snapshot write.
 *
 * The context stays small (the DID, the serial and policy id of the certificate in force): with
 * eighteen thousand agents, each actor's memory matters.
 */
import { assertEvent, assign, fromPromise, setup } from 'xstate';
import type { Capability } from '../domain/capabilities.js';

export const AGENT_ACTOR_KIND = 'agent';

export interface AgentActorInput {
  did: string;
  /** Where a brand-new actor starts: the stored status of the agent. */
  status: 'pending' | 'active' | 'rejected';
}

export interface AgentActorContext {
  did: string;
  /** Serial of the certificate in force (null before the first one). */
  serial: string | null;
  /** Policy of the certificate in force. */
  policyId: string | null;
  /** Only until the boot state has read it. */
  boot?: AgentActorInput['status'];
}

export type AgentActorEvent =
  | { type: 'APPROVE'; capabilities: Capability[]; by: string }
  | { type: 'REJECT'; reason: string; by: string }
  | { type: 'CONNECTED'; serial: string; policyId: string | null }
  | { type: 'DISCONNECTED' }
  | { type: 'REISSUE_OFFERED'; serial: string }
  | { type: 'CERTIFICATE_STORED'; serial: string; policyId: string | null };

export interface ApprovalInput {
  did: string;
  capabilities: Capability[];
  by: string;
}
export interface RejectionInput {
  did: string;
  reason: string;
  by: string;
}

export const agentMachine = setup({
  types: {} as { context: AgentActorContext; events: AgentActorEvent; input: AgentActorInput },
  actors: {
    // Provided by the fleet; these defaults fail so a machine without them cannot decide silently.
    recordApproval: fromPromise<void, ApprovalInput>(async () => {
      throw new Error('recordApproval is not provided');
    }),
    recordRejection: fromPromise<void, RejectionInput>(async () => {
      throw new Error('recordRejection is not provided');
    }),
  },
  actions: {
    /** Records the serial and policy of the certificate the event says is in force. */
    certificateInForce: assign(({ event }) => {
      assertEvent(event, ['CONNECTED', 'CERTIFICATE_STORED']);
      return { serial: event.serial, policyId: event.policyId };
    }),
  },
  guards: {
    bootsActive: ({ context }) => context.boot === 'active',
    bootsRejected: ({ context }) => context.boot === 'rejected',
    /** The event names a certificate other than the one in force. */
    newCertificate: ({ context, event }) =>
      (event.type === 'CONNECTED' || event.type === 'CERTIFICATE_STORED') && event.serial !== context.serial,
  },
}).createMachine({
  id: 'agent',
  context: ({ input }) => ({ did: input.did, serial: null, policyId: null, boot: input.status }),
  initial: 'boot',
  states: {
    boot: {
      always: [
        { guard: 'bootsActive', target: 'active', actions: assign({ boot: undefined }) },
        { guard: 'bootsRejected', target: 'rejected', actions: assign({ boot: undefined }) },
        { target: 'pending', actions: assign({ boot: undefined }) },
      ],
    },
    pending: {
      on: {
        APPROVE: 'approving',
        REJECT: 'rejecting',
      },
    },
    approving: {
      invoke: {
        src: 'recordApproval',
        input: ({ context, event }) => {
          assertEvent(event, 'APPROVE');
          return { did: context.did, capabilities: event.capabilities, by: event.by };
        },
        onDone: 'active',
        onError: 'pending',
      },
    },
    rejecting: {
      invoke: {
        src: 'recordRejection',
        input: ({ context, event }) => {
          assertEvent(event, 'REJECT');
          return { did: context.did, reason: event.reason, by: event.by };
        },
        onDone: 'rejected',
        onError: 'pending',
      },
    },
    rejected: { type: 'final' },
    active: {
      type: 'parallel',
      states: {
        connection: {
          initial: 'offline',
          states: {
            offline: { on: { CONNECTED: 'online' } },
            online: { on: { DISCONNECTED: 'offline' } },
          },
        },
        certificate: {
          initial: 'none',
          on: {
            REISSUE_OFFERED: '.reissuePending',
          },
          states: {
            none: {
              on: {
                CONNECTED: { target: 'current', actions: 'certificateInForce' },
                CERTIFICATE_STORED: { target: 'current', actions: 'certificateInForce' },
              },
            },
            current: {
              on: {
                CONNECTED: { guard: 'newCertificate', target: 'current', actions: 'certificateInForce' },
                CERTIFICATE_STORED: { guard: 'newCertificate', target: 'current', actions: 'certificateInForce' },
              },
            },
            reissuePending: {
              on: {
                CONNECTED: { target: 'current', actions: 'certificateInForce' },
                CERTIFICATE_STORED: { target: 'current', actions: 'certificateInForce' },
              },
            },
          },
        },
      },
    },
  },
});

export type AgentMachine = typeof agentMachine;

/** State names of an agent actor's snapshot value. */
export function describeAgentState(value: unknown): { lifecycle: string; connection?: string; certificate?: string } {
  if (typeof value === 'string') return { lifecycle: value };
  const active = (value as { active?: { connection?: string; certificate?: string } } | null)?.active;
  if (active) return { lifecycle: 'active', connection: active.connection, certificate: active.certificate };
  return { lifecycle: 'unknown' };
}
