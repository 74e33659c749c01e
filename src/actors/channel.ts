/**
 * The channel actor: one per channel (actor id = the channel id), the single writer of its
 * channel. Every change to the channel and its messages is an event here, so that
 *
 * - messages get a total order: the actor accepts commands one at a time, and hands each, in
 *   that order, to one writer per channel (provided by src/services/channels.ts), which numbers
 *   posts consecutively (`seq`), checks membership, stores, and dispatches (live feed, @mentions,
 *   bridges);
 * - the archive state is decided in one place: an archived channel refuses posts, edits,
 *   deletions and reactions (its history stays readable).
 *
 *   boot ──(loadChannel)──┬─▶ open ◀──UPDATE isArchived false── archived
 *        │                └─▶ archived ◀──UPDATE isArchived true── open
 *        └─(fails)─▶ unavailable (final; the host drops it and the next request boots again)
 *
 * The context is the channel id alone, and posting does not change it: the host persists a
 * snapshot after every transition that changes something, so a channel's snapshot is written when
 * it is archived or reopened, not once per message. The messages live in the channel_messages
 * collection, and the writer continues their numbering from the highest `seq` stored. Commands
 * carry a `reply` (the caller's promise), which is never part of the snapshot.
 */
import { assertEvent, fromPromise, setup } from 'xstate';

export const CHANNEL_ACTOR_KIND = 'channel';

export interface ChannelActorContext {
  channelId: string;
}

/** Settles the caller's promise; the writer calls it once the command is stored (or refused). */
export interface Reply {
  resolve(value: unknown): void;
  reject(err: unknown): void;
}

/** A command the writer carries out, in the order the actor accepted it. */
export type ChannelCommand =
  | { kind: 'post'; draft: unknown; reply: Reply }
  | { kind: 'change'; change: unknown; reply: Reply }
  | { kind: 'update'; fields: unknown; isArchived: boolean | undefined; reply: Reply };

export type ChannelActorEvent =
  /** A new message (`draft` is the writer's business). */
  | { type: 'POST'; draft: unknown; reply: Reply }
  /** An edit, deletion or reaction on a message. */
  | { type: 'CHANGE'; change: unknown; reply: Reply }
  /** Channel fields and, when given, the archive state. */
  | { type: 'UPDATE'; fields: unknown; isArchived?: boolean; reply: Reply };

export interface LoadedChannel {
  isArchived: boolean;
}

export const channelMachine = setup({
  types: {} as { context: ChannelActorContext; events: ChannelActorEvent; input: { channelId: string } },
  actors: {
    // Provided by the channel service; the default fails so a machine without it cannot boot silently.
    loadChannel: fromPromise<LoadedChannel, { channelId: string }>(async () => {
      throw new Error('loadChannel is not provided');
    }),
  },
  actions: {
    /** Hands a command to the channel's writer (provided by the channel service). */
    write: (_args, _command: ChannelCommand) => {
      throw new Error('write is not provided');
    },
    /** Refuses a command because the channel is archived (provided by the channel service). */
    refuseArchived: (_args, _reply: Reply) => {
      throw new Error('refuseArchived is not provided');
    },
  },
  guards: {
    archives: ({ event }) => event.type === 'UPDATE' && event.isArchived === true,
    unarchives: ({ event }) => event.type === 'UPDATE' && event.isArchived === false,
    loadedArchived: ({ event }) => (event as unknown as { output: LoadedChannel }).output.isArchived,
  },
}).createMachine({
  id: 'channel',
  context: ({ input }) => ({ channelId: input.channelId }),
  initial: 'boot',
  states: {
    boot: {
      invoke: {
        src: 'loadChannel',
        input: ({ context }) => ({ channelId: context.channelId }),
        onDone: [{ guard: 'loadedArchived', target: 'archived' }, { target: 'open' }],
        onError: 'unavailable',
      },
    },
    open: {
      on: {
        POST: {
          actions: { type: 'write', params: ({ event }) => ({ kind: 'post', draft: event.draft, reply: event.reply }) as ChannelCommand },
        },
        CHANGE: {
          actions: { type: 'write', params: ({ event }) => ({ kind: 'change', change: event.change, reply: event.reply }) as ChannelCommand },
        },
        UPDATE: [
          { guard: 'archives', target: 'archived', actions: { type: 'write', params: updateCommand } },
          { actions: { type: 'write', params: updateCommand } },
        ],
      },
    },
    archived: {
      on: {
        POST: { actions: { type: 'refuseArchived', params: ({ event }) => event.reply } },
        CHANGE: { actions: { type: 'refuseArchived', params: ({ event }) => event.reply } },
        UPDATE: [
          { guard: 'unarchives', target: 'open', actions: { type: 'write', params: updateCommand } },
          { actions: { type: 'write', params: updateCommand } },
        ],
      },
    },
    unavailable: { type: 'final' },
  },
});

function updateCommand({ event }: { event: ChannelActorEvent }): ChannelCommand {
  assertEvent(event, 'UPDATE');
  return { kind: 'update', fields: event.fields, isArchived: event.isArchived, reply: event.reply };
}
