import type { RouteDef } from '../router.js';
import type { AppContext } from '../../server.js';

export function claimRoutes(_ctx: AppContext): RouteDef[] {
  return [];
}
