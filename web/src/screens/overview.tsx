/**
 * Overview (global admins): fleet counts and token usage (GET /api/stats/tokens, refreshed every
 * 60 s as the interface asks, paused while the tab is hidden). The chart plots the readings this
 * page has taken since it opened; a stored time series comes with a later server version.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import type uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { listAgents, listRegistrations } from '../api/agents';
import { tokenStats } from '../api/fleet';
import type { TokenStats } from '../api/types';
import { useLoad, usePoll } from '../app/hooks';
import { ErrorNote, Loading } from '../ui/kit';

const total = (c: { promptTokens: number; completionTokens: number }) => c.promptTokens + c.completionTokens;

function Chart({ samples }: { samples: Array<[number, number, number]> }) {
  const el = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  useEffect(() => {
    let live = true;
    import('uplot').then(({ default: UPlot }) => {
      if (!live || !el.current) return;
      const width = Math.max(300, el.current.clientWidth - 16);
      plot.current = new UPlot(
        {
          width,
          height: 220,
          series: [{}, { label: 'Prompt tokens today', stroke: '#1f5fbf', width: 2 }, { label: 'Completion tokens today', stroke: '#1b7a3d', width: 2 }],
          axes: [{}, { size: 70 }],
        },
        [[], [], []],
        el.current,
      );
    }, () => undefined);
    return () => {
      live = false;
      plot.current?.destroy();
      plot.current = null;
    };
  }, []);
  useEffect(() => {
    plot.current?.setData([samples.map((s) => s[0]), samples.map((s) => s[1]), samples.map((s) => s[2])]);
  }, [samples, plot.current]);
  return <div class="chart" ref={el} role="img" aria-label="Today's prompt and completion tokens, as read by this page since it opened" />;
}

export default function Overview() {
  const [stats, setStats] = useState<TokenStats | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [samples, setSamples] = useState<Array<[number, number, number]>>([]);
  const read = () =>
    tokenStats().then(
      (s) => {
        setStats(s);
        setError(null);
        setSamples((list) => [...list.slice(-1439), [Date.now() / 1000, s.daily.promptTokens, s.daily.completionTokens]]);
      },
      setError,
    );
  useEffect(() => void read(), []);
  usePoll(() => void read(), 60_000);
  const agents = useLoad(() => listAgents({ pageSize: 1 }), []);
  const regs = useLoad(() => listRegistrations(), []);
  usePoll(agents.reload, 30_000);
  return (
    <section>
      <h1>Overview</h1>
      <ErrorNote error={error ?? agents.error} />
      <div class="cards">
        <div class="card">
          <div class="muted">Agents</div>
          <div class="figure">{agents.data ? agents.data.total.toLocaleString() : '…'}</div>
          <div>{agents.data ? `${agents.data.online.toLocaleString()} online` : ''}</div>
        </div>
        <div class="card">
          <div class="muted">Waiting for approval</div>
          <div class="figure">{regs.data ? regs.data.registrations.length : '…'}</div>
          <a href="/registrations">Registrations</a>
        </div>
        {stats ? (
          <>
            <div class="card">
              <div class="muted">Tokens today (UTC)</div>
              <div class="figure">{total(stats.daily).toLocaleString()}</div>
              <div class="muted">
                {stats.daily.promptTokens.toLocaleString()} prompt · {stats.daily.completionTokens.toLocaleString()} completion
              </div>
            </div>
            <div class="card">
              <div class="muted">This month</div>
              <div class="figure">{total(stats.monthly).toLocaleString()}</div>
            </div>
            <div class="card">
              <div class="muted">All time</div>
              <div class="figure">{total(stats.allTime).toLocaleString()}</div>
            </div>
          </>
        ) : (
          !error && <Loading what="Reading token usage" />
        )}
      </div>
      <h2>Tokens today, as read since this page opened</h2>
      <p class="muted">Read every 60 seconds while this tab is visible; counts include offline agents and trail heartbeats by up to the roll-up interval.</p>
      <Chart samples={samples} />
    </section>
  );
}
