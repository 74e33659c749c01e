/** Channels, members, messages and bridges (docs/channels.md). */
import { del, get, patch, post, seg } from './http';

export interface Channel {
  id: string;
  workspaceId: string | null;
  name: string;
  slug: string;
  description: string;
  topic: string;
  isPublic: boolean;
  isArchived: boolean;
  creatorDid: string;
  createdAt: string;
  updatedAt: string;
  memberCount?: number;
  messageCount?: number;
}
export type ChannelRole = 'member' | 'moderator' | 'owner';
export interface ChannelMember {
  id: string;
  memberDid: string;
  memberType: 'user' | 'agent';
  role: ChannelRole;
  joinedAt: string;
  invitedBy: string | null;
}
export interface Message {
  id: string;
  channelId: string;
  threadId: string | null;
  authorDid: string;
  authorType: 'user' | 'agent';
  content: string;
  metadata: { mentions?: string[]; [k: string]: unknown };
  reactions: Record<string, string[]>;
  editedAt: string | null;
  deletedAt: string | null;
  createdAt: string;
  /** On top-level messages: how many replies its thread has, and when the last came. */
  replyCount?: number;
  lastReplyAt?: string | null;
}

export const listChannels = (workspace: string, includeArchived = false) => get<{ channels: Channel[] }>('/api/channels', { workspace, includeArchived });
export const createChannel = (body: { name: string; workspaceId?: string; description?: string; slug?: string; isPublic?: boolean }) =>
  post<{ channel: Channel }>('/api/channels', body);
export const getChannel = (id: string) => get<{ channel: Channel; members: ChannelMember[]; stats: { messageCount: number; memberCount: number } }>(`/api/channels/${seg(id)}`);
export const updateChannel = (id: string, body: { name?: string; description?: string; topic?: string; isArchived?: boolean }) => patch<{ channel: Channel }>(`/api/channels/${seg(id)}`, body);
export const addChannelMember = (id: string, memberDid: string, memberType: 'user' | 'agent', role: ChannelRole = 'member') =>
  post<{ member: ChannelMember }>(`/api/channels/${seg(id)}/members`, { memberDid, memberType, role });
export const removeChannelMember = (id: string, did: string) => del<{ success: true }>(`/api/channels/${seg(id)}/members/${seg(did)}`);

export const listMessages = (id: string, q: { limit?: number; offset?: number; threadId?: string }) => get<{ messages: Message[] }>(`/api/channels/${seg(id)}/messages`, q);
export const postMessage = (id: string, content: string, threadId?: string) => post<{ message: Message }>(`/api/channels/${seg(id)}/messages`, { content, ...(threadId ? { threadId } : {}) });
export const editMessage = (id: string, messageId: string, content: string) => patch<{ message: Message }>(`/api/channels/${seg(id)}/messages/${seg(messageId)}`, { content });
export const deleteMessage = (id: string, messageId: string) => del<{ success: true }>(`/api/channels/${seg(id)}/messages/${seg(messageId)}`);
export const react = (id: string, messageId: string, emoji: string, add: boolean) =>
  post<{ message: Message }>(`/api/channels/${seg(id)}/messages/${seg(messageId)}/reactions`, { emoji, add });

export interface Bridge {
  id: string;
  channelId: string;
  externalService: 'webhook' | 'teams';
  externalChannelId: string;
  externalChannelName: string;
  externalWorkspaceId: string;
  syncDirection: 'incoming' | 'outgoing' | 'bidirectional';
  isSyncEnabled: boolean;
  createdAt: string;
}
export const listBridges = (id: string) => get<{ bridges: Bridge[] }>(`/api/channels/${seg(id)}/bridges`);
export const createBridge = (
  id: string,
  body: Pick<Bridge, 'externalService' | 'externalChannelId' | 'externalChannelName' | 'externalWorkspaceId' | 'syncDirection'> & { config: Record<string, string> },
) => post<{ bridge: Bridge }>(`/api/channels/${seg(id)}/bridges`, body);
export const updateBridge = (id: string, bridgeId: string, body: { isSyncEnabled?: boolean; syncDirection?: Bridge['syncDirection'] }) =>
  patch<{ bridge: Bridge }>(`/api/channels/${seg(id)}/bridges/${seg(bridgeId)}`, body);
export const deleteBridge = (id: string, bridgeId: string) => del<{ success: true }>(`/api/channels/${seg(id)}/bridges/${seg(bridgeId)}`);

export const markRead = (id: string, messageId: string) => post<{ channelId: string; lastReadMessageId: string; unread: number }>(`/api/channels/${seg(id)}/read`, { messageId });
export const myUnread = () => get<{ channels: Array<{ channelId: string; unread: number; lastReadMessageId: string | null }> }>('/api/me/unread');
