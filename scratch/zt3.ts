import { z } from 'zod';
import { CertificateView } from '../src/domain/certificate.js';
console.log(JSON.stringify(z.toJSONSchema(z.object({c: CertificateView}), { io: 'output', unrepresentable: 'any' }), null, 1).slice(0, 3000));
