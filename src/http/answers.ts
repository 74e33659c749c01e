/** The answers routes give themselves when there is nothing to show: `{ok: true}` and `{success: true}` (the interface uses both). */
import { z } from 'zod';

export const Ok = z.strictObject({ ok: z.literal(true) }).meta({ id: 'Ok' });
export const Success = z.strictObject({ success: z.literal(true) }).meta({ id: 'Success' });
