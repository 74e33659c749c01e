/**
 * Cron schedules of workflows (interface §4.10 rule 4). docs/workflows.md describes them.
 *
 *   POST   /api/schedules       user     201 {success, schedule}
 *   GET    /api/schedules       session  200 {success, schedules}
 *   GET    /api/schedules/:id   session  200 {schedule}
 *   DELETE /api/schedules/:id   user     200 {success}
 *
 * Who may schedule is the schedule service's (src/services/schedules.ts).
 */
import { z } from 'zod';
import { route, type RouteDef } from '../router.js';
import { personOf } from '../auth.js';
import { ScheduleView, cronProblem, isTimeZone, type ScheduleService } from '../../services/schedules.js';
import { Success } from '../answers.js';

const cronField = z
  .string({ message: 'required: a cron expression' })
  .trim()
  .min(1, { message: 'required: a cron expression' })
  .max(200)
  .superRefine((v, zctx) => {
    const problem = cronProblem(v);
    if (problem) zctx.addIssue({ code: 'custom', message: `not a valid cron expression (${problem})` });
  });
const timezoneField = z
  .string()
  .trim()
  .max(100)
  .refine(isTimeZone, { message: 'not an IANA time zone name (e.g. Europe/Paris, America/New_York, UTC)' });

export function scheduleRoutes({ schedules }: { schedules: ScheduleService }): RouteDef[] {
  return [
    route({
      method: 'POST',
      path: '/api/schedules',
      auth: 'user',
      summary: 'Schedules runs of a workflow with a cron expression (5 fields, or 6 with seconds) in an IANA time zone (default UTC)',
      tags: ['workflows'],
      responses: { 201: z.strictObject({ success: z.literal(true), schedule: ScheduleView }) },
      body: z.strictObject({
        workflowId: z.string({ message: 'required: the workflow id' }).min(1).max(200),
        cron: cronField,
        params: z.record(z.string(), z.unknown(), { message: 'expected a JSON object' }).default({}),
        timezone: timezoneField.default('UTC'),
      }),
      handler: async (r) => ({ status: 201, body: { success: true, schedule: schedules.view(await schedules.add(personOf(r), r.body)) } }),
    }),

    route({
      method: 'GET',
      path: '/api/schedules',
      auth: 'session',
      summary: "Schedules of the workflows the caller sees, filtered by workflowId or workspaceId (id or slug)",
      tags: ['workflows'],
      query: z.object({ workflowId: z.string().min(1).max(200).optional(), workspaceId: z.string().min(1).max(200).optional() }),
      responses: { 200: z.strictObject({ success: z.literal(true), schedules: z.array(ScheduleView) }) },
      handler: async (r) => ({ body: { success: true, schedules: (await schedules.list(r.principal!, r.query)).map((d) => schedules.view(d)) } }),
    }),

    route({
      method: 'GET',
      path: '/api/schedules/:id',
      auth: 'session',
      summary: 'A schedule, with its next firing',
      tags: ['workflows'],
      params: z.object({ id: z.string().min(1).max(200) }),
      responses: { 200: z.strictObject({ schedule: ScheduleView }) },
      handler: async (r) => ({ body: { schedule: schedules.view(await schedules.get(r.principal!, r.params.id)) } }),
    }),

    route({
      method: 'DELETE',
      path: '/api/schedules/:id',
      auth: 'user',
      summary: 'Deletes a schedule (workspace admin or global admin); runs it already started go on',
      tags: ['workflows'],
      params: z.object({ id: z.string().min(1).max(200) }),
      responses: { 200: Success },
      handler: async (r) => {
        await schedules.delete(personOf(r), r.params.id);
        return { body: { success: true } };
      },
    }),
  ];
}
