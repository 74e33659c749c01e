/** Small building blocks every screen uses: errors in words, empty states, fields, paging, times, dialogs. */
import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { describeError } from '../api/http';
import { shortDid } from '../crypto/did';

export function ErrorNote({ error, title }: { error: unknown; title?: string }) {
  if (!error) return null;
  return (
    <div class="note error" role="alert">
      {title && <strong>{title} </strong>}
      {describeError(error)}
    </div>
  );
}

export function Notice({ children, kind = 'info' }: { children: ComponentChildren; kind?: 'info' | 'ok' | 'warn' }) {
  return (
    <div class={`note ${kind}`} role="status">
      {children}
    </div>
  );
}

export function Empty({ title, children }: { title: string; children?: ComponentChildren }) {
  return (
    <div class="empty">
      <p class="empty-title">{title}</p>
      {children && <p>{children}</p>}
    </div>
  );
}

export function Loading({ what = 'Loading' }: { what?: string }) {
  return (
    <p class="loading" role="status" aria-live="polite">
      {what}…
    </p>
  );
}

export function Field({ label, hint, error, children }: { label: string; hint?: ComponentChildren; error?: string | null; children: ComponentChildren }) {
  return (
    <label class={`field${error ? ' invalid' : ''}`}>
      <span class="label">{label}</span>
      {children}
      {hint && <span class="hint">{hint}</span>}
      {error && (
        <span class="field-error" role="alert">
          {error}
        </span>
      )}
    </label>
  );
}

/**
 * A button that shows progress while its promise runs and cannot be pressed twice meanwhile. What
 * the promise rejects with goes to `onError` (the view shows it in words). With `confirm`, the
 * person is asked that question first, and nothing runs unless they agree.
 */
export function Action({
  onRun,
  onError,
  confirm: question,
  children,
  kind,
  disabled,
  label,
  type = 'button',
}: {
  onRun: () => Promise<unknown> | void;
  onError?: (err: unknown) => void;
  confirm?: string;
  children: ComponentChildren;
  kind?: 'primary' | 'danger' | 'quiet';
  disabled?: boolean;
  label?: string;
  type?: 'button' | 'submit';
}) {
  const [busy, setBusy] = useState(false);
  const mounted = useRef(true);
  useEffect(() => () => void (mounted.current = false), []);
  return (
    <button
      type={type}
      class={kind ?? ''}
      disabled={disabled || busy}
      aria-busy={busy}
      aria-label={label}
      onClick={async (e) => {
        if (type === 'submit') return;
        e.preventDefault();
        if (question !== undefined && !window.confirm(question)) return;
        setBusy(true);
        try {
          await onRun();
        } catch (err) {
          if (!onError) throw err;
          onError(err);
        } finally {
          if (mounted.current) setBusy(false);
        }
      }}
    >
      {busy ? <span class="spinner" aria-hidden="true" /> : null}
      {children}
    </button>
  );
}

export function Pager({ page, totalPages, total, onPage, noun }: { page: number; totalPages: number; total: number; onPage: (p: number) => void; noun: string }) {
  return (
    <nav class="pager" aria-label={`${noun} pages`}>
      <button type="button" disabled={page <= 1} onClick={() => onPage(page - 1)}>
        ← Previous
      </button>
      <span>
        Page {totalPages === 0 ? 0 : page} of {totalPages} · {total.toLocaleString()} {noun}
      </span>
      <button type="button" disabled={page >= totalPages} onClick={() => onPage(page + 1)}>
        Next →
      </button>
    </nav>
  );
}

/** The page sizes a list offers. */
export const PAGE_SIZES: readonly number[] = [20, 50, 100];

/** A list's "Per page" choice among PAGE_SIZES; `onChange` gets the chosen size as its option value. */
export function PerPage({ value, onChange }: { value: number; onChange: (size: string) => void }) {
  return (
    <Field label="Per page">
      <select value={String(value)} onChange={(e) => onChange(val(e))}>
        {PAGE_SIZES.map((n) => (
          <option key={n} value={String(n)}>
            {n}
          </option>
        ))}
      </select>
    </Field>
  );
}

const rtf = new Intl.RelativeTimeFormat(undefined, { numeric: 'auto' });
export function relative(iso: string, now = Date.now()): string {
  const s = (new Date(iso).getTime() - now) / 1000;
  const abs = Math.abs(s);
  if (abs < 45) return rtf.format(Math.round(s), 'second');
  if (abs < 2700) return rtf.format(Math.round(s / 60), 'minute');
  if (abs < 64800) return rtf.format(Math.round(s / 3600), 'hour');
  if (abs < 2592000) return rtf.format(Math.round(s / 86400), 'day');
  return new Date(iso).toLocaleDateString();
}

export function Time({ iso, absolute }: { iso: string | null | undefined; absolute?: boolean }) {
  if (!iso) return <span class="muted">—</span>;
  const full = new Date(iso).toLocaleString();
  return (
    <time dateTime={iso} title={full}>
      {absolute ? full : relative(iso)}
    </time>
  );
}

export function Did({ did, name }: { did: string | null | undefined; name?: string }) {
  if (!did) return <span class="muted">—</span>;
  return (
    <span class="did" title={did}>
      {name ? `${name} ` : ''}
      <code>{shortDid(did)}</code>
    </span>
  );
}

export function Badge({ children, kind = '' }: { children: ComponentChildren; kind?: string }) {
  return <span class={`badge ${kind}`}>{children}</span>;
}

export function Swatch({ color }: { color: string }) {
  return <span class="swatch" aria-hidden="true" style={{ backgroundColor: color }} />;
}

/** A modal dialog (native <dialog>: focus is kept inside and Escape closes it). */
export function Dialog({ open, title, onClose, children }: { open: boolean; title: string; onClose: () => void; children: ComponentChildren }) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = ref.current;
    if (!d) return;
    if (open && !d.open) d.showModal();
    if (!open && d.open) d.close();
  }, [open]);
  return (
    <dialog ref={ref} aria-label={title} onClose={onClose} onCancel={onClose}>
      <header class="dialog-head">
        <h2>{title}</h2>
        <button type="button" class="quiet" aria-label="Close" onClick={onClose}>
          ×
        </button>
      </header>
      {open && children}
    </dialog>
  );
}

export function Tabs({ tabs, current, onSelect, label }: { tabs: Array<{ id: string; label: string }>; current: string; onSelect: (id: string) => void; label: string }) {
  return (
    <div class="tabs" role="tablist" aria-label={label}>
      {tabs.map((t) => (
        <button type="button" role="tab" key={t.id} aria-selected={t.id === current} class={t.id === current ? 'active' : ''} onClick={() => onSelect(t.id)}>
          {t.label}
        </button>
      ))}
    </div>
  );
}

export function Json({ value }: { value: unknown }) {
  return <pre class="json">{JSON.stringify(value, null, 2)}</pre>;
}

/** The value of the input, select or textarea an event came from. */
export const val = (e: Event) => (e.currentTarget as HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement).value;

/** `1 agent`, `2 agents`: a count with its noun in the right number. */
export const counted = (n: number, one: string, many = `${one}s`) => `${n.toLocaleString()} ${n === 1 ? one : many}`;

/** A Copy button for `text`; it says Copied once the clipboard took it. */
function CopyButton({ text, label }: { text: string; label?: string }) {
  const [copied, setCopied] = useState(false);
  return (
    <button
      type="button"
      aria-label={label ? `Copy: ${label}` : undefined}
      onClick={() => {
        navigator.clipboard?.writeText(text).then(
          () => setCopied(true),
          () => setCopied(false),
        );
      }}
    >
      {copied ? 'Copied' : 'Copy'}
    </button>
  );
}

/** Text to copy (a secret shown once, a link): selectable, with a copy button. */
export function Copyable({ text, label }: { text: string; label: string }) {
  return (
    <div class="copyable">
      <input readOnly value={text} aria-label={label} onFocus={(e) => e.currentTarget.select()} />
      <CopyButton text={text} />
    </div>
  );
}

/** A command to run: wrapped, never cut at the edge, selectable in one go, with a copy button. */
export function CommandBlock({ text, label, caption }: { text: string; label: string; caption: string }) {
  return (
    <figure class="command">
      <figcaption>{caption}</figcaption>
      <div class="command-row">
        <pre aria-label={label}>
          <code>{text}</code>
        </pre>
        <CopyButton text={text} label={label} />
      </div>
    </figure>
  );
}

export function CapabilityChecks({
  options,
  selected,
  onChange,
  legend,
}: {
  options: readonly string[];
  selected: readonly string[];
  onChange: (next: string[]) => void;
  legend: string;
}) {
  return (
    <fieldset class="checks">
      <legend>{legend}</legend>
      {options.map((c) => (
        <label key={c} class="check">
          <input
            type="checkbox"
            checked={selected.includes(c)}
            onChange={(e) => onChange(e.currentTarget.checked ? [...selected, c] : selected.filter((x) => x !== c))}
          />
          <code>{c}</code>
        </label>
      ))}
    </fieldset>
  );
}

/** A table in its scrolling frame: the column headings, then the rows given as children. */
export function Table({ head, label, children }: { head: ComponentChildren[]; label?: string; children: ComponentChildren }) {
  return (
    <div class="table-wrap">
      <table aria-label={label}>
        <thead>
          <tr>
            {head.map((h, i) => (
              <th key={i}>{h}</th>
            ))}
          </tr>
        </thead>
        <tbody>{children}</tbody>
      </table>
    </div>
  );
}

/** The options of a select: each value its own label. */
export function Options({ values }: { values: readonly string[] }) {
  return (
    <>
      {values.map((v) => (
        <option key={v} value={v}>
          {v}
        </option>
      ))}
    </>
  );
}

/** A select's options for named things (workspaces, models), by slug (the URL's choice for a workspace) or id. */
export function NamedOptions({ items, by = 'slug' }: { items: ReadonlyArray<{ id: string; name: string; slug?: string }> | undefined; by?: 'slug' | 'id' }) {
  return (
    <>
      {items?.map((w) => (
        <option key={w.id} value={w[by] ?? w.id}>
          {w.name}
        </option>
      ))}
    </>
  );
}

/** A choice of workspace by slug; with `all`, an empty choice of that name (every workspace). */
export function WorkspaceSelect({
  workspaces,
  value,
  onChange,
  all,
  label = 'Workspace',
}: {
  workspaces: ReadonlyArray<{ id: string; slug: string; name: string }> | undefined;
  value: string;
  onChange: (slug: string | null) => void;
  all?: string;
  label?: string;
}) {
  return (
    <Field label={label}>
      <select value={value} onChange={(e) => onChange(val(e) || null)}>
        {all !== undefined && <option value="">{all}</option>}
        <NamedOptions items={workspaces} />
      </select>
    </Field>
  );
}
