/**
 * Sign-in (DESIGN §3): this browser's own Ed25519 key (WebCrypto, not extractable, kept in
 * IndexedDB) signs the login challenge; the same key claims an account from a claim or
 * invitation link. Or a wallet approves this browser (device approval, device-signin.tsx), which
 * signs it in as the wallet's identity — first on the page where the browser can hold no key.
 */
import { useEffect, useState } from 'preact/hooks';
import * as auth from '../api/auth';
import { ApiError, describeError } from '../api/http';
import { loadSession } from '../app/session';
import { createBrowserKey, deleteBrowserKey, keysAvailable, loadBrowserKey, signText, type BrowserKey } from '../crypto/browser-key';
import { Action, ErrorNote, Field, Loading, Notice, val } from '../ui/kit';
import { DeviceSignIn } from './device-signin';

async function signIn(key: BrowserKey): Promise<void> {
  const ch = await auth.challenge(key.did);
  const signature = await signText(key, auth.loginMessage(ch.nonce));
  await auth.login(ch.challengeId, key.did, signature);
  await loadSession();
}

function describeLogin(err: unknown): string {
  if (err instanceof ApiError && err.code === 'no_account') {
    return "This browser's key is not linked to an account on this Steward. Claim an account with it first: paste a claim link or an invitation link below.";
  }
  return describeError(err);
}

export default function SignIn({ reason }: { reason?: string }) {
  const secure = keysAvailable();
  const [key, setKey] = useState<BrowserKey | null | undefined>(undefined);
  const [keyError, setKeyError] = useState<unknown>(null);
  const [loginError, setLoginError] = useState<string | null>(null);
  const initial = new URLSearchParams(location.search).get('claim') ?? '';
  const [link, setLink] = useState(initial);
  const [name, setName] = useState('');
  const [linkError, setLinkError] = useState<string | null>(null);
  const [claimError, setClaimError] = useState<unknown>(null);
  const [claimInfo, setClaimInfo] = useState<string | null>(null);

  useEffect(() => {
    document.title = 'Sign in · Steward';
    if (!secure) return void setKey(null);
    loadBrowserKey().then(setKey, (err: unknown) => {
      setKeyError(err);
      setKey(null);
    });
  }, []);

  const create = async () => {
    setKeyError(null);
    try {
      setKey(await createBrowserKey());
    } catch (err) {
      setKeyError(err);
    }
  };

  const login = async () => {
    if (!key) return;
    setLoginError(null);
    try {
      await signIn(key);
    } catch (err) {
      setLoginError(describeLogin(err));
    }
  };

  const doClaim = async () => {
    setClaimError(null);
    setClaimInfo(null);
    const parsed = auth.parseClaimText(link);
    if (!parsed) {
      setLinkError('Paste the whole link: a claim link ends in /api/user/claim/<token>, an invitation link in /api/invitations/<token>.');
      return;
    }
    setLinkError(null);
    try {
      const k = key ?? (await createBrowserKey());
      if (!key) setKey(k);
      let token = parsed.token;
      if (parsed.kind === 'invitation') {
        const inv = await auth.invitation(token);
        setClaimInfo(`Invitation for ${inv.name} <${inv.email}> as ${inv.role}.`);
        const opened = await auth.openInvitation(token);
        const next = auth.parseClaimText(opened.connectionString);
        if (!next) throw new Error('the invitation did not give a claim link');
        token = next.token;
      }
      const info = await auth.claimInfo(token);
      const signature = await signText(k, auth.claimMessage(token, info.nonce));
      await auth.claim(token, { did: k.did, signature, ...(name.trim() ? { name: name.trim() } : {}) });
      setClaimInfo('The account is now yours. Signing in…');
      await signIn(k);
    } catch (err) {
      setClaimError(err);
    }
  };

  return (
    <main class="signin" id="main">
      <h1>Sign in to Steward</h1>
      {reason && <Notice kind="warn">{reason}</Notice>}
      {!secure && (
        <Notice kind="warn">
          This page is not a secure context, so the browser offers no signing keys here: sign in with your wallet below, or open Steward over
          HTTPS (or on this machine at http://localhost) to give this browser a key of its own.
        </Notice>
      )}
      {!secure && <DeviceSignIn />}

      <section class="panel" aria-labelledby="key-h">
        <h2 id="key-h">With this browser's key</h2>
        <p class="muted">
          This browser can hold its own signing key. The private key never leaves the browser and cannot be read by any page, this one included; the
          browser only signs with it. A DID is one key: this browser's key and a wallet (<code>steward wallet</code> or a phone wallet) are two
          different identities, and an account claimed with one cannot be signed into with the other. To use your wallet's account here, sign
          in with your wallet below instead.
        </p>
        {key === undefined ? (
          <Loading what="Looking for this browser's key" />
        ) : key ? (
          <>
            <p>
              This browser's identity: <code data-testid="browser-did">{key.did}</code>
            </p>
            {loginError && (
              <div class="note error" role="alert">
                {loginError}
              </div>
            )}
            <div class="actions">
              <Action kind="primary" onRun={login}>
                Sign in with this browser's key
              </Action>
              <Action
                kind="danger"
                confirm={"Forget this browser's key? The account it claimed can then no longer be signed into from this browser."}
                onRun={async () => {
                  await deleteBrowserKey();
                  setKey(null);
                }}
              >
                Forget this key
              </Action>
            </div>
          </>
        ) : secure ? (
          <>
            <p>This browser has no key yet. Create one, then claim an account with it below (or ask an admin to send you a claim link).</p>
            <Action kind="primary" onRun={create}>
              Create a key for this browser
            </Action>
          </>
        ) : null}
        <ErrorNote error={keyError} />
      </section>

      <section class="panel" aria-labelledby="claim-h">
        <h2 id="claim-h">Claim an account with this browser's key</h2>
        <p class="muted">
          Paste the claim link you were given (the owner's link printed on Steward's console, a link an admin sent you) or an invitation link. The
          account then belongs to this browser's key.
        </p>
        <form
          onSubmit={(e) => {
            e.preventDefault();
            void doClaim();
          }}
        >
          <Field label="Claim link or invitation link" error={linkError}>
            <input name="claim" value={link} onInput={(e) => setLink(val(e))} placeholder="https://steward.example.org/api/user/claim/…" required disabled={!secure} />
          </Field>
          <Field label="Your name" hint="Used only for an open invite link, which creates a new account.">
            <input name="name" value={name} onInput={(e) => setName(val(e))} disabled={!secure} autocomplete="name" />
          </Field>
          <Action type="button" kind="primary" onRun={doClaim} disabled={!secure || !link.trim()}>
            Claim and sign in
          </Action>
        </form>
        {claimInfo && <Notice kind="ok">{claimInfo}</Notice>}
        <ErrorNote error={claimError} title="The claim did not go through." />
      </section>

      {secure && <DeviceSignIn />}
    </main>
  );
}
