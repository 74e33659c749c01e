/**
 * Field schemas the views share (what endpoints answer): each view is one zod schema beside the
 * service that builds it, its TypeScript type inferred from it, and these are its common parts.
 * The schemas cost nothing at run time: views are built as plain objects and only tests check
 * answers against them (STEWARD_CHECK_RESPONSES).
 */
import { z } from 'zod';
import { CAPABILITIES } from './capabilities.js';
import { GLOBAL_ROLES, WORKSPACE_ROLES, CHANNEL_ROLES, type ChannelRole, type WorkspaceRole } from './roles.js';

/** A time as every answer writes it: ISO 8601 in UTC (`2026-11-25T13:37:32.000Z`). */
export const timestamp = z.iso.datetime();

export const capability = z.enum(CAPABILITIES);
export const capabilityList = z.array(capability);

export const globalRole = z.enum(GLOBAL_ROLES);
export const workspaceRole = z.enum(WORKSPACE_ROLES as [WorkspaceRole, ...WorkspaceRole[]]);
export const channelRole = z.enum(CHANNEL_ROLES as [ChannelRole, ...ChannelRole[]]);

/** A JSON object of any fields (metadata, params, config). */
export const jsonObject = z.record(z.string(), z.unknown());

/** The paging fields of a list answered one page at a time (docs/api.md, "Paging"). */
export const pageFields = {
  total: z.number().int().min(0),
  page: z.number().int().min(1),
  pageSize: z.number().int().min(1),
  totalPages: z.number().int().min(0),
};
