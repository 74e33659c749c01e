/**
 * One error type with a status, serialised in one place (`errorBody`). Store errors and
 * anything unexpected are translated by `toHttpError`; unexpected errors become a logged 500
 * whose message says nothing about internals.
 */
import { BulkUpdateError, DocumentTooLargeError, DuplicateKeyError, InvalidQueryError, MAX_DOCUMENT_BYTES, StoreUnavailableError } from '../store/types.js';

export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly headers?: Record<string, string>,
  ) {
    super(message);
    this.name = 'HttpError';
  }
}

export const badRequest = (message: string, code = 'bad_request') => new HttpError(400, code, message);
export const unauthorized = (message = 'authentication required', code = 'unauthorized') =>
  new HttpError(401, code, message);
export const forbidden = (message = 'not allowed', code = 'forbidden') => new HttpError(403, code, message);
export const notFound = (message = 'not found', code = 'not_found') => new HttpError(404, code, message);
export const conflict = (message: string, code = 'conflict') => new HttpError(409, code, message);
export const badGateway = (message: string, code = 'bad_gateway') => new HttpError(502, code, message);

export interface ErrorBody {
  error: { code: string; message: string };
}

export function errorBody(code: string, message: string): ErrorBody {
  return { error: { code, message } };
}

/** Maps any thrown value to an HttpError; `unexpected` is true when it should be logged as a bug. */
export function toHttpError(err: unknown): { error: HttpError; unexpected: boolean } {
  if (err instanceof HttpError) return { error: err, unexpected: false };
  if (err instanceof BulkUpdateError) return toHttpError(err.first);
  if (err instanceof DocumentTooLargeError) {
    return {
      error: new HttpError(413, 'payload_too_large', `the record would be larger than the store's limit of ${MAX_DOCUMENT_BYTES / (1024 * 1024)} MiB`),
      unexpected: false,
    };
  }
  if (err instanceof DuplicateKeyError) {
    return { error: new HttpError(409, 'conflict', 'a record with the same unique value already exists'), unexpected: false };
  }
  if (err instanceof InvalidQueryError) return { error: new HttpError(400, 'invalid_query', 'the query could not be run'), unexpected: false };
  if (err instanceof StoreUnavailableError) {
    return { error: new HttpError(503, 'store_unavailable', 'the store is unavailable; try again'), unexpected: true };
  }
  return { error: new HttpError(500, 'internal', 'internal error'), unexpected: true };
}
