/** Signing out of this browser: the session ends on the server, the feed closes, the page returns to sign-in. */
import { logout } from '../api/auth';
import { feed } from './feed';
import { navigate } from './router';
import { session } from './session';

export async function signOut(): Promise<void> {
  try {
    await logout();
  } catch {
    // the session may already be gone; the page signs out either way
  }
  feed.stop();
  session.value = { status: 'signed-out', reason: 'You have signed out.' };
  navigate('/signin', { replace: true });
}
