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

/** A path segment (an id), percent-encoded whole; an empty one is a `TypeError`. */
export function segment(name: string, value: string): string {
  if (typeof value !== "string" || value.length === 0) {
    throw new TypeError(`${name} must be a non-empty string`);
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

interface Attempt {
  response?: Response;
  /** The request may have reached the API (a failure after it went out). */
  sent: boolean;
  failure?: ApiConnectionError;
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
  try {
    const response = await transport.fetch(url(transport, call), {
      method: call.method,
      headers,
      body: call.body === undefined ? undefined : JSON.stringify(call.body),
      signal,
    });
    return { response, sent: true };
  } catch (error) {
    if (options.signal?.aborted) throw aborted(options.signal);
    const what = `${call.method} ${call.path}`;
    if (deadline.aborted) {
      return {
        sent: true,
        failure: new ApiConnectionError(`${what} got no answer within ${timeoutMs} ms.`),
      };
    }
    // fetch gives a TypeError for a connection that could not be made; its cause says why
    const reason = (error as { cause?: { code?: string } })?.cause?.code ?? "network error";
    return {
      sent: false,
      failure: new ApiConnectionError(`${what} could not reach the API (${reason}).`),
    };
  }
}

/** The answer of `call` read as JSON (`undefined` for 204), retried by the module's rules;
 * the error of the last attempt otherwise. */
export async function send<T>(transport: Transport, call: Call, options: CallOptions = {}): Promise<T> {
  for (let tries = 1; ; tries++) {
    const got = await attempt(transport, call, options);
    const response = got.response;
    if (response === undefined) {
      const again = tries <= transport.maxRetries && (!got.sent || call.idempotent);
      if (!again) throw got.failure;
      await sleep(backoffMs(tries), options.signal);
      continue;
    }
    const text = await response.text();
    if (response.ok) {
      if (response.status === 204 || text === "") return undefined as T;
      try {
        return JSON.parse(text) as T;
      } catch {
        throw new UnexpectedResponseError(response.status, `${call.method} ${call.path} answered ${response.status} with a body that is not JSON.`);
      }
    }
    const wait = retryAfterSeconds(response.headers.get("retry-after"));
    const retriable =
      response.status === 429 ||
      (response.status === 503 && call.idempotent) ||
      (response.status === 409 && wait !== undefined && call.idempotencyKey !== undefined);
    const waitMs = wait === undefined ? backoffMs(tries) : wait * 1000;
    if (retriable && tries <= transport.maxRetries && waitMs <= transport.maxRetryWaitMs) {
      await sleep(waitMs, options.signal);
      continue;
    }
    throw errorOf(call, response.status, text, wait);
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
