/**
 * The application's one error: what a rule refuses, with the status class of the refusal, a
 * stable `code` and a message that says what to do. Services and integrations throw it; each
 * transport turns it into its own answer (src/http/errors.ts: the `{"error": {code, message}}`
 * body with the status).
 */
export class AppError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    /** For a refusal that passes with time (429, 503): how long to wait before trying again. */
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
    this.name = 'AppError';
  }
}

export const badRequest = (message: string, code = 'bad_request') => new AppError(400, code, message);
export const unauthorized = (message = 'authentication required', code = 'unauthorized') => new AppError(401, code, message);
export const forbidden = (message = 'not allowed', code = 'forbidden') => new AppError(403, code, message);
export const notFound = (message = 'not found', code = 'not_found') => new AppError(404, code, message);
export const conflict = (message: string, code = 'conflict') => new AppError(409, code, message);
export const badGateway = (message: string, code = 'bad_gateway') => new AppError(502, code, message);
export const unavailable = (message: string, code = 'unavailable') => new AppError(503, code, message);
