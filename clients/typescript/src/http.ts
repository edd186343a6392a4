/**
 * One request to the API with the client's rules, as the Python client has them
 * (docs/client.md, "Retries"): a deadline per attempt (`timeoutMs`), the caller's `AbortSignal`,
 * and retries that never write twice:
 *
 * - a connection that could not be made, and a 429, are retried for every call;
 * - a 503, and a failure after the request went out, only for a call that is safe to send
 *   again: reads, PUT, DELETE, and every write, which carries an `Idempotency-Key` (the API
 *   answers a write it already did with its first answer);
 * - the wait is `Retry-After` when the answer has one (no retry when it is above
 *   `maxRetryWaitMs`), else an exponential backoff with jitter.
 *
 * The API key goes in the `Authorization` header only; no error or message holds it.
 */

import { ApiConnectionError, apiError, type ErrorDetail, UnexpectedResponseError } from "./errors.js";

export type Query = Record<string, string | number | boolean | undefined>;

export interface Call {
  method: "GET" | "PUT" | "POST" | "PATCH" | "DELETE";
  /** Already percent-encoded, from the API's root (`/instances/...`). */
  path: string;
  query?: Query;
  body?: unknown;
  /** Safe to send twice (see the module's comment). */
  idempotent: boolean;
  idempotencyKey?: string;
}

/** What every call may take. */
export interface CallOptions {
  /** Aborts the call (and its retries): `ApiConnectionError` with `aborted` true. */
  signal?: AbortSignal;
  /** Milliseconds one attempt may take; the client's `timeoutMs` by default. */
  timeoutMs?: number;
}

export interface Transport {
  baseUrl: string;
  apiKey: string;
  timeoutMs: number;
  maxRetries: number;
  maxRetryWaitMs: number;
  fetch: typeof fetch;
}

const VISIBLE_ASCII = /^[\x21-\x7e]{1,255}$/;

/** `given` when it is a valid `Idempotency-Key` (1 to 255 visible ASCII characters; a
 * `TypeError` otherwise), else a new random one: every write carries one, so a retry writes
 * nothing twice. */
export function idempotencyKey(given?: string): string {
  if (given === undefined) return crypto.randomUUID();
  if (!VISIBLE_ASCII.test(given)) {
    throw new TypeError("idempotencyKey must be 1 to 255 visible ASCII characters");
  }
  return given;
}

/** A path segment (an id), percent-encoded whole. A `TypeError` for an empty one, and for
 * `.` and `..`, which no URL can carry as a segment (a URL parser resolves them, encoded or
 * not: RFC 3986 section 5.2.4, and the WHATWG URL standard's `%2e` rule). */
export function segment(name: string, value: string): string {
  if (typeof value !== "string" || value.length === 0) {
    throw new TypeError(`${name} must be a non-empty string`);
  }
  if (value === "." || value === "..") {
    throw new TypeError(`${name} cannot be "${value}": a URL path resolves it`);
  }
  return encodeURIComponent(value);
}

function backoffMs(attempt: number): number {
  const base = Math.min(8000, 500 * 2 ** (attempt - 1));
  return base / 2 + Math.random() * (base / 2);
}

function retryAfterSeconds(value: string | null): number | undefined {
  if (value === null) return undefined;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed);
  const when = Date.parse(trimmed);
  return Number.isNaN(when) ? undefined : Math.max(0, (when - Date.now()) / 1000);
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(aborted(signal));
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(aborted(signal));
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

function aborted(_signal?: AbortSignal): ApiConnectionError {
  return new ApiConnectionError("The call was aborted by its AbortSignal.", true);
}

function url(transport: Transport, call: Call): string {
  const found = new URL(transport.baseUrl.replace(/\/+$/, "") + call.path);
  for (const [name, value] of Object.entries(call.query ?? {})) {
    if (value !== undefined) found.searchParams.set(name, String(value));
  }
  return found.toString();
}

/** Codes of a connection that was never made (Node's `fetch`, undici, gives them as the
 * `TypeError`'s `cause.code`): the request did not go out, so any call may be sent again. Every
 * other failure may come after the API got the request (a connection cut while the answer was
 * on its way), as the Python client counts it; a browser's `fetch` says nothing, so there every
 * failure counts as sent. */
const NOT_CONNECTED = new Set([
  "ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH", "EADDRNOTAVAIL",
  "UND_ERR_CONNECT_TIMEOUT",
]);

interface Answer {
  status: number;
  headers: Headers;
  text: string;
}

interface Attempt {
  answer?: Answer;
  /** The request may have reached the API (a failure after it went out). */
  sent: boolean;
  failure?: ApiConnectionError;
}

/** JSON text of a request body. A string with a lone surrogate (half of an emoji cut by a
 * slice) has no UTF-8 form: `TextEncoder` and `fetch` write U+FFFD for it, and so does this,
 * where `JSON.stringify` would write an escape the API refuses as invalid JSON. */
export function bodyText(body: unknown): string {
  return JSON.stringify(body, (_key, value: unknown) => (typeof value === "string" ? wellFormed(value) : value));
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

function wellFormed(text: string): string {
  const native = (text as { toWellFormed?: () => string }).toWellFormed;
  return native ? native.call(text) : text.replace(LONE_SURROGATE, "\uFFFD");
}

/** `work`, or the signal's reason once it aborts (a `fetch` of the caller's own may not tie
 * the body to the signal it was given). */
function untilAborted<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    work.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(error);
      },
    );
  });
}

async function attempt(transport: Transport, call: Call, options: CallOptions): Promise<Attempt> {
  const timeoutMs = options.timeoutMs ?? transport.timeoutMs;
  const deadline = AbortSignal.timeout(timeoutMs);
  const signal = options.signal ? AbortSignal.any([options.signal, deadline]) : deadline;
  const headers: Record<string, string> = {
    authorization: `Bearer ${transport.apiKey}`,
    accept: "application/json",
  };
  if (call.body !== undefined) headers["content-type"] = "application/json";
  if (call.idempotencyKey !== undefined) headers["idempotency-key"] = call.idempotencyKey;
  let connected = false;
  try {
    const response = await transport.fetch(url(transport, call), {
      method: call.method,
      headers,
      body: call.body === undefined ? undefined : bodyText(call.body),
      signal,
    });
    connected = true;
    // the body is read under the same deadline and signal: a connection cut or a stall while
    // the answer comes is a failure of this attempt like any other
    const text = await untilAborted(response.text(), signal);
    return { answer: { status: response.status, headers: response.headers, text }, sent: true };
  } catch (error) {
    if (options.signal?.aborted) throw aborted(options.signal);
    const what = `${call.method} ${call.path}`;
    if (deadline.aborted) {
      return {
        sent: true,
        failure: new ApiConnectionError(`${what} got no answer within ${timeoutMs} ms.`),
      };
    }
    const cause = (error as { cause?: { code?: unknown; name?: unknown } } | undefined)?.cause;
    const code = typeof cause?.code === "string" ? cause.code : undefined;
    const sent = connected || code === undefined || !NOT_CONNECTED.has(code);
    const reason = code ?? (error instanceof Error && error.message ? error.message : "network error");
    const verb = sent ? "failed after it was sent" : "could not reach the API";
    return { sent, failure: new ApiConnectionError(`${what} ${verb} (${reason}).`) };
  }
}

/** The answer of `call` read as JSON (`undefined` for 204), retried by the module's rules;
 * the error of the last attempt otherwise. */
export async function send<T>(transport: Transport, call: Call, options: CallOptions = {}): Promise<T> {
  for (let tries = 1; ; tries++) {
    const got = await attempt(transport, call, options);
    const answer = got.answer;
    if (answer === undefined) {
      const again = tries <= transport.maxRetries && (!got.sent || call.idempotent);
      if (!again) throw got.failure;
      await sleep(backoffMs(tries), options.signal);
      continue;
    }
    const { status, text } = answer;
    if (status >= 200 && status < 300) {
      if (status === 204 || text === "") return undefined as T;
      try {
        return JSON.parse(text) as T;
      } catch {
        throw new UnexpectedResponseError(status, `${call.method} ${call.path} answered ${status} with a body that is not JSON.`);
      }
    }
    const wait = retryAfterSeconds(answer.headers.get("retry-after"));
    const retriable =
      status === 429 ||
      (status === 503 && call.idempotent) ||
      (status === 409 && wait !== undefined && call.idempotencyKey !== undefined);
    const waitMs = wait === undefined ? backoffMs(tries) : wait * 1000;
    if (retriable && tries <= transport.maxRetries && waitMs <= transport.maxRetryWaitMs) {
      await sleep(waitMs, options.signal);
      continue;
    }
    throw errorOf(call, status, text, wait);
  }
}

function errorOf(call: Call, status: number, text: string, retryAfter?: number): Error {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  const shaped = body as { error?: unknown; message?: unknown; details?: unknown } | undefined;
  if (shaped && typeof shaped.error === "string" && typeof shaped.message === "string") {
    const details = Array.isArray(shaped.details) ? (shaped.details as ErrorDetail[]) : [];
    return apiError(status, shaped.error, shaped.message, details, retryAfter);
  }
  if (shaped && typeof shaped.message === "string") {
    // API Gateway's own answers ({"message": "Not Found"}, throttling) carry no code
    return apiError(status, `http_${status}`, shaped.message, [], retryAfter);
  }
  return new UnexpectedResponseError(status, `${call.method} ${call.path} answered ${status} with a body that is not the API's error shape.`);
}
