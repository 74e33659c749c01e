/**
 * The activity log (global admins): filters in the URL, paging, and a CSV export of the filtered
 * entries. The first page without an end time is a live tail: new entries that pass the filters
 * arrive through the feed's audit topic and go on top.
 */
import { useEffect, useState } from 'preact/hooks';
import { listAudit, type AuditEntry, type AuditQuery } from '../api/audit';
import { describeError } from '../api/http';
import { useLoad } from '../app/hooks';
import { useFeedTopic } from '../app/feed';
import { qp, setQuery } from '../app/router';
import { Action, Did, Empty, ErrorNote, Field, Loading, Notice, Pager, Table, Time, val } from '../ui/kit';

const csvCell = (v: unknown) => {
  const s = v === null || v === undefined ? '' : typeof v === 'string' ? v : JSON.stringify(v);
  // Quoted, and a leading = + - @ neutralised so a spreadsheet does not run it as a formula.
  return `"${(/^[=+\-@]/.test(s) ? `'${s}` : s).replace(/"/g, '""')}"`;
};

export function toCsv(entries: AuditEntry[]): string {
  const head = ['at', 'actor', 'actorType', 'action', 'targetType', 'target', 'details'];
  return [head.join(','), ...entries.map((e) => [e.at, e.actor, e.actorType, e.action, e.targetType, e.target, e.details].map(csvCell).join(','))].join('\r\n') + '\r\n';
}

const toIso = (local: string) => (local ? new Date(local).toISOString() : undefined);

/** Whether an entry passes the filters, as GET /api/audit applies them. */
function passes(e: AuditEntry, f: AuditQuery): boolean {
  if (f.action && (f.action.endsWith('*') ? !e.action.startsWith(f.action.slice(0, -1)) : e.action !== f.action)) return false;
  return (!f.actor || e.actor === f.actor) && (!f.targetType || e.targetType === f.targetType) && (!f.target || e.target === f.target) && (!f.since || e.at >= f.since);
}

export default function Audit() {
  const filters: AuditQuery = {
    actor: qp('actor') || undefined,
    action: qp('action') || undefined,
    targetType: qp('targetType') || undefined,
    target: qp('target') || undefined,
    since: toIso(qp('since')),
    until: toIso(qp('until')),
  };
  const page = Math.max(1, Number(qp('page', '1')) || 1);
  const list = useLoad(() => listAudit({ ...filters, page, pageSize: 50 }), [qp('actor'), qp('action'), qp('targetType'), qp('target'), qp('since'), qp('until'), page]);
  // The live tail: entries that arrived since the page was read, newest first.
  const tailing = page === 1 && !filters.until;
  const [live, setLive] = useState<AuditEntry[]>([]);
  useEffect(() => setLive([]), [list.data]);
  useFeedTopic(
    'audit',
    (f) => {
      if (f.type === 'resync') return list.reload();
      const entry = f.entry as AuditEntry | undefined;
      if (f.type !== 'audit' || !entry || !passes(entry, filters)) return;
      setLive((l) => (l.some((e) => e.id === entry.id) || list.data?.entries.some((e) => e.id === entry.id) ? l : [entry, ...l].slice(0, 50)));
    },
    tailing,
  );
  const [progress, setProgress] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);

  const exportCsv = async () => {
    setError(null);
    const all: AuditEntry[] = [];
    try {
      for (let p = 1; ; p++) {
        const r = await listAudit({ ...filters, page: p, pageSize: 200 });
        all.push(...r.entries);
        setProgress(`Exporting: ${all.length.toLocaleString()} of ${r.total.toLocaleString()} entries…`);
        if (p >= r.totalPages) break;
      }
    } catch (err) {
      setProgress(null);
      return setError(new Error(`The export stopped: ${describeError(err)}`));
    }
    const url = URL.createObjectURL(new Blob([toCsv(all)], { type: 'text/csv;charset=utf-8' }));
    const link = document.createElement('a');
    link.href = url;
    link.download = `steward-audit-${new Date().toISOString().slice(0, 19).replace(/:/g, '')}.csv`;
    link.click();
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
    setProgress(`Exported ${all.length.toLocaleString()} entries.`);
  };

  const filterField = (key: string, label: string, placeholder = '', type: 'text' | 'datetime-local' = 'text') => (
    <Field label={label}>
      <input type={type as 'text'} value={qp(key)} placeholder={placeholder} onChange={(e) => setQuery({ [key]: val(e) || null, page: null })} />
    </Field>
  );
  const loaded = list.data;
  const d = loaded && live.length > 0 ? { ...loaded, entries: [...live, ...loaded.entries].slice(0, 50), total: loaded.total + live.length } : loaded;
  return (
    <section>
      <h1>Audit</h1>
      <div class="toolbar" role="search">
        {filterField('action', 'Action', 'policy.* or intent.send')}
        {filterField('actor', 'Actor DID', 'did:key:… or system')}
        {filterField('targetType', 'Target type', 'agent, user, workspace…')}
        {filterField('target', 'Target id')}
        {filterField('since', 'From', '', 'datetime-local')}
        {filterField('until', 'Until', '', 'datetime-local')}
        <Action onRun={exportCsv} disabled={!d || d.total === 0}>
          Export CSV
        </Action>
      </div>
      {progress && <Notice>{progress}</Notice>}
      <ErrorNote error={list.error ?? error} />
      {!d ? (
        list.loading && <Loading what="Loading the activity log" />
      ) : d.entries.length === 0 ? (
        <Empty title="No entry matches.">Widen the time range or clear a filter.</Empty>
      ) : (
        <>
          <Table head={['When', 'Actor', 'Action', 'Target', 'Details']}>
            {d.entries.map((e) => (
              <tr key={e.id}>
                <td>
                  <Time iso={e.at} absolute />
                </td>
                <td>{e.actor === 'system' ? 'system' : <Did did={e.actor} />}</td>
                <td>
                  <code class="audit-action">
                    {e.action.split('.').map((part, i) => (i === 0 ? part : [<wbr key={i} />, `.${part}`]))}
                  </code>
                </td>
                <td>
                  {e.targetType} {e.target && <code>{e.target.length > 30 ? `${e.target.slice(0, 30)}…` : e.target}</code>}
                </td>
                <td>
                  <code class="mono">{e.details ? JSON.stringify(e.details) : ''}</code>
                </td>
              </tr>
            ))}
          </Table>
          <Pager page={d.page} totalPages={d.totalPages} total={d.total} noun="entries" onPage={(p) => setQuery({ page: p > 1 ? p : null })} />
        </>
      )}
    </section>
  );
}
