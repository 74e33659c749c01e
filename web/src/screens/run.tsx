/**
 * One run's timeline (GET …/runs/{runId}/timeline): each step's attempts as bars on one time axis,
 * a countdown to a retry that is waiting, errors in words; cancel while it runs. It follows the
 * feed's runs topic narrowed to the workflow, re-reading when a frame concerns this run.
 */
import { useEffect, useState } from 'preact/hooks';
import * as wf from '../api/workflows';
import { useLoad, useSoon } from '../app/hooks';
import type { ScreenProps } from '../app/routes';
import { access } from '../app/session';
import { useTopic } from '../app/topics';
import { Action, Empty, ErrorNote, Loading, Time } from '../ui/kit';
import { RunBadge } from '../ui/runs';

const ms = (iso: string) => new Date(iso).getTime();

function duration(msTotal: number): string {
  const s = Math.max(0, Math.round(msTotal / 1000));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  return m < 60 ? `${m} min ${s % 60} s` : `${Math.floor(m / 60)} h ${m % 60} min`;
}

/** The current time, ticking every second while `on`. */
function useNow(on: boolean): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    if (!on) return undefined;
    const t = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(t);
  }, [on]);
  return now;
}

export function TimelineBars({ timeline, names, now }: { timeline: wf.Timeline; names: Record<string, string>; now: number }) {
  const start = ms(timeline.startedAt);
  const attemptsEnd = timeline.steps.flatMap((s) => s.attempts.map((a) => (a.finishedAt ? ms(a.finishedAt) : now)));
  const end = Math.max(start + 1000, timeline.finishedAt ? ms(timeline.finishedAt) : now, ...attemptsEnd);
  const pct = (t: number) => `${(((t - start) / (end - start)) * 100).toFixed(2)}%`;
  if (timeline.steps.length === 0) return <Empty title="No step has started yet." />;
  return (
    <ol class="timeline" aria-label={`Steps of run ${timeline.runId} over time`}>
      {timeline.steps.map((s) => {
        const last = s.attempts[s.attempts.length - 1];
        return (
          <li key={s.stepId} data-step={s.stepId} data-outcome={last?.outcome ?? 'pending'}>
            <div>
              <strong>{names[s.stepId] ?? s.stepId}</strong>
              <div class="muted">
                {last ? last.outcome : 'waiting'}
                {s.attempts.length > 1 && ` · ${s.attempts.length} attempts`}
              </div>
            </div>
            <div class="lane">
              {s.attempts.map((a) => {
                const from = ms(a.startedAt);
                const until = a.finishedAt ? ms(a.finishedAt) : now;
                return (
                  <span
                    key={a.attempt}
                    class={`bar ${a.outcome}`}
                    style={{ left: pct(from), width: `calc(${pct(until)} - ${pct(from)})` }}
                    title={`Attempt ${a.attempt}: ${a.outcome}, ${duration(until - from)}${a.error ? ` — ${a.error}` : ''}`}
                  />
                );
              })}
            </div>
            <ul class="attempts">
              {s.attempts.map((a) => (
                <li key={a.attempt}>
                  Attempt {a.attempt}: {a.outcome} after {duration((a.finishedAt ? ms(a.finishedAt) : now) - ms(a.startedAt))}
                  {a.error && <span class="field-error"> — {a.error}</span>}
                  {a.retryAt && ms(a.retryAt) > now && <span class="retry"> · retry in {duration(ms(a.retryAt) - now)}</span>}
                </li>
              ))}
            </ul>
          </li>
        );
      })}
    </ol>
  );
}

export default function RunScreen({ params }: ScreenProps) {
  const a = access.value!;
  const workflowId = params.id!;
  const runId = params.runId!;
  const workflow = useLoad(() => wf.getWorkflow(workflowId), [workflowId]);
  const timeline = useLoad(() => wf.getTimeline(workflowId, runId), [workflowId, runId]);
  const reload = useSoon(timeline.reload, 300);
  const t = timeline.data;
  useTopic('runs', { workflowId }, (f) => (f.type === 'resync' || (f.type === 'run' && f.runId === runId)) && reload(), !t || t.status === 'running');
  const waiting = t?.steps.some((s) => s.attempts.some((x) => x.outcome === 'running' || (x.retryAt && ms(x.retryAt) > Date.now()))) ?? false;
  const now = useNow(t?.status === 'running' || waiting);
  const [error, setError] = useState<unknown>(null);
  const w = workflow.data?.workflow;
  const names = Object.fromEntries((w?.definition.steps ?? []).map((s) => [s.id, s.name]));
  const mayCancel = w ? a.atLeast('operator', w.workspaceId) : false;
  return (
    <section>
      <p>
        <a href="/runs">Runs</a> ·{' '}
        <a href={`/workflows/${encodeURIComponent(workflowId)}?tab=runs&run=${encodeURIComponent(runId)}`}>{w?.name ?? 'Workflow'}</a>
      </p>
      <h1>
        Run <code>{runId}</code> {t && <RunBadge status={t.status} />}
      </h1>
      <ErrorNote error={timeline.error ?? workflow.error ?? error} />
      {!t ? (
        !timeline.error && <Loading what="Loading the timeline" />
      ) : (
        <>
          <p class="muted">
            Started <Time iso={t.startedAt} absolute />
            {t.finishedAt ? (
              <>
                {' '}
                · ended <Time iso={t.finishedAt} absolute /> after {duration(ms(t.finishedAt) - ms(t.startedAt))}
              </>
            ) : (
              <> · running for {duration(now - ms(t.startedAt))}</>
            )}
          </p>
          {mayCancel && t.status === 'running' && (
            <Action
              kind="danger"
              onRun={async () => {
                setError(null);
                await wf.cancelRun(workflowId, runId);
                timeline.reload();
              }}
              onError={setError}
            >
              Cancel the run
            </Action>
          )}
          <TimelineBars timeline={t} names={names} now={now} />
        </>
      )}
    </section>
  );
}
