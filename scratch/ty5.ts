import { z } from 'zod';
const Ok = z.strictObject({ ok: z.literal(true) });
// 6: param referencing R
function r6<R extends z.ZodType>(d: { resp: R; handler: (ctx: { x: number }, r: R) => { body: z.input<R> } }) { return d; }
r6({ resp: Ok, handler: (c) => ({ body: { ok: true } }) });
// 7: separate args
function r7<R extends z.ZodType>(resp: R, d: { handler: (ctx: { x: number }) => { body: z.input<R> } }) { return d; }
r7(Ok, { handler: (c) => ({ body: { ok: true } }) });
r7(Ok, { handler: () => ({ body: { ok: true } }) });
// 8: curried
function r8<R extends z.ZodType>(resp: R) { return (d: { handler: (ctx: { x: number }) => { body: z.input<R> } }) => d; }
r8(Ok)({ handler: () => ({ body: { ok: true } }) });
