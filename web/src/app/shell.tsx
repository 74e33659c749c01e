/** The frame around every screen: navigation by role, the pending-registrations badge, feed status, sign-out, and the screen itself (loaded on demand). */
import type { ComponentType } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { listRegistrations } from '../api/agents';
import { describeError } from '../api/http';
import { ErrorNote, Loading } from '../ui/kit';
import { signOut } from './sign-out';
import { feed, feedStatus, useFeedTopic } from './feed';
import { loc, match, navigate, onLinkClick } from './router';
import { home, screens, type Screen, type ScreenProps } from './routes';
import { access, session, type Access } from './session';

const loaded = new Map<Screen, ComponentType<ScreenProps>>();

function ScreenHost({ screen, params }: { screen: Screen; params: Record<string, string> }) {
  const [Comp, setComp] = useState<ComponentType<ScreenProps> | null>(() => loaded.get(screen) ?? null);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    const known = loaded.get(screen);
    if (known) return void setComp(() => known);
    setComp(null);
    setError(null);
    let live = true;
    screen.load().then(
      (m) => {
        loaded.set(screen, m.default);
        if (live) setComp(() => m.default);
      },
      (err: unknown) => live && setError(new Error(`This screen could not be loaded (${describeError(err)}). Reload the page; Steward may have been updated.`)),
    );
    return () => void (live = false);
  }, [screen]);
  useEffect(() => {
    document.title = `${screen.title} · Steward`;
  }, [screen]);
  if (error) return <ErrorNote error={error} />;
  if (!Comp) return <Loading what={`Loading ${screen.title.toLowerCase()}`} />;
  return <Comp params={params} />;
}

/** Pending registrations for the badge: read again when the feed's registrations topic reports one made or decided. */
function usePendingCount(a: Access): number | null {
  const [count, setCount] = useState<number | null>(null);
  const load = () => {
    if (!a.globalAdmin) return;
    listRegistrations().then(
      (r) => setCount(r.registrations.length),
      () => setCount(null),
    );
  };
  useEffect(load, [a.globalAdmin, loc.value.path]);
  // One read for a burst of frames.
  const soon = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  useEffect(() => () => clearTimeout(soon.current), []);
  useFeedTopic(
    'registrations',
    (f) => {
      if ((f.type !== 'registration' && f.type !== 'resync') || soon.current) return;
      soon.current = setTimeout(() => {
        soon.current = undefined;
        load();
      }, 250);
    },
    a.globalAdmin,
  );
  return count;
}

export function Shell({ a }: { a: Access }) {
  const path = loc.value.path;
  const pending = usePendingCount(a);
  const [menuOpen, setMenuOpen] = useState(false);
  useEffect(() => setMenuOpen(false), [path]);

  if (path === '/' || path === '/signin') {
    navigate(home(a), { replace: true });
    return null;
  }
  let current: { screen: Screen; params: Record<string, string> } | null = null;
  for (const s of screens) {
    const params = match(s.path, path);
    if (params) {
      current = { screen: s, params };
      break;
    }
  }
  const status = feedStatus.value;

  return (
    <div class="shell" onClick={onLinkClick}>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="topbar">
        <button type="button" class="menu-toggle quiet" aria-expanded={menuOpen} aria-controls="nav" onClick={() => setMenuOpen(!menuOpen)}>
          Menu
        </button>
        <a class="brand" href={home(a)}>
          Steward
        </a>
        {status === 'refused' ? (
          <span class="feed-status refused" role="alert">
            Live updates are off: you have too many Steward tabs, devices or scripts following live updates. Close one, then{' '}
            <button type="button" class="quiet" onClick={() => feed.tryAgain()}>
              try again
            </button>
            .
          </span>
        ) : (
          <span class={`feed-status ${status}`} title="Live updates">
            {status === 'open' ? 'Live' : status === 'connecting' ? 'Connecting…' : status === 'waiting' ? 'Reconnecting…' : ''}
          </span>
        )}
        <a class="whoami" href="/sessions" title={`${a.did} — your sessions`}>
          {a.name}
        </a>
        <button type="button" class="quiet" onClick={() => void signOut()}>
          Sign out
        </button>
      </header>
      <nav id="nav" class={`sidenav${menuOpen ? ' open' : ''}`} aria-label="Screens">
        <ul>
          {screens
            .filter((s) => s.nav && s.show(a))
            .map((s) => {
              const active = path === s.path || path.startsWith(s.path + '/');
              return (
                <li key={s.path}>
                  <a href={s.path} aria-current={active ? 'page' : undefined} class={active ? 'active' : ''}>
                    {s.title}
                    {s.path === '/registrations' && pending ? (
                      <span class="badge count" aria-label={`${pending} pending`}>
                        {pending}
                      </span>
                    ) : null}
                  </a>
                </li>
              );
            })}
        </ul>
        <p class="nav-foot">
          <a href="/api/docs">API reference</a>
        </p>
      </nav>
      <main id="main" tabIndex={-1}>
        {!current ? (
          <div class="empty">
            <p class="empty-title">There is no page at {path}.</p>
            <p>
              <a href={home(a)}>Go to the start page</a>.
            </p>
          </div>
        ) : !current.screen.show(a) ? (
          <div class="empty">
            <p class="empty-title">{current.screen.title} is not available to you.</p>
            <p>Your role does not include this screen. Ask a global admin if you need it.</p>
          </div>
        ) : (
          <ScreenHost key={current.screen.path} screen={current.screen} params={current.params} />
        )}
      </main>
    </div>
  );
}

export function App() {
  const s = session.value;
  const a = access.value;
  const [SignIn, setSignIn] = useState<ComponentType<{ reason?: string }> | null>(null);
  useEffect(() => {
    if (s.status === 'signed-out' && !SignIn) {
      import('../screens/signin').then(
        (m) => setSignIn(() => m.default),
        () => setSignIn(null),
      );
    }
  }, [s.status]);
  if (s.status === 'loading') return <Loading what="Loading Steward" />;
  if (s.status === 'signed-out' || !a) return SignIn ? <SignIn reason={s.status === 'signed-out' ? s.reason : undefined} /> : <Loading what="Loading the sign-in page" />;
  return <Shell a={a} />;
}
