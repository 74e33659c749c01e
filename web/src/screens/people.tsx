/**
 * People: workspaces with their members and roles; the user directory (admin level) with its
 * filters, unclaimed users and their claim QR; invitations (owners); grants of a user.
 * Open invitations are listed by the server and revoked by id.
 */
import { useState } from 'preact/hooks';
import * as people from '../api/people';
import type { User } from '../api/people';
import { CAPABILITIES, GLOBAL_ROLES, WORKSPACE_ROLES, type Capability, type GlobalRole, type WorkspaceRole } from '../api/types';
import * as wsApi from '../api/workspaces';
import { useLoad } from '../app/hooks';
import { qp, setQuery } from '../app/router';
import { access } from '../app/session';
import { Action, Badge, CapabilityChecks, Copyable, Did, Empty, ErrorNote, Field, Loading, Notice, Options, Pager, Swatch, Table, Tabs, Time, val } from '../ui/kit';

function Workspaces() {
  const a = access.value!;
  const list = useLoad(() => wsApi.listWorkspaces(), []);
  const current = list.data?.workspaces.find((w) => w.slug === qp('ws')) ?? list.data?.workspaces[0];
  const members = useLoad(() => (current ? wsApi.listMembers(current.id) : Promise.resolve({ members: [] })), [current?.id]);
  const [error, setError] = useState<unknown>(null);
  const [newMember, setNewMember] = useState({ did: '', role: 'member' as WorkspaceRole });
  const [newWs, setNewWs] = useState({ name: '', color: '#1f5fbf' });
  const isAdmin = current ? a.atLeast('admin', current.id) : false;
  return (
    <div class="split">
      <nav aria-label="Workspaces">
        {!list.data ? (
          <Loading />
        ) : (
          <ul class="list">
            {list.data.workspaces.map((w) => (
              <li key={w.id}>
                <button type="button" class={`item${current?.id === w.id ? ' active' : ''}`} onClick={() => setQuery({ ws: w.slug })}>
                  <Swatch color={w.color} />
                  {w.name} {w.isDefault && <Badge>default</Badge>}
                </button>
              </li>
            ))}
          </ul>
        )}
        {a.globalAdmin && (
          <div class="panel">
            <h3>New workspace</h3>
            <Field label="Name">
              <input value={newWs.name} onInput={(e) => setNewWs({ ...newWs, name: val(e) })} />
            </Field>
            <Field label="Colour">
              <input type="color" value={newWs.color} onInput={(e) => setNewWs({ ...newWs, color: val(e) })} />
            </Field>
            <Action
              kind="primary"
              disabled={!newWs.name.trim()}
              onRun={async () => {
                const r = await wsApi.createWorkspace({ name: newWs.name.trim(), color: newWs.color });
                setNewWs({ ...newWs, name: '' });
                list.reload();
                setQuery({ ws: r.workspace.slug });
              }}
              onError={setError}
            >
              Create
            </Action>
          </div>
        )}
      </nav>
      <div>
        <ErrorNote error={list.error ?? members.error ?? error} />
        {current && (
          <>
            <h2>
              <Swatch color={current.color} />
              {current.name} <span class="muted">/{current.slug}</span>
            </h2>
            {current.description && <p>{current.description}</p>}
            {members.data && members.data.members.length === 0 ? (
              <Empty title="No members yet." />
            ) : (
              <Table head={['Person', 'Role', 'Joined', <span class="muted">Actions</span>]}>
                {members.data?.members.map((m) => (
                  <tr key={m.userId}>
                    <td>
                      {m.name} <span class="muted">{m.email}</span>
                      <br />
                      {m.did ? <Did did={m.did} /> : <Badge kind="warn">unclaimed</Badge>}
                    </td>
                    <td>
                      {isAdmin ? (
                        <select
                          aria-label={`Role of ${m.name}`}
                          value={m.role}
                          onChange={async (e) => {
                            try {
                              await wsApi.setMemberRole(current.id, m.did ?? m.userId, val(e) as WorkspaceRole);
                              members.reload();
                            } catch (err) {
                              setError(err);
                              members.reload();
                            }
                          }}
                        >
                          <Options values={WORKSPACE_ROLES} />
                        </select>
                      ) : (
                        m.role
                      )}
                    </td>
                    <td>
                      <Time iso={m.joinedAt} />
                    </td>
                    <td>
                      {(isAdmin || m.did === a.did) && (
                        <Action
                          kind="danger"
                          confirm={`Remove ${m.name} from ${current.name}?`}
                          onRun={async () => {
                            await wsApi.removeMember(current.id, m.did ?? m.userId);
                            members.reload();
                          }}
                          onError={setError}
                        >
                          {m.did === a.did ? 'Leave' : 'Remove'}
                        </Action>
                      )}
                    </td>
                  </tr>
                ))}
              </Table>
            )}
            {isAdmin && (
              <div class="panel">
                <h3>Add a member</h3>
                <div class="row">
                  <Field label="DID (or the id of an unclaimed user)">
                    <input value={newMember.did} onInput={(e) => setNewMember({ ...newMember, did: val(e).trim() })} />
                  </Field>
                  <Field label="Role">
                    <select value={newMember.role} onChange={(e) => setNewMember({ ...newMember, role: val(e) as WorkspaceRole })}>
                      <Options values={WORKSPACE_ROLES} />
                    </select>
                  </Field>
                  <Action
                    kind="primary"
                    disabled={!newMember.did}
                    onRun={async () => {
                      await wsApi.addMember(current.id, newMember.did, newMember.role);
                      setNewMember({ ...newMember, did: '' });
                      members.reload();
                    }}
                    onError={setError}
                  >
                    Add
                  </Action>
                </div>
              </div>
            )}
          </>
        )}
      </div>
    </div>
  );
}

function Grants({ user, onClose }: { user: User; onClose: () => void }) {
  const a = access.value!;
  const ref = user.did ?? user.id;
  const list = useLoad(() => people.listGrants(ref), [ref]);
  const [caps, setCaps] = useState<Capability[]>([]);
  const [agentDid, setAgentDid] = useState('');
  const [expires, setExpires] = useState('');
  const [error, setError] = useState<unknown>(null);
  const [formError, setFormError] = useState<string | null>(null);
  return (
    <div class="panel" aria-label={`Grants of ${user.name}`}>
      <div class="row">
        <h3>Grants of {user.name}</h3>
        <button type="button" class="quiet" onClick={onClose}>
          Close
        </button>
      </div>
      <p class="muted">A grant lets a person who is not a global admin send intents of these capabilities to an agent (or to all agents); their workspace role must allow intents too.</p>
      <ErrorNote error={list.error ?? error} />
      {list.data && (list.data.grants.length === 0 ? <p class="muted">No grant.</p> : (
        <ul class="list">
          {list.data.grants.map((g) => (
            <li key={g.id} class="row">
              <span>
                {g.capabilities.join(', ')} on {g.agentDid ? <Did did={g.agentDid} /> : 'all agents'} · {g.expiresAt ? <>until <Time iso={g.expiresAt} absolute /></> : 'no end'}
              </span>
              <Action
                kind="danger"
                onRun={async () => {
                  await people.revokeGrant(ref, g.id);
                  list.reload();
                }}
                onError={setError}
              >
                Revoke
              </Action>
            </li>
          ))}
        </ul>
      ))}
      {a.globalAdmin && user.did && (
        <>
          <CapabilityChecks legend="Capabilities" options={CAPABILITIES} selected={caps} onChange={(c) => setCaps(c as Capability[])} />
          <div class="row">
            <Field label="Agent DID (empty: all agents)">
              <input value={agentDid} onInput={(e) => setAgentDid(val(e).trim())} />
            </Field>
            <Field label="Expires">
              <input type="datetime-local" value={expires} onInput={(e) => setExpires(val(e))} />
            </Field>
            <Action
              kind="primary"
              onRun={async () => {
                if (caps.length === 0) return setFormError('Choose at least one capability.');
                if (agentDid && !agentDid.startsWith('did:')) return setFormError('The agent is named by its DID.');
                if (expires && new Date(expires).getTime() <= Date.now()) return setFormError('The expiry must be in the future.');
                setFormError(null);
                await people.createGrant(ref, { agentDid: agentDid || null, capabilities: caps, ...(expires ? { expiresAt: new Date(expires).toISOString() } : {}) });
                setCaps([]);
                list.reload();
              }}
              onError={setError}
            >
              Grant
            </Action>
          </div>
          {formError && <p class="field-error">{formError}</p>}
        </>
      )}
    </div>
  );
}

function Directory() {
  const a = access.value!;
  const q = qp('q');
  const role = qp('role') as GlobalRole | '';
  const account = qp('account');
  const page = Math.max(1, Number(qp('page', '1')) || 1);
  const sortBy = (qp('sort', 'name') as 'name' | 'email' | 'registeredAt') || 'name';
  const list = useLoad(
    () => people.listUsers({ q: q || undefined, role: role || undefined, hasAccount: account === '' ? undefined : account === 'claimed', page, pageSize: 25, sortBy }),
    [q, role, account, page, sortBy],
  );
  const [grantsOf, setGrantsOf] = useState<User | null>(null);
  const [claim, setClaim] = useState<{ user: User; qrUrl: string; link: string; emailSent: boolean } | null>(null);
  const [error, setError] = useState<unknown>(null);
  const d = list.data;
  return (
    <div>
      <div class="toolbar" role="search">
        <Field label="Search">
          <input type="search" value={q} placeholder="Name, email or DID" onChange={(e) => setQuery({ q: val(e) || null, page: null })} />
        </Field>
        <Field label="Role">
          <select value={role} onChange={(e) => setQuery({ role: val(e) || null, page: null })}>
            <option value="">Any</option>
            <Options values={GLOBAL_ROLES} />
          </select>
        </Field>
        <Field label="Account">
          <select value={account} onChange={(e) => setQuery({ account: val(e) || null, page: null })}>
            <option value="">Any</option>
            <option value="claimed">Claimed</option>
            <option value="unclaimed">Unclaimed</option>
          </select>
        </Field>
        <Field label="Sort by">
          <select value={sortBy} onChange={(e) => setQuery({ sort: val(e) === 'name' ? null : val(e) })}>
            <option value="name">Name</option>
            <option value="email">Email</option>
            <option value="registeredAt">Registered</option>
          </select>
        </Field>
      </div>
      <ErrorNote error={list.error ?? error} />
      {claim && (
        <Notice kind="info">
          <p>
            Claim link for <strong>{claim.user.name}</strong> {claim.emailSent ? '(also mailed to them)' : ''}: whoever opens it with a wallet, or pastes it on the sign-in page of a browser, owns the account.
          </p>
          <img class="qr" src={new URL(claim.qrUrl).pathname} alt={`Claim QR code for ${claim.user.name}`} />
          <Copyable text={claim.link} label="Claim link" />
          <button type="button" onClick={() => setClaim(null)}>
            Done
          </button>
        </Notice>
      )}
      {grantsOf && <Grants user={grantsOf} onClose={() => setGrantsOf(null)} />}
      {!d ? (
        list.loading && <Loading what="Loading people" />
      ) : d.users.length === 0 ? (
        <Empty title="Nobody matches.">Clear a filter, or invite someone under Invitations.</Empty>
      ) : (
        <>
          <Table head={['Person', 'Role', 'Workspaces', 'Account', <span class="muted">Actions</span>]}>
            {d.users.map((u) => (
              <tr key={u.id}>
                <td>
                  {u.name} {u.isAdmin && <Badge kind="warn">global admin</Badge>}
                  <br />
                  <span class="muted">{u.email}</span>
                </td>
                <td>{u.role}</td>
                <td>{u.workspaces.map((w) => w.name).join(', ') || '—'}</td>
                <td>{u.did ? <Did did={u.did} /> : <Badge kind="warn">unclaimed</Badge>}</td>
                <td>
                  <div class="actions">
                    {u.did && (
                      <button type="button" onClick={() => setGrantsOf(u)}>
                        Grants
                      </button>
                    )}
                    {!u.did && (
                      <Action
                        onRun={async () => {
                          setError(null);
                          const r = await people.sendQr(u.id, false);
                          setClaim({ user: u, qrUrl: r.qrUrl, link: r.qrUrl.replace(/\/qr\.svg$/, ''), emailSent: r.emailSent });
                        }}
                        onError={setError}
                      >
                        Claim QR
                      </Action>
                    )}
                    {!u.did && (
                      <Action
                        onRun={async () => {
                          setError(null);
                          const r = await people.sendQr(u.id, true);
                          setClaim({ user: u, qrUrl: r.qrUrl, link: r.qrUrl.replace(/\/qr\.svg$/, ''), emailSent: r.emailSent });
                        }}
                        onError={setError}
                      >
                        Mail claim link
                      </Action>
                    )}
                    {(a.owner || (!u.did && a.adminLevel)) && !u.isOwner && u.did !== a.did && (
                      <Action
                        kind="danger"
                        confirm={`Delete ${u.name}? Their sessions, memberships and grants go too.`}
                        onRun={async () => {
                          await (u.did ? people.deleteUser(u.did) : people.deleteUnclaimed(u.id));
                          list.reload();
                        }}
                        onError={setError}
                      >
                        Delete
                      </Action>
                    )}
                  </div>
                </td>
              </tr>
            ))}
          </Table>
          <Pager page={d.page} totalPages={d.totalPages} total={d.total} noun="person" nouns="people" onPage={(p) => setQuery({ page: p > 1 ? p : null })} />
        </>
      )}
    </div>
  );
}

/** The open invitations (GET /api/invitations, never their tokens), revoked by id. */
function PendingInvitations({ onError }: { onError: (err: unknown) => void }) {
  const page = Math.max(1, Number(qp('ipage', '1')) || 1);
  const list = useLoad(() => people.listInvitations({ page, pageSize: 20 }), [page]);
  const d = list.data;
  return (
    <section class="panel">
      <h3>Open invitations</h3>
      <ErrorNote error={list.error} />
      {!d ? (
        list.loading && <Loading />
      ) : d.invitations.length === 0 ? (
        <Empty title="No invitation is open.">Invite someone by email with the form.</Empty>
      ) : (
        <>
          <ul class="list">
            {d.invitations.map((m) => (
              <li key={m.id} class="row" data-invitation={m.email}>
                <span>
                  {m.email} as {m.role} · made <Time iso={m.createdAt} /> · expires <Time iso={m.expiresAt} />
                </span>
                <Action
                  kind="danger"
                  label={`Revoke the invitation of ${m.email}`}
                  onRun={async () => {
                    await people.revokeInvitationById(m.id);
                    list.reload();
                  }}
                  onError={onError}
                >
                  Revoke
                </Action>
              </li>
            ))}
          </ul>
          <Pager page={d.page} totalPages={d.totalPages} total={d.total} noun="invitation" onPage={(p) => setQuery({ ipage: p > 1 ? p : null })} />
        </>
      )}
    </section>
  );
}

function Invitations() {
  const [form, setForm] = useState({ email: '', name: '', role: 'member' as GlobalRole });
  const [errors, setErrors] = useState<Record<string, string>>({});
  /** Invitations made on this page: a new one re-reads the list. */
  const [made, setMade] = useState(0);
  const [link, setLink] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const invite = async () => {
    const e: Record<string, string> = {};
    if (!/^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(form.email.trim())) e.email = 'An email address.';
    if (!form.name.trim()) e.name = 'Required.';
    setErrors(e);
    if (Object.keys(e).length) return;
    setError(null);
    try {
      await people.inviteByEmail({ email: form.email.trim(), name: form.name.trim(), role: form.role });
      setMade((n) => n + 1);
      setForm({ ...form, email: '', name: '' });
    } catch (err) {
      setError(err);
    }
  };
  return (
    <div class="grid2">
      <section class="panel">
        <h3>Invite by email</h3>
        <p class="muted">Creates an unclaimed account with this role and an invitation valid for 7 days (mailed when Steward has SMTP).</p>
        <Field label="Email" error={errors.email}>
          <input type="email" value={form.email} onInput={(e) => setForm({ ...form, email: val(e) })} />
        </Field>
        <Field label="Name" error={errors.name}>
          <input value={form.name} onInput={(e) => setForm({ ...form, name: val(e) })} />
        </Field>
        <Field label="Role">
          <select value={form.role} onChange={(e) => setForm({ ...form, role: val(e) as GlobalRole })}>
            <Options values={GLOBAL_ROLES} />
          </select>
        </Field>
        <ErrorNote error={error} />
        <Action kind="primary" onRun={invite}>
          Invite
        </Action>
        <h3>Open invite link</h3>
        <p class="muted">Whoever claims this link becomes a new member of the default workspace. It works for CLAIM_TTL_MINUTES (30 minutes by default).</p>
        <Action
          onRun={async () => {
            setLink((await people.inviteLink()).connectionString);
          }}
          onError={setError}
        >
          Make an invite link
        </Action>
        {link && <Copyable text={link} label="Invite link" />}
      </section>
      <PendingInvitations key={made} onError={setError} />
    </div>
  );
}

export default function People() {
  const a = access.value!;
  const tabs = [{ id: 'workspaces', label: 'Workspaces' }, ...(a.adminLevel ? [{ id: 'users', label: 'Users' }] : []), ...(a.owner ? [{ id: 'invitations', label: 'Invitations' }] : [])];
  const tab = tabs.some((t) => t.id === qp('tab')) ? qp('tab') : 'workspaces';
  return (
    <section>
      <h1>People</h1>
      <Tabs tabs={tabs} current={tab} label="People sections" onSelect={(t) => setQuery({ tab: t === 'workspaces' ? null : t, page: null, ws: null })} />
      {tab === 'workspaces' && <Workspaces />}
      {tab === 'users' && <Directory />}
      {tab === 'invitations' && <Invitations />}
    </section>
  );
}
