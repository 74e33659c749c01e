import { z } from 'zod';
const Ok = z.strictObject({ ok: z.literal(true) });
type BodyOf<R> = R extends z.ZodType ? z.input<R> : never;
// 1: simplest generic, body only
function r1<R extends z.ZodType>(d: { resp: R; handler: () => { body: z.input<R> } }) { return d; }
r1({ resp: Ok, handler: () => ({ body: { ok: true } }) });
// 2: body via index
function r2<R extends Record<number, z.ZodType>>(d: { resp: R; handler: () => { body: z.input<R[keyof R]> } }) { return d; }
r2({ resp: { 200: Ok }, handler: () => ({ body: { ok: true } }) });
// 3: NoInfer
function r3<R extends z.ZodType>(d: { resp: R; handler: () => NoInfer<{ body: z.input<R> }> }) { return d; }
r3({ resp: Ok, handler: () => ({ body: { ok: true } }) });
// 4: z.output
function r4<R extends z.ZodType>(d: { resp: R; handler: () => { body: z.output<R> } }) { return d; }
r4({ resp: Ok, handler: () => ({ body: { ok: true } }) });
// 5: infer T directly
function r5<T>(d: { resp: z.ZodType<T>; handler: () => { body: NoInfer<T> } }) { return d; }
r5({ resp: Ok, handler: () => ({ body: { ok: true } }) });
