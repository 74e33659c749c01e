/**
 * What the log says about an outside service (the model proxy, a bridge's endpoint, the skills
 * catalogue, the code host): one warn line with the reason when its calls start failing, one info
 * line when a call works again — not a line per failed request. The calls of a streak after its
 * first are logged at debug level.
 */
import type { Logger } from '../log.js';

export class OutageLog {
  private failures = 0;
  private since: string | null = null;

  /** `service` names it in the lines (`the model proxy`); `fields` go on each line (a bridge id). */
  constructor(
    private readonly log: Logger,
    private readonly service: string,
    private readonly fields: Record<string, unknown> = {},
  ) {}

  /** A call failed because of the service (unreachable, timed out, 5xx, refused our credentials). */
  failed(reason: string): void {
    this.failures++;
    if (this.failures === 1) {
      this.since = new Date().toISOString();
      this.log.warn({ ...this.fields, outsideService: this.service, reason }, `${this.service} is failing: ${reason}`);
    } else {
      this.log.debug({ ...this.fields, outsideService: this.service, reason, failures: this.failures }, `${this.service} is still failing`);
    }
  }

  /** A call worked (whatever it answered): ends a streak of failures, if there was one. */
  worked(): void {
    if (this.failures === 0) return;
    this.log.info({ ...this.fields, outsideService: this.service, failures: this.failures, since: this.since }, `${this.service} works again after ${this.failures} failed call(s)`);
    this.failures = 0;
    this.since = null;
  }

  get failing(): boolean {
    return this.failures > 0;
  }
}
