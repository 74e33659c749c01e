import { z } from 'zod';
type Responses = Readonly<Record<number, z.ZodType | { contentType: string }>>;
type ResultFor<S, R> = (R extends z.ZodType ? { body: z.input<R> } : { raw: string }) & { status?: S };
type RouteResult<R extends Responses> = { [S in keyof R]: ResultFor<S, R[S]> }[keyof R];
const Ok = z.strictObject({ ok: z.literal(true) });
const h1: () => Promise<RouteResult<{ 201: typeof Ok }>> = async () => ({ status: 201, body: { ok: true } });
const h2: () => RouteResult<{ 201: typeof Ok }> = () => ({ status: 201, body: { ok: true } });
const h3: () => Promise<RouteResult<{ 201: typeof Ok }>> | RouteResult<{ 201: typeof Ok }> = async () => ({ status: 201, body: { ok: true } });
const h4: () => Promise<{ status?: 201; body: { ok: true } }> | { status?: 201; body: { ok: true } } = async () => ({ status: 201, body: { ok: true } });
