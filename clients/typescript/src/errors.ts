/**
 * Errors of the client, shaped like the Python client's (docs/client.md, "Errors"):
 *
 *     KiviDBError
 *     ├── ApiError                 the API answered with an error status
 *     │   ├── AuthenticationError  401
 *     │   ├── PermissionDeniedError 403
 *     │   ├── NotFoundError        404
 *     │   ├── ConflictError        409
 *     │   ├── PayloadTooLargeError 413
 *     │   ├── ValidationError      422 (`details` names each field and its problem)
 *     │   ├── RateLimitedError     429
 *     │   └── ServerError          5xx
 *     │       └── UnavailableError 503
 *     ├── ApiConnectionError       no answer: the API could not be reached, timed out, or the call was aborted
 *     └── UnexpectedResponseError  an answer the client cannot read
 *
 * No error's message, property or cause ever holds the API key: messages name the method and
 * the path only, and the request's headers are never kept.
 */

/** One problem of a 422 (or another error's `details`): the field and what is wrong. */
export interface ErrorDetail {
  field: string;
  problem: string;
}

export class KiviDBError extends Error {
  override name = "KiviDBError";
}

/** The API answered with an error status: its `status`, stable `code`, `message` and `details`. */
export class ApiError extends KiviDBError {
  override name = "ApiError";
  readonly status: number;
  readonly code: string;
  readonly details: ErrorDetail[];
  /** Seconds the answer's `Retry-After` asked to wait, when it had one. */
  readonly retryAfter: number | undefined;

  constructor(
    status: number,
    code: string,
    message: string,
    details: ErrorDetail[] = [],
    retryAfter?: number,
  ) {
    super(`${status} ${code}: ${message}`);
    this.status = status;
    this.code = code;
    this.details = details;
    this.retryAfter = retryAfter;
  }
}

export class AuthenticationError extends ApiError {
  override name = "AuthenticationError";
}
export class PermissionDeniedError extends ApiError {
  override name = "PermissionDeniedError";
}
export class NotFoundError extends ApiError {
  override name = "NotFoundError";
}
export class ConflictError extends ApiError {
  override name = "ConflictError";
}
export class PayloadTooLargeError extends ApiError {
  override name = "PayloadTooLargeError";
}
export class ValidationError extends ApiError {
  override name = "ValidationError";
}
export class RateLimitedError extends ApiError {
  override name = "RateLimitedError";
}
export class ServerError extends ApiError {
  override name = "ServerError";
}
export class UnavailableError extends ServerError {
  override name = "UnavailableError";
}

/** No answer: the API could not be reached, did not answer within the timeout, or the call's
 * `AbortSignal` aborted it (`aborted` true). */
export class ApiConnectionError extends KiviDBError {
  override name = "ApiConnectionError";
  readonly aborted: boolean;

  constructor(message: string, aborted = false) {
    super(message);
    this.aborted = aborted;
  }
}

/** An answer the client cannot read (not the API's JSON shape). */
export class UnexpectedResponseError extends KiviDBError {
  override name = "UnexpectedResponseError";
  readonly status: number;

  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

const BY_STATUS: Record<number, typeof ApiError> = {
  401: AuthenticationError,
  403: PermissionDeniedError,
  404: NotFoundError,
  409: ConflictError,
  413: PayloadTooLargeError,
  422: ValidationError,
  429: RateLimitedError,
  503: UnavailableError,
};

/** The `ApiError` subclass of `status` with the answer's fields. */
export function apiError(
  status: number,
  code: string,
  message: string,
  details: ErrorDetail[],
  retryAfter?: number,
): ApiError {
  const Kind = BY_STATUS[status] ?? (status >= 500 ? ServerError : ApiError);
  return new Kind(status, code, message, details, retryAfter);
}
