/**
 * The one place errors become HTTP answers: the application's errors (src/domain/errors.ts), the
 * typed store errors, and anything unexpected (a logged 500 whose message says nothing about
 * internals), serialised as `{"error": {code, message}}` by `errorBody`.
 */
import { z } from 'zod';
import { AppError } from '../domain/errors.js';
import { BulkUpdateError, DocumentTooLargeError, DuplicateKeyError, InvalidQueryError, MAX_DOCUMENT_BYTES, StoreUnavailableError } from '../store/types.js';

/** An answer only HTTP gives, with headers of its own (Allow, WWW-Authenticate). */
export class HttpError extends AppError {
  constructor(
    status: number,
    code: string,
    message: string,
    readonly headers: Record<string, string>,
  ) {
    super(status, code, message);
    this.name = 'HttpError';
  }
}

/** The one body shape of every error answer (schemas/error.schema.json is generated from it: `npm run schemas`). */
export const ErrorBody = z
  .strictObject({
    error: z.strictObject({
      code: z.string().meta({ description: 'Stable machine-readable code, e.g. not_found, validation_failed' }),
      message: z.string().meta({ description: 'What went wrong and, where possible, what to fix' }),
    }),
  })
  .meta({ id: 'Error', title: 'Error', description: 'The one body shape of every error answer, HTTP or WebSocket.' });
export type ErrorBody = z.infer<typeof ErrorBody>;

export function errorBody(code: string, message: string): ErrorBody {
  return { error: { code, message } };
}

/** Headers that go with an error's answer. */
export function errorHeaders(err: AppError): Record<string, string> | undefined {
  if (err instanceof HttpError) return err.headers;
  return err.retryAfterSeconds === undefined ? undefined : { 'retry-after': String(err.retryAfterSeconds) };
}

/** Maps any thrown value to an AppError; `unexpected` is true when it should be logged as a bug. */
export function toHttpError(err: unknown): { error: AppError; unexpected: boolean } {
  if (err instanceof AppError) return { error: err, unexpected: false };
  if (err instanceof BulkUpdateError) return toHttpError(err.first);
  if (err instanceof DocumentTooLargeError) {
    return {
      error: new AppError(413, 'payload_too_large', `the record would be larger than the store's limit of ${MAX_DOCUMENT_BYTES / (1024 * 1024)} MiB`),
      unexpected: false,
    };
  }
  if (err instanceof DuplicateKeyError) {
    return { error: new AppError(409, 'conflict', 'a record with the same unique value already exists'), unexpected: false };
  }
  if (err instanceof InvalidQueryError) return { error: new AppError(400, 'invalid_query', 'the query could not be run'), unexpected: false };
  if (err instanceof StoreUnavailableError) {
    return { error: new AppError(503, 'store_unavailable', 'the store is unavailable; try again'), unexpected: true };
  }
  return { error: new AppError(500, 'internal', 'internal error'), unexpected: true };
}
