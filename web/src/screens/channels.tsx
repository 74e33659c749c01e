/**
 * Channels: the channels of a workspace (and the global ones), a channel's messages live through
 * the feed, threads, reactions, edits and deletions, @mentions completed from the names of the
 * workspace's agents and people, members, and bridges (a webhook's secret is shown once, when it
 * is made). Top-level messages show their reply counts; the list marks channels with unread
 * messages, and viewing a channel marks it read.
 */
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import * as ch from '../api/channels';
import type { Bridge, Channel, ChannelMember, Message } from '../api/channels';
import { describeError } from '../api/http';
import { listMembers, listWorkspaceAgents, myWorkspaces } from '../api/workspaces';
import { signal } from '@preact/signals';
import { feed } from '../app/feed';
import { useLoad, usePoll } from '../app/hooks';
import { navigate, qp, setQuery } from '../app/router';
import type { ScreenProps } from '../app/routes';
import { access } from '../app/session';
import { shortDid } from '../crypto/did';
import { Action, Badge, Copyable, Did, Empty, ErrorNote, Field, Loading, Notice, Table, Tabs, Time, val, WorkspaceSelect } from '../ui/kit';

const QUICK_REACTIONS = ['👍', '🎉', '👀', '✅'];

/** Unread messages per channel id (GET /api/me/unread), lowered as channels are read here. */
const unread = signal<Record<string, number>>({});

interface Person {
  did: string;
  name: string;
  kind: 'user' | 'agent';
}

/** Who is who in a workspace, for author names and @mention completion. */
function useDirectory(workspaceId: string | null): Person[] {
  const people = useLoad(async () => {
    if (!workspaceId) return [] as Person[];
    const [m, a] = await Promise.all([listMembers(workspaceId).catch(() => ({ members: [] })), listWorkspaceAgents(workspaceId).catch(() => ({ agents: [] }))]);
    return [
      ...m.members.filter((x) => x.did).map((x) => ({ did: x.did!, name: x.name, kind: 'user' as const })),
      ...a.agents.map((x) => ({ did: x.id, name: x.name, kind: 'agent' as const })),
    ];
  }, [workspaceId]);
  return people.data ?? [];
}

function Content({ text }: { text: string }) {
  const parts = text.split(/(@[\w.-]+(?: [\w.-]+)?)/g);
  return (
    <p class="body">
      {parts.map((p, i) => (p.startsWith('@') ? <span key={i} class="mention">{p}</span> : p))}
    </p>
  );
}

function MessageItem({ m, me, names, canModerate, onReply, channelId, onChanged }: { m: Message; me: string; names: Map<string, string>; canModerate: boolean; onReply?: () => void; channelId: string; onChanged: (m: Message) => void }) {
  const [editing, setEditing] = useState(false);
  const [draft, setDraft] = useState(m.content);
  const [error, setError] = useState<unknown>(null);
  const deleted = m.deletedAt !== null;
  const mine = m.authorDid === me;
  const toggle = async (emoji: string) => {
    setError(null);
    try {
      const r = await ch.react(channelId, m.id, emoji, !(m.reactions[emoji] ?? []).includes(me));
      onChanged(r.message);
    } catch (err) {
      setError(err);
    }
  };
  return (
    <li class={`msg${deleted ? ' deleted' : ''}`} data-message={m.id}>
      <div class="meta">
        <strong title={m.authorDid}>{names.get(m.authorDid) ?? shortDid(m.authorDid)}</strong>
        {m.authorType === 'agent' && <Badge>agent</Badge>}
        <Time iso={m.createdAt} />
        {m.editedAt && !deleted && <span>(edited)</span>}
      </div>
      {deleted ? (
        <p class="body">This message was deleted.</p>
      ) : editing ? (
        <form
          onSubmit={async (e) => {
            e.preventDefault();
            if (!draft.trim()) return setError(new Error('A message cannot be empty; delete it instead.'));
            try {
              onChanged((await ch.editMessage(channelId, m.id, draft)).message);
              setEditing(false);
            } catch (err) {
              setError(err);
            }
          }}
        >
          <textarea aria-label="Edit the message" value={draft} onInput={(e) => setDraft(val(e))} />
          <div class="actions">
            <button type="submit" class="primary">
              Save
            </button>
            <button type="button" onClick={() => setEditing(false)}>
              Cancel
            </button>
          </div>
        </form>
      ) : (
        <Content text={m.content} />
      )}
      {!deleted && (
        <div class="tools">
          {Object.entries(m.reactions).map(([emoji, dids]) => (
            <button key={emoji} type="button" aria-pressed={dids.includes(me)} aria-label={`${emoji} ${dids.length}, ${dids.includes(me) ? 'remove yours' : 'add yours'}`} onClick={() => void toggle(emoji)}>
              {emoji} {dids.length}
            </button>
          ))}
          {QUICK_REACTIONS.filter((e) => !m.reactions[e]).map((e) => (
            <button key={e} type="button" class="quiet" aria-label={`React with ${e}`} onClick={() => void toggle(e)}>
              {e}
            </button>
          ))}
          {onReply && (
            <button type="button" class="quiet" onClick={onReply}>
              Reply in thread
            </button>
          )}
          {onReply && (m.replyCount ?? 0) > 0 && (
            <button type="button" class="quiet replies" onClick={onReply}>
              {m.replyCount} {m.replyCount === 1 ? 'reply' : 'replies'}
              {m.lastReplyAt && (
                <>
                  , last <Time iso={m.lastReplyAt} />
                </>
              )}
            </button>
          )}
          {mine && !editing && (
            <button type="button" class="quiet" onClick={() => setEditing(true)}>
              Edit
            </button>
          )}
          {(mine || canModerate) && (
            <Action kind="quiet" confirm="Delete this message? It stays in place as “deleted”." onRun={() => ch.deleteMessage(channelId, m.id)} onError={setError}>
              Delete
            </Action>
          )}
        </div>
      )}
      <ErrorNote error={error} />
    </li>
  );
}

/** A message box with @mention completion (agents and people of the workspace). */
function Composer({ directory, onSend, label }: { directory: Person[]; onSend: (text: string) => Promise<void>; label: string }) {
  const [text, setText] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [active, setActive] = useState(0);
  // The caret as of the last input, click or completion (the DOM's lags a render behind).
  const [caret, setCaret] = useState(0);
  const ref = useRef<HTMLTextAreaElement>(null);
  const m = /(?:^|\s)@([\w.-]{0,40})$/.exec(text.slice(0, caret));
  const suggestions = m ? directory.filter((p) => p.name.toLowerCase().startsWith(m[1]!.toLowerCase())).slice(0, 6) : [];
  const complete = (p: Person) => {
    const before = text.slice(0, caret).replace(/@([\w.-]{0,40})$/, `@${p.name} `);
    setText(before + text.slice(caret));
    setCaret(before.length);
    ref.current?.focus();
  };
  const send = async () => {
    if (!text.trim()) return setError('Write something first.');
    setError(null);
    try {
      await onSend(text);
      setText('');
      setCaret(0);
    } catch (err) {
      setError(describeError(err));
    }
  };
  return (
    <div class="composer">
      {suggestions.length > 0 && (
        <ul class="suggest" role="listbox" aria-label="Mention">
          {suggestions.map((p, i) => (
            <li key={p.did} role="option" aria-selected={i === active} onMouseDown={(e) => (e.preventDefault(), complete(p))}>
              {p.name} <span class="muted">{p.kind}</span>
            </li>
          ))}
        </ul>
      )}
      <Field label={label} error={error} hint="Enter sends, Shift+Enter starts a new line; type @ to mention an agent or a person.">
        <textarea
          ref={ref}
          value={text}
          onInput={(e) => {
            setText(val(e));
            setCaret(e.currentTarget.selectionStart ?? val(e).length);
            setActive(0);
          }}
          onClick={(e) => setCaret(e.currentTarget.selectionStart ?? 0)}
          onKeyDown={(e) => {
            if (suggestions.length > 0 && (e.key === 'ArrowDown' || e.key === 'ArrowUp')) {
              e.preventDefault();
              setActive((active + (e.key === 'ArrowDown' ? 1 : suggestions.length - 1)) % suggestions.length);
            } else if (suggestions.length > 0 && (e.key === 'Tab' || e.key === 'Enter')) {
              e.preventDefault();
              complete(suggestions[active]!);
            } else if (e.key === 'Enter' && !e.shiftKey) {
              e.preventDefault();
              void send();
            }
          }}
        />
      </Field>
      <Action kind="primary" onRun={send}>
        Send
      </Action>
    </div>
  );
}

function upsert(list: Message[], m: Message): Message[] {
  const i = list.findIndex((x) => x.id === m.id);
  if (i < 0) return [...list, m];
  const next = list.slice();
  next[i] = m;
  return next;
}

function Conversation({ channel, members, directory }: { channel: Channel; members: ChannelMember[]; directory: Person[] }) {
  const a = access.value!;
  const threadId = qp('thread');
  const [messages, setMessages] = useState<Message[] | null>(null);
  const [thread, setThread] = useState<Message[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [more, setMore] = useState(false);
  const names = useMemo(() => new Map(directory.map((p) => [p.did, p.name])), [directory]);
  const mine = members.find((m) => m.memberDid === a.did);
  const canModerate = a.globalAdmin || mine?.role === 'owner' || mine?.role === 'moderator';
  const PAGE = 50;

  useEffect(() => {
    setMessages(null);
    ch.listMessages(channel.id, { limit: PAGE }).then(
      (r) => {
        setMessages(r.messages.slice().reverse());
        setMore(r.messages.length === PAGE);
      },
      setError,
    );
    return feed.subscribe({ channelId: channel.id }, (f) => {
      const m = f.message as Message | undefined;
      if (!m) return;
      if (f.type === 'message.created' && m.threadId !== null)
        setMessages((list) => (list ? list.map((x) => (x.id === m.threadId ? { ...x, replyCount: (x.replyCount ?? 0) + 1, lastReplyAt: m.createdAt } : x)) : list));
      if (m.threadId === null) setMessages((list) => (list ? upsert(list, m) : list));
      else setThread((list) => (list && list[0]?.id === m.threadId ? [list[0]!, ...upsert(list.slice(1), m)] : list));
      if (m.threadId === null) setThread((list) => (list && list[0]?.id === m.id ? [m, ...list.slice(1)] : list));
    });
  }, [channel.id]);

  useEffect(() => {
    setThread(null);
    if (!threadId) return;
    Promise.all([ch.listMessages(channel.id, { threadId, limit: 100 }), Promise.resolve(messages?.find((m) => m.id === threadId))]).then(
      ([r, parent]) => setThread(parent ? [parent, ...r.messages.slice().reverse()] : r.messages.slice().reverse()),
      setError,
    );
  }, [channel.id, threadId, messages === null]);

  // Viewing the channel reads it up to its newest top-level message.
  const newest = messages?.[messages.length - 1]?.id;
  useEffect(() => {
    if (!newest || !mine) return;
    ch.markRead(channel.id, newest).then(
      (r) => (unread.value = { ...unread.value, [channel.id]: r.unread }),
      () => undefined,
    );
  }, [channel.id, newest, !!mine]);

  const older = async () => {
    try {
      const r = await ch.listMessages(channel.id, { limit: PAGE, offset: messages?.length ?? 0 });
      setMessages((list) => [...r.messages.slice().reverse(), ...(list ?? [])]);
      setMore(r.messages.length === PAGE);
    } catch (err) {
      setError(err);
    }
  };
  const changed = (m: Message) => {
    setMessages((list) => (list && m.threadId === null ? upsert(list, m) : list));
    setThread((list) => (list ? list.map((x) => (x.id === m.id ? m : x)) : list));
  };
  const member = !!mine;

  return (
    <div class={threadId ? 'grid2' : ''}>
      <div class="chat">
        <ErrorNote error={error} />
        {more && (
          <button type="button" onClick={() => void older()}>
            Show older messages
          </button>
        )}
        {!messages ? (
          <Loading what="Loading messages" />
        ) : messages.length === 0 ? (
          <Empty title="No messages yet.">{member ? 'Write the first one below.' : 'Join the channel (Members) to post.'}</Empty>
        ) : (
          <ul class="messages" aria-live="polite" aria-label={`Messages in ${channel.name}`}>
            {messages.map((m) => (
              <MessageItem key={m.id} m={m} me={a.did} names={names} canModerate={canModerate} channelId={channel.id} onChanged={changed} onReply={() => setQuery({ thread: m.id })} />
            ))}
          </ul>
        )}
        {channel.isArchived ? (
          <Notice kind="warn">This channel is archived: its history stays readable, posting is closed.</Notice>
        ) : member ? (
          <Composer
            label={`Message ${channel.name}`}
            directory={directory}
            onSend={async (text) => {
              const r = await ch.postMessage(channel.id, text);
              setMessages((list) => (list ? upsert(list, r.message) : list));
            }}
          />
        ) : (
          <Notice>Posting needs membership of the channel. {canModerate || a.globalAdmin ? 'Add yourself under Members.' : 'Ask an owner or moderator of the channel.'}</Notice>
        )}
      </div>
      {threadId && (
        <aside class="chat panel" aria-label="Thread">
          <div class="row">
            <h2>Thread</h2>
            <button type="button" class="quiet" onClick={() => setQuery({ thread: null })}>
              Close
            </button>
          </div>
          {!thread ? (
            <Loading what="Loading the thread" />
          ) : (
            <ul class="messages">
              {thread.map((m) => (
                <MessageItem key={m.id} m={m} me={a.did} names={names} canModerate={canModerate} channelId={channel.id} onChanged={changed} />
              ))}
            </ul>
          )}
          {member && !channel.isArchived && (
            <Composer
              label="Reply"
              directory={directory}
              onSend={async (text) => {
                const r = await ch.postMessage(channel.id, text, threadId);
                setThread((list) => (list ? upsert(list, r.message) : list));
              }}
            />
          )}
        </aside>
      )}
    </div>
  );
}

function Members({ channel, members, directory, reload }: { channel: Channel; members: ChannelMember[]; directory: Person[]; reload: () => void }) {
  const a = access.value!;
  const mine = members.find((m) => m.memberDid === a.did);
  const canManage = a.globalAdmin || mine?.role === 'owner' || mine?.role === 'moderator';
  const [who, setWho] = useState('');
  const [role, setRole] = useState<ch.ChannelRole>('member');
  const [error, setError] = useState<unknown>(null);
  const names = new Map(directory.map((p) => [p.did, p.name]));
  const candidates = directory.filter((p) => !members.some((m) => m.memberDid === p.did));
  return (
    <div>
      <ErrorNote error={error} />
      <Table head={['Member', 'Kind', 'Role', 'Joined', <span class="muted">Actions</span>]}>
        {members.map((m) => (
          <tr key={m.memberDid}>
            <td>
              <Did did={m.memberDid} name={names.get(m.memberDid)} />
            </td>
            <td>{m.memberType}</td>
            <td>{m.role}</td>
            <td>
              <Time iso={m.joinedAt} />
            </td>
            <td>
              {(canManage || m.memberDid === a.did) && (
                <Action
                  kind="danger"
                  onRun={async () => {
                    setError(null);
                    await ch.removeChannelMember(channel.id, m.memberDid);
                    reload();
                  }}
                  onError={setError}
                >
                  {m.memberDid === a.did ? 'Leave' : 'Remove'}
                </Action>
              )}
            </td>
          </tr>
        ))}
      </Table>
      {canManage && (
        <div class="panel">
          <h3>Add a member</h3>
          <div class="row">
            <Field label="Agent or person">
              <select value={who} onChange={(e) => setWho(val(e))}>
                <option value="">Choose…</option>
                {candidates.map((p) => (
                  <option key={p.did} value={p.did}>
                    {p.name} ({p.kind})
                  </option>
                ))}
              </select>
            </Field>
            <Field label="Role">
              <select value={role} onChange={(e) => setRole(val(e) as ch.ChannelRole)}>
                <option value="member">member</option>
                <option value="moderator">moderator</option>
                <option value="owner">owner</option>
              </select>
            </Field>
            <Action
              kind="primary"
              disabled={!who}
              onRun={async () => {
                const p = directory.find((x) => x.did === who);
                if (!p) return;
                setError(null);
                await ch.addChannelMember(channel.id, p.did, p.kind, role);
                setWho('');
                reload();
              }}
              onError={setError}
            >
              Add
            </Action>
          </div>
        </div>
      )}
    </div>
  );
}

function Bridges({ channel, isOwner }: { channel: Channel; isOwner: boolean }) {
  const list = useLoad(() => ch.listBridges(channel.id), [channel.id]);
  const [form, setForm] = useState({ externalService: 'webhook' as Bridge['externalService'], externalChannelId: '', externalChannelName: '', externalWorkspaceId: '', syncDirection: 'bidirectional' as Bridge['syncDirection'], outgoingUrl: '', accessToken: '', tenantId: '', botId: '' });
  const [secret, setSecret] = useState<{ bridge: Bridge; secret: string } | null>(null);
  const [errors, setErrors] = useState<Record<string, string>>({});
  const [error, setError] = useState<unknown>(null);
  const set = (k: keyof typeof form) => (e: Event) => setForm({ ...form, [k]: (e.currentTarget as HTMLInputElement).value });

  const create = async () => {
    const e: Record<string, string> = {};
    for (const k of ['externalChannelId', 'externalChannelName', 'externalWorkspaceId'] as const) if (!form[k].trim()) e[k] = 'Required.';
    if (form.externalService === 'webhook' && form.outgoingUrl && !/^https?:\/\//.test(form.outgoingUrl)) e.outgoingUrl = 'An http:// or https:// address.';
    if (form.externalService === 'teams') for (const k of ['accessToken', 'tenantId', 'botId'] as const) if (!form[k].trim()) e[k] = 'Required.';
    setErrors(e);
    if (Object.keys(e).length) return;
    setError(null);
    // The shared secret is made here, shown once, and never readable again.
    const bytes = crypto.getRandomValues(new Uint8Array(32));
    const generated = Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
    const config: Record<string, string> =
      form.externalService === 'webhook' ? { secret: generated, ...(form.outgoingUrl ? { outgoingUrl: form.outgoingUrl } : {}) } : { accessToken: form.accessToken, tenantId: form.tenantId, botId: form.botId };
    try {
      const r = await ch.createBridge(channel.id, {
        externalService: form.externalService,
        externalChannelId: form.externalChannelId.trim(),
        externalChannelName: form.externalChannelName.trim(),
        externalWorkspaceId: form.externalWorkspaceId.trim(),
        syncDirection: form.syncDirection,
        config,
      });
      if (form.externalService === 'webhook') setSecret({ bridge: r.bridge, secret: generated });
      setForm({ ...form, externalChannelId: '', externalChannelName: '', accessToken: '' });
      list.reload();
    } catch (err) {
      setError(err);
    }
  };

  return (
    <div>
      <ErrorNote error={list.error ?? error} />
      {secret && (
        <Notice kind="warn">
          <p>
            <strong>Copy this secret now.</strong> It signs what the outside service sends to <code>/api/bridges/webhook/{secret.bridge.id}/incoming</code> (header{' '}
            <code>X-Signature: sha256=&lt;HMAC-SHA256 of the body&gt;</code>) and what Steward sends out. Steward never shows it again.
          </p>
          <Copyable text={secret.secret} label="Bridge secret" />
          <button type="button" onClick={() => setSecret(null)}>
            I have stored it
          </button>
        </Notice>
      )}
      {!list.data ? (
        list.loading && <Loading what="Loading bridges" />
      ) : list.data.bridges.length === 0 ? (
        <Empty title="No bridge.">A bridge connects this channel with a webhook or a team-chat channel.</Empty>
      ) : (
        <Table head={['Service', 'External channel', 'Direction', 'Sync', <span class="muted">Actions</span>]}>
          {list.data.bridges.map((b) => (
            <tr key={b.id}>
              <td>{b.externalService}</td>
              <td>
                {b.externalChannelName} <span class="muted">({b.externalWorkspaceId} / {b.externalChannelId})</span>
              </td>
              <td>{b.syncDirection}</td>
              <td>{b.isSyncEnabled ? <Badge kind="ok">enabled</Badge> : <Badge kind="off">disabled</Badge>}</td>
              <td>
                {isOwner && (
                  <div class="actions">
                    <Action
                      onRun={async () => {
                        await ch.updateBridge(channel.id, b.id, { isSyncEnabled: !b.isSyncEnabled });
                        list.reload();
                      }}
                      onError={setError}
                    >
                      {b.isSyncEnabled ? 'Disable' : 'Enable'}
                    </Action>
                    <Action
                      kind="danger"
                      confirm={'Delete this bridge? Its configuration goes with it; its incoming address answers 404 from then on.'}
                      onRun={async () => {
                        await ch.deleteBridge(channel.id, b.id);
                        list.reload();
                      }}
                      onError={setError}
                    >
                      Delete
                    </Action>
                  </div>
                )}
              </td>
            </tr>
          ))}
        </Table>
      )}
      {isOwner && (
        <div class="panel">
          <h3>New bridge</h3>
          <div class="row">
            <Field label="Service">
              <select value={form.externalService} onChange={set('externalService')}>
                <option value="webhook">Webhook</option>
                <option value="teams">Team chat</option>
              </select>
            </Field>
            <Field label="Direction">
              <select value={form.syncDirection} onChange={set('syncDirection')}>
                <option value="bidirectional">both ways</option>
                <option value="incoming">incoming only</option>
                <option value="outgoing">outgoing only</option>
              </select>
            </Field>
            <Field label="External channel id" error={errors.externalChannelId}>
              <input value={form.externalChannelId} onInput={set('externalChannelId')} />
            </Field>
            <Field label="External channel name" error={errors.externalChannelName}>
              <input value={form.externalChannelName} onInput={set('externalChannelName')} />
            </Field>
            <Field label={form.externalService === 'teams' ? 'Team id' : 'External workspace'} error={errors.externalWorkspaceId}>
              <input value={form.externalWorkspaceId} onInput={set('externalWorkspaceId')} />
            </Field>
            {form.externalService === 'webhook' ? (
              <Field label="Outgoing URL (optional)" error={errors.outgoingUrl}>
                <input value={form.outgoingUrl} onInput={set('outgoingUrl')} placeholder="https://…" />
              </Field>
            ) : (
              <>
                <Field label="Access token" error={errors.accessToken}>
                  <input type="password" autocomplete="off" value={form.accessToken} onInput={set('accessToken')} />
                </Field>
                <Field label="Tenant id" error={errors.tenantId}>
                  <input value={form.tenantId} onInput={set('tenantId')} />
                </Field>
                <Field label="Bot id" error={errors.botId}>
                  <input value={form.botId} onInput={set('botId')} />
                </Field>
              </>
            )}
          </div>
          <p class="muted">{form.externalService === 'webhook' ? 'A random 64-character secret is made for the bridge and shown once.' : 'The team-chat service’s incoming endpoint does not verify its bearer token: expose it only behind a gateway that does.'}</p>
          <Action kind="primary" onRun={create}>
            Create bridge
          </Action>
        </div>
      )}
    </div>
  );
}

function ChannelView({ id }: { id: string }) {
  const a = access.value!;
  const detail = useLoad(() => ch.getChannel(id), [id]);
  const directory = useDirectory(detail.data?.channel.workspaceId ?? null);
  const tab = qp('tab', 'messages');
  const [error, setError] = useState<unknown>(null);
  if (detail.error) return <ErrorNote error={detail.error} />;
  if (!detail.data) return <Loading what="Loading the channel" />;
  const { channel, members } = detail.data;
  const mine = members.find((m) => m.memberDid === a.did);
  const isOwner = a.globalAdmin || mine?.role === 'owner';
  return (
    <section>
      <h2>
        # {channel.name} {!channel.isPublic && <Badge>private</Badge>} {channel.isArchived && <Badge kind="warn">archived</Badge>}
      </h2>
      {(channel.topic || channel.description) && <p class="muted">{channel.topic || channel.description}</p>}
      <ErrorNote error={error} />
      <div class="actions">
        {!mine && channel.isPublic && !channel.isArchived && (
          <Action
            onRun={async () => {
              await ch.addChannelMember(channel.id, a.did, 'user');
              detail.reload();
            }}
            onError={setError}
          >
            Join
          </Action>
        )}
        {isOwner && (
          <Action
            onRun={async () => {
              await ch.updateChannel(channel.id, { isArchived: !channel.isArchived });
              detail.reload();
            }}
            onError={setError}
          >
            {channel.isArchived ? 'Reopen' : 'Archive'}
          </Action>
        )}
      </div>
      <Tabs
        label="Channel sections"
        current={tab}
        onSelect={(t) => setQuery({ tab: t === 'messages' ? null : t, thread: null })}
        tabs={[
          { id: 'messages', label: 'Messages' },
          { id: 'members', label: `Members (${members.length})` },
          { id: 'bridges', label: 'Bridges' },
        ]}
      />
      {tab === 'messages' && <Conversation channel={channel} members={members} directory={directory} />}
      {tab === 'members' && <Members channel={channel} members={members} directory={directory} reload={detail.reload} />}
      {tab === 'bridges' && <Bridges channel={channel} isOwner={isOwner} />}
    </section>
  );
}

function NewChannel({ workspaceId, onCreated }: { workspaceId: string; onCreated: (c: Channel) => void }) {
  const a = access.value!;
  const [name, setName] = useState('');
  const [isPublic, setPublic] = useState(true);
  const [global, setGlobal] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [nameError, setNameError] = useState<string | null>(null);
  return (
    <form
      class="panel"
      onSubmit={(e) => {
        e.preventDefault();
      }}
    >
      <h3>New channel</h3>
      <Field label="Name" error={nameError}>
        <input value={name} onInput={(e) => setName(val(e))} maxLength={100} />
      </Field>
      <label class="check">
        <input type="checkbox" checked={isPublic} onChange={(e) => setPublic(e.currentTarget.checked)} /> Public (readable by the workspace)
      </label>
      {a.globalAdmin && (
        <label class="check">
          <input type="checkbox" checked={global} onChange={(e) => setGlobal(e.currentTarget.checked)} /> Global (every workspace)
        </label>
      )}
      <ErrorNote error={error} />
      <div class="actions">
        <Action
          kind="primary"
          onRun={async () => {
            if (!name.trim()) return setNameError('Give the channel a name.');
            setNameError(null);
            setError(null);
            const r = await ch.createChannel({ name: name.trim(), isPublic, ...(global ? {} : { workspaceId }) });
            setName('');
            onCreated(r.channel);
          }}
          onError={setError}
        >
          Create
        </Action>
      </div>
    </form>
  );
}

export default function Channels({ params }: ScreenProps) {
  const workspaces = useLoad(() => myWorkspaces(), []);
  const wsParam = qp('ws');
  const ws = workspaces.data?.workspaces.find((w) => w.slug === wsParam) ?? workspaces.data?.workspaces[0];
  const archived = qp('archived') === '1';
  const list = useLoad(() => (ws ? ch.listChannels(ws.id, archived) : Promise.resolve({ channels: [] as Channel[] })), [ws?.id, archived]);
  const [creating, setCreating] = useState(false);
  const readUnread = () =>
    ch.myUnread().then(
      (r) => (unread.value = Object.fromEntries(r.channels.map((c) => [c.channelId, c.unread]))),
      () => undefined,
    );
  useEffect(() => void readUnread(), [ws?.id]);
  usePoll(() => void readUnread(), 60_000);
  return (
    <section>
      <h1>Channels</h1>
      <ErrorNote error={workspaces.error ?? list.error} />
      <div class="split">
        <nav aria-label="Channels">
          <WorkspaceSelect workspaces={workspaces.data?.workspaces} value={ws?.slug ?? ''} onChange={(w) => setQuery({ ws: w })} />
          <label class="check">
            <input type="checkbox" checked={archived} onChange={(e) => setQuery({ archived: e.currentTarget.checked ? '1' : null })} /> Show archived
          </label>
          {!list.data ? (
            list.loading && <Loading />
          ) : list.data.channels.length === 0 ? (
            <p class="muted">No channel here yet.</p>
          ) : (
            <ul class="list">
              {list.data.channels.map((c) => (
                <li key={c.id}>
                  <a href={`/channels/${c.id}${ws ? `?ws=${ws.slug}` : ''}`} class={params.id === c.id ? 'active' : ''} aria-current={params.id === c.id ? 'page' : undefined}>
                    <span class={unread.value[c.id] ? 'unread' : ''}># {c.name}</span> {c.workspaceId === null && <Badge>global</Badge>}{' '}
                    {unread.value[c.id] ? (
                      <span class="badge count" aria-label={`${unread.value[c.id]} unread`}>
                        {unread.value[c.id]}
                      </span>
                    ) : (
                      <span class="muted">{c.messageCount ?? ''}</span>
                    )}
                  </a>
                </li>
              ))}
            </ul>
          )}
          <button type="button" onClick={() => setCreating(!creating)} aria-expanded={creating}>
            New channel
          </button>
          {creating && ws && (
            <NewChannel
              workspaceId={ws.id}
              onCreated={(c) => {
                setCreating(false);
                list.reload();
                navigate(`/channels/${c.id}?ws=${ws.slug}`);
              }}
            />
          )}
        </nav>
        <div>{params.id ? <ChannelView key={params.id} id={params.id} /> : <Empty title="Choose a channel.">Or create one for this workspace.</Empty>}</div>
      </div>
    </section>
  );
}
