/**
 * Registrations awaiting approval (global admins): approve with a checklist limited to what each
 * agent requested, reject with a reason, several at once. Read again when the feed's registrations
 * topic reports one made or decided.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { approveRegistration, listRegistrations, rejectRegistration, type Registration } from '../api/agents';
import { describeError } from '../api/http';
import type { Capability } from '../api/types';
import { useLoad } from '../app/hooks';
import { useFeedTopic } from '../app/feed';
import { Action, Badge, CapabilityChecks, Did, Empty, ErrorNote, Field, Loading, Notice, Time, val } from '../ui/kit';

interface Outcome {
  id: string;
  name: string;
  ok: boolean;
  text: string;
}

export default function Registrations() {
  const list = useLoad(() => listRegistrations(), []);
  // One read for a burst of frames.
  const soon = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  useEffect(() => () => clearTimeout(soon.current), []);
  useFeedTopic('registrations', (f) => {
    if ((f.type !== 'registration' && f.type !== 'resync') || soon.current) return;
    soon.current = setTimeout(() => {
      soon.current = undefined;
      list.reload();
    }, 250);
  });
  const [chosen, setChosen] = useState<Record<string, Capability[]>>({});
  const [selected, setSelected] = useState<Set<string>>(new Set());
  const [reason, setReason] = useState('');
  const [reasonError, setReasonError] = useState<string | null>(null);
  const [outcomes, setOutcomes] = useState<Outcome[]>([]);
  const [progress, setProgress] = useState<string | null>(null);
  const regs = list.data?.registrations ?? [];
  const capsOf = (r: Registration) => chosen[r.id] ?? r.requestedCapabilities;

  const run = async (ids: string[], decide: (r: Registration) => Promise<unknown>, verb: string) => {
    const out: Outcome[] = [];
    let i = 0;
    for (const id of ids) {
      const r = regs.find((x) => x.id === id);
      if (!r) continue;
      setProgress(`${verb} ${++i} of ${ids.length}…`);
      try {
        await decide(r);
        out.push({ id, name: r.name, ok: true, text: `${r.name}: ${verb.toLowerCase()}` });
      } catch (err) {
        out.push({ id, name: r.name, ok: false, text: `${r.name}: ${describeError(err)}` });
      }
    }
    setProgress(null);
    setOutcomes(out);
    setSelected(new Set());
    list.reload();
  };

  const approve = (ids: string[]) => run(ids, (r) => approveRegistration(r.id, capsOf(r)), 'Approved');
  const reject = (ids: string[]) => {
    if (!reason.trim()) {
      setReasonError('Give a reason: the agent is told it, and it is kept with the rejection.');
      return Promise.resolve();
    }
    setReasonError(null);
    return run(ids, (r) => rejectRegistration(r.id, reason.trim()), 'Rejected').then(() => setReason(''));
  };

  const allSelected = regs.length > 0 && regs.every((r) => selected.has(r.id));
  return (
    <section>
      <h1>Registrations</h1>
      <p class="muted">Agents that connected with a key Steward did not know wait here until a global admin decides. An approved agent receives its certificate at once if it is still connected.</p>
      <ErrorNote error={list.error} />
      {progress && <Notice>{progress}</Notice>}
      {outcomes.length > 0 && (
        <div role="status">
          {outcomes.map((o) => (
            <div key={o.id} class={`note ${o.ok ? 'ok' : 'error'}`}>
              {o.text}
            </div>
          ))}
        </div>
      )}
      {!list.data && list.loading ? (
        <Loading what="Loading registrations" />
      ) : regs.length === 0 ? (
        <Empty title="No registration is waiting.">New agents appear here when they first connect; this page checks every 15 seconds.</Empty>
      ) : (
        <>
          <div class="panel">
            <div class="row">
              <label class="check">
                <input type="checkbox" checked={allSelected} onChange={(e) => setSelected(e.currentTarget.checked ? new Set(regs.map((r) => r.id)) : new Set())} />
                Select all ({regs.length})
              </label>
              <Action kind="primary" disabled={selected.size === 0} onRun={() => approve([...selected])}>
                Approve selected ({selected.size})
              </Action>
              <Field label="Reason for rejecting" error={reasonError}>
                <input value={reason} onInput={(e) => setReason(val(e))} placeholder="Unknown agent" />
              </Field>
              <Action kind="danger" disabled={selected.size === 0} onRun={() => reject([...selected])}>
                Reject selected ({selected.size})
              </Action>
            </div>
          </div>
          <ul class="list">
            {regs.map((r) => (
              <li key={r.id} class="panel" data-registration={r.id}>
                <div class="row">
                  <label class="check">
                    <input
                      type="checkbox"
                      aria-label={`Select ${r.name}`}
                      checked={selected.has(r.id)}
                      onChange={(e) => {
                        const next = new Set(selected);
                        if (e.currentTarget.checked) next.add(r.id);
                        else next.delete(r.id);
                        setSelected(next);
                      }}
                    />
                    <strong>{r.name}</strong>
                  </label>
                  {r.version && <Badge>v{r.version}</Badge>}
                  <span class="muted">
                    asked <Time iso={r.requestedAt} />
                  </span>
                </div>
                <p>
                  <Did did={r.agentDid} />
                </p>
                <CapabilityChecks
                  legend={`Capabilities to approve for ${r.name} (of those it requested)`}
                  options={r.requestedCapabilities}
                  selected={capsOf(r)}
                  onChange={(next) => setChosen({ ...chosen, [r.id]: next as Capability[] })}
                />
                <div class="actions">
                  <Action kind="primary" onRun={() => approve([r.id])}>
                    Approve {r.name}
                  </Action>
                  <Action kind="danger" onRun={() => reject([r.id])}>
                    Reject {r.name}
                  </Action>
                </div>
              </li>
            ))}
          </ul>
        </>
      )}
    </section>
  );
}
