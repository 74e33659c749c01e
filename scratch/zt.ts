import { z } from 'zod';
const User = z.strictObject({ id: z.string(), did: z.string().nullable(), n: z.number().int().optional() }).meta({ id: 'User' });
const Page = z.strictObject({ users: z.array(User), first: User.nullable() });
console.log(JSON.stringify(z.toJSONSchema(Page, { target: 'draft-2020-12', io: 'output' })));
console.log(JSON.stringify(z.toJSONSchema(User, { target: 'draft-2020-12', io: 'output' })));
console.log(JSON.stringify(z.toJSONSchema(z.object({a: z.string().nullable(), r: z.record(z.string(), z.unknown())}), { target: 'draft-2020-12', io: 'input' })));
const reg = z.registry<{ id?: string }>();
