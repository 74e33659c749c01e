/**
 * Sign-in by device approval (docs/identity.md): this browser asks for a code, the person approves
 * it with their wallet (`steward wallet approve <server> <code>`, or a wallet scanning the QR
 * code), and the page polls at the interval the server gave until it is signed in (the session
 * cookie is set by the poll's answer). Polling pauses while the tab is hidden; a refused or
 * expired code says so and offers a new one. Works on plain HTTP: the browser signs nothing.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import * as auth from '../api/auth';
import { ApiError } from '../api/http';
import { loadSession } from '../app/session';
import { Action, CommandBlock, ErrorNote, Notice } from '../ui/kit';

type State =
  | { kind: 'idle' }
  | { kind: 'waiting'; start: auth.DeviceStart; deadline: number }
  | { kind: 'denied' }
  | { kind: 'expired' }
  | { kind: 'signed-in' };

/** RFC 8628: each slow_down adds 5 s to the interval. */
const SLOW_DOWN_STEP_MS = 5000;

const mmss = (ms: number) => {
  const s = Math.max(0, Math.ceil(ms / 1000));
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`;
};

/** Polls while `start` waits: at its interval, never while the tab is hidden; `onEnd` gets how it ended. */
function usePolling(start: auth.DeviceStart | null, onEnd: (how: 'signed-in' | 'denied' | 'expired') => void, onTrouble: (err: unknown) => void): void {
  const ended = useRef(onEnd);
  ended.current = onEnd;
  const trouble = useRef(onTrouble);
  trouble.current = onTrouble;
  useEffect(() => {
    if (!start) return;
    let interval = start.interval * 1000;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let live = true;
    let inFlight = false;
    const schedule = () => {
      clearTimeout(timer);
      if (live && document.visibilityState === 'visible') timer = setTimeout(poll, interval);
    };
    const poll = async () => {
      if (!live || inFlight || document.visibilityState !== 'visible') return;
      inFlight = true;
      try {
        await auth.pollDevice(start.deviceCode);
        live = false;
        ended.current('signed-in');
        return;
      } catch (err) {
        const code = err instanceof ApiError ? err.code : '';
        if (code === 'access_denied' || code === 'expired_token') {
          live = false;
          ended.current(code === 'access_denied' ? 'denied' : 'expired');
          return;
        }
        if (code === 'slow_down') interval += SLOW_DOWN_STEP_MS;
        else if (code !== 'authorization_pending') trouble.current(err);
        else trouble.current(null);
      } finally {
        inFlight = false;
      }
      schedule();
    };
    // Hidden: no polls (a timer already set is cleared); visible again: polling resumes after an interval.
    const onVisibility = () => (document.visibilityState === 'visible' ? schedule() : clearTimeout(timer));
    document.addEventListener('visibilitychange', onVisibility);
    schedule();
    return () => {
      live = false;
      clearTimeout(timer);
      document.removeEventListener('visibilitychange', onVisibility);
    };
  }, [start]);
}

export function DeviceSignIn() {
  const [state, setState] = useState<State>({ kind: 'idle' });
  const [error, setError] = useState<unknown>(null);
  const [trouble, setTrouble] = useState<unknown>(null);
  const [now, setNow] = useState(Date.now());
  const waiting = state.kind === 'waiting' ? state : null;

  const begin = async () => {
    setError(null);
    setTrouble(null);
    try {
      const start = await auth.startDevice();
      setState({ kind: 'waiting', start, deadline: Date.now() + start.expiresIn * 1000 });
    } catch (err) {
      setError(err);
    }
  };

  usePolling(
    waiting?.start ?? null,
    (how) => {
      if (how !== 'signed-in') return setState({ kind: how });
      setState({ kind: 'signed-in' });
      loadSession().catch((err: unknown) => setError(err));
    },
    setTrouble,
  );

  // The countdown, once a second; at zero the code is expired here too (the server says so as well).
  useEffect(() => {
    if (!waiting) return;
    const t = setInterval(() => {
      const n = Date.now();
      setNow(n);
      if (n >= waiting.deadline) setState({ kind: 'expired' });
    }, 1000);
    setNow(Date.now());
    return () => clearInterval(t);
  }, [waiting]);

  const approve = waiting ? `wallet approve ${location.origin} ${waiting.start.userCode}` : '';

  return (
    <section class="panel device" aria-labelledby="device-h">
      <h2 id="device-h">With your wallet (device approval)</h2>
      <p class="muted">
        Sign this browser in as the identity of your wallet: the page shows a code, you approve it with your wallet, and this browser is signed in. It
        needs no key in the browser, so it works on plain HTTP too.
      </p>
      {state.kind === 'idle' && (
        <Action kind="primary" onRun={begin}>
          Sign in with my wallet
        </Action>
      )}
      {waiting && (
        <div class="device-code">
          <div>
            <p>Your code:</p>
            <p class="user-code" data-testid="user-code" aria-label={`Code ${waiting.start.userCode.split('').join(' ')}`}>
              {waiting.start.userCode}
            </p>
            <p>Approve it with your wallet, on a machine where it is set up:</p>
            <CommandBlock text={`steward ${approve}`} caption="With Steward installed" label="Command that approves this browser (installed)" />
            <CommandBlock
              text={`npm run steward -- ${approve}`}
              caption="From a checkout of Steward's sources"
              label="Command that approves this browser (from a checkout)"
            />
            <p class="muted">
              Or scan the QR code with a wallet app. The code expires in{' '}
              <strong data-testid="device-countdown">{mmss(waiting.deadline - now)}</strong>.
            </p>
            <p role="status" aria-live="polite">
              Waiting for your wallet…
            </p>
            {trouble ? <ErrorNote error={trouble} title="Steward could not be asked; the page keeps trying." /> : null}
            <div class="actions">
              <button type="button" class="quiet" onClick={() => setState({ kind: 'idle' })}>
                Cancel
              </button>
            </div>
          </div>
          <img class="qr" src={waiting.start.verificationQr} alt={`QR code of ${waiting.start.verificationUrl}`} width={192} height={192} />
        </div>
      )}
      {state.kind === 'denied' && (
        <>
          <Notice kind="warn">The sign-in was refused from the wallet. This browser is not signed in.</Notice>
          <Action kind="primary" onRun={begin}>
            Start again
          </Action>
        </>
      )}
      {state.kind === 'expired' && (
        <>
          <Notice kind="warn">The code expired before it was approved.</Notice>
          <Action kind="primary" onRun={begin}>
            Start again
          </Action>
        </>
      )}
      {state.kind === 'signed-in' && <Notice kind="ok">Approved. Signing in…</Notice>}
      {error ? <ErrorNote error={error} /> : null}
    </section>
  );
}
