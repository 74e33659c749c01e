/**
 * Tokens over time from a stored series (GET /api/stats/tokens/series), drawn with uPlot (loaded
 * on demand, so screens that show no chart do not carry it); with a daily budget, its line too.
 * The figures are also in a table for people who do not see the chart.
 */
import { useEffect, useRef } from 'preact/hooks';
import type uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import type { TokenCount, TokenSeries } from '../api/fleet';

/** A bucket (`2026-11-26` or `2026-11`) as seconds since the epoch, at its start in UTC. */
const bucketTime = (b: string) => Date.parse(b.length === 7 ? `${b}-01T00:00:00Z` : `${b}T00:00:00Z`) / 1000;
export const tokenNumber = (t: TokenCount) => (typeof t === 'number' ? t : Number(t));
export const tokenText = (t: TokenCount) => (typeof t === 'number' ? t.toLocaleString() : BigInt(t).toLocaleString());

export function TokenChart({ series, label }: { series: TokenSeries; label: string }) {
  const el = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const budget = series.granularity === 'day' ? series.budget?.maxTokensPerDay : undefined;
  const data = (): uPlot.AlignedData => {
    const xs = series.points.map((p) => bucketTime(p.bucket));
    const ys = series.points.map((p) => tokenNumber(p.tokens));
    return budget !== undefined ? [xs, ys, xs.map(() => budget)] : [xs, ys];
  };
  useEffect(() => {
    let live = true;
    import('uplot').then(
      ({ default: UPlot }) => {
        if (!live || !el.current) return;
        const width = Math.max(300, el.current.clientWidth - 16);
        const lines: uPlot.Series[] = [{}, { label: 'Tokens', stroke: '#1f5fbf', fill: 'rgba(31,95,191,0.15)', width: 2, paths: UPlot.paths.bars?.({ size: [0.7, 40] }) }];
        if (budget !== undefined) lines.push({ label: 'Daily budget', stroke: '#b3261e', width: 2, dash: [6, 4], points: { show: false } });
        plot.current = new UPlot({ width, height: 220, series: lines, axes: [{}, { size: 70 }], scales: { x: { time: true } } }, data(), el.current);
      },
      () => undefined,
    );
    return () => {
      live = false;
      plot.current?.destroy();
      plot.current = null;
    };
  }, [budget]);
  useEffect(() => plot.current?.setData(data()), [series]);
  return (
    <figure class="token-chart">
      <div class="chart" ref={el} role="img" aria-label={label} />
      <figcaption class="muted">
        {tokenText(series.total)} tokens in these {series.points.length} {series.granularity === 'day' ? 'days' : 'months'}
        {series.budget && (
          <>
            {' '}
            · today {tokenText(series.budget.todayUsed)} of {series.budget.maxTokensPerDay.toLocaleString()} ({Math.round(series.budget.todayFraction * 100)}% of the daily budget)
          </>
        )}
      </figcaption>
    </figure>
  );
}
