import type { RouteDef } from '../router.js';
import type { AppContext } from '../../server.js';

export function userRoutes(_ctx: AppContext): RouteDef[] {
  return [];
}
