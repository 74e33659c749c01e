import { z } from 'zod';
type Responses = Readonly<Record<number, z.ZodType | { contentType: string }>>;
type ResultFor<S, R> = (R extends z.ZodType ? { body: z.input<R> } : { raw: string }) & { status?: S };
type RouteResult<R extends Responses> = { [S in keyof R]: ResultFor<S, R[S]> }[keyof R];
interface Def<B extends z.ZodType, R extends Responses> { body?: B; responses: R; handler: (ctx: { body: z.output<B> }) => NoInfer<Promise<RouteResult<R>> | RouteResult<R>> }
function route<B extends z.ZodType = z.ZodUnknown, R extends Responses = Responses>(d: Def<B, R>) { return d; }
const Ok = z.strictObject({ ok: z.literal(true) });
route({ responses: { 201: Ok }, handler: async (r) => ({ status: 201, body: { ok: true } }) });
route({ responses: { 201: Ok }, handler: async (r) => { return { status: 201, body: { ok: true } }; } });
route({ responses: { 200: Ok }, handler: async (r) => { return { body: { ok: true } }; } });
