import { z } from 'zod';
type Widened<T> = T extends string ? string : T extends number ? number : T extends boolean ? boolean : T extends bigint ? bigint : T extends readonly (infer E)[] ? Widened<E>[] : T extends object ? { [K in keyof T]: Widened<T[K]> } : T;
type Responses = Readonly<Record<number, z.ZodType | { contentType: string }>>;
type ResultFor<R> = R extends z.ZodType ? { status?: number; body: Widened<z.input<R>>; raw?: never } : { status?: number; raw: string; body?: never };
type RouteResult<R extends Responses> = { [S in keyof R]: ResultFor<R[S]> }[keyof R];
interface Def<B extends z.ZodType, R extends Responses> { body?: B; responses: R; handler: (ctx: { body: z.output<B> }) => NoInfer<Promise<RouteResult<R>> | RouteResult<R>> }
function route<B extends z.ZodType = z.ZodUnknown, R extends Responses = Responses>(d: Def<B, R>) { return d; }
const Ok = z.strictObject({ ok: z.literal(true) });
const V = z.strictObject({ a: z.string().nullable(), b: z.array(z.strictObject({ c: z.enum(['x', 'y']), d: z.number().optional() })) });
route({ responses: { 201: Ok }, handler: async (r) => ({ status: 201, body: { ok: true } }) });
route({ responses: { 201: Ok }, handler: async () => { return { status: 201, body: { ok: true } }; } });
route({ responses: { 200: V }, handler: async () => ({ body: { a: null, b: [{ c: 'x' }] } }) });
route({ responses: { 200: V }, handler: async () => ({ body: { a: null, b: [{ c: 'x', e: 1 }] } }) }); // excess -> error expected
route({ responses: { 200: V }, handler: async () => ({ body: { b: [] } }) }); // missing a -> error expected
route({ responses: { 200: V, 201: Ok }, handler: async () => (Math.random() ? { body: { ok: true } } : { body: { a: '', b: [] } }) });
const t: z.infer<typeof V> = { a: null, b: [] };
route({ responses: { 200: V }, handler: () => ({ body: t }) });
