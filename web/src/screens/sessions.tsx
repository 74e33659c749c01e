/**
 * Your sessions (GET /api/me/sessions): where you are signed in — this browser and others, the
 * wallet's command line, scripts — with how each was made and from where; sign out of one, of all
 * the others, or of this one.
 */
import { useState } from 'preact/hooks';
import { endSession, mySessions, type MySession } from '../api/auth';
import { useLoad } from '../app/hooks';
import { signOut } from '../app/sign-out';
import { Action, Badge, Empty, ErrorNote, Loading, Notice, Time } from '../ui/kit';

const HOW: Record<string, string> = {
  login: 'Signed in with a key (a wallet, or a browser\u2019s own key)',
  device: 'This browser approved by a wallet',
};

/** A short name for a User-Agent: the browser or program, and the system when it says. */
export function clientName(ua: string | null): string {
  if (!ua) return 'Unknown client';
  const cli = /^steward-cli \(([^;)]+)/.exec(ua);
  if (cli) return `Steward CLI on ${cli[1]}`;
  if (ua === 'node') return 'A Node.js program';
  const browser = /(Edg|OPR|Firefox|Chrome|Chromium|Safari)\/[\d.]+/.exec(ua)?.[0]?.replace('Edg/', 'Edge/').replace('OPR/', 'Opera/');
  const system = /\((?:X11; )?([^;)]+)/.exec(ua)?.[1];
  if (browser) return system ? `${browser.split('.')[0]} on ${system}` : browser.split('.')[0]!;
  return ua.length > 60 ? `${ua.slice(0, 57)}…` : ua;
}

export default function Sessions() {
  const list = useLoad(mySessions, []);
  const [error, setError] = useState<unknown>(null);
  const [done, setDone] = useState<string | null>(null);

  if (list.error && !list.data) return <ErrorNote error={list.error} />;
  if (!list.data) return <Loading what="Loading your sessions" />;
  const sessions = list.data.sessions;
  const others = sessions.filter((x) => !x.current);

  const end = async (x: MySession) => {
    setError(null);
    setDone(null);
    try {
      await endSession(x.id);
      list.reload();
    } catch (err) {
      setError(err);
    }
  };
  const endOthers = async () => {
    setError(null);
    setDone(null);
    let ended = 0;
    try {
      for (const x of others) {
        await endSession(x.id);
        ended++;
      }
    } catch (err) {
      setError(err);
    }
    list.reload();
    setDone(`Signed out of ${ended} other session${ended === 1 ? '' : 's'}.`);
  };

  return (
    <>
      <h1>Sessions</h1>
      <p class="muted">Where you are signed in. Signing out of a session ends it on Steward at once: whoever uses it has to sign in again.</p>
      {done && <Notice kind="ok">{done}</Notice>}
      <ErrorNote error={error} />
      {sessions.length === 0 ? (
        <Empty title="No sessions">Sign in again to start one.</Empty>
      ) : (
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                <th>Client</th>
                <th>How</th>
                <th>Address</th>
                <th>Signed in</th>
                <th>Last used</th>
                <th>
                  <span class="sr-only">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {sessions.map((x) => (
                <tr key={x.id} data-session={x.id} data-current={x.current ? 'true' : undefined}>
                  <td title={x.userAgent ?? undefined}>
                    {clientName(x.userAgent)} {x.current && <Badge kind="ok">this browser</Badge>}
                  </td>
                  <td>{x.method ? HOW[x.method] : <span class="muted">not recorded</span>}</td>
                  <td>{x.address ?? <span class="muted">not recorded</span>}</td>
                  <td>
                    <Time iso={x.createdAt} />
                  </td>
                  <td>
                    <Time iso={x.lastUsedAt} />
                  </td>
                  <td>
                    {x.current ? (
                      <Action kind="quiet" onRun={signOut}>
                        Sign out
                      </Action>
                    ) : (
                      <Action kind="danger" onRun={() => end(x)} label={`Sign out of ${clientName(x.userAgent)}, signed in ${x.createdAt}`}>
                        Sign out
                      </Action>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <div class="actions">
        <Action kind="danger" onRun={endOthers} disabled={others.length === 0}>
          Sign out of all other sessions
        </Action>
        <Action onRun={signOut}>Sign out of this browser</Action>
      </div>
    </>
  );
}
