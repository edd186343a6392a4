// The one way the console talks to the API: same origin, `Authorization: Bearer <key>`, JSON.
//
// The key lives in sessionStorage (this tab only, gone when it closes) and in this module;
// never in a URL, a cookie or localStorage. Any 401 signs out with the API's reason. A 503
// raises the retry banner with the answer's Retry-After.

import { emit } from "./events.js";

const KEY_ITEM = "kividb.console.apiKey";

// The API's origin and base path: the page is served at <base>/console.
export const BASE = location.pathname.replace(/\/console\/?$/, "");

let apiKey = sessionStorage.getItem(KEY_ITEM) || "";

export function signedIn() {
  return apiKey !== "";
}

export function signIn(key) {
  apiKey = key;
  sessionStorage.setItem(KEY_ITEM, key);
  emit("auth", { signedIn: true, reason: "" });
}

export function signOut(reason = "") {
  apiKey = "";
  sessionStorage.removeItem(KEY_ITEM);
  emit("auth", { signedIn: false, reason });
}

/** An answer other than 2xx: `status`, the API's `code`, `message` and `details`. */
export class ApiError extends Error {
  constructor(status, body, retryAfter) {
    const message =
      (body && typeof body.message === "string" && body.message) ||
      `The API answered ${status}.`;
    super(message);
    this.status = status;
    this.code = (body && typeof body.error === "string" && body.error) || `http_${status}`;
    this.details = (body && Array.isArray(body.details) && body.details) || [];
    this.retryAfter = retryAfter;
  }
}

/** `/instances/{id}/agent-memory/{store}/...` with every segment encoded. */
export function path(...segments) {
  return "/" + segments.map((s) => encodeURIComponent(String(s))).join("/");
}

export function storePath(instance, store, ...rest) {
  return path("instances", instance, "agent-memory", store, ...rest);
}

function retryAfterSeconds(response) {
  const value = response.headers.get("Retry-After");
  if (value && /^\d+$/.test(value.trim())) return Math.min(Number(value.trim()), 300);
  const date = value ? Date.parse(value) : NaN;
  if (!Number.isNaN(date)) return Math.max(1, Math.min(300, Math.ceil((date - Date.now()) / 1000)));
  return 5;
}

/**
 * Every page of a listing that pages by `cursor` (GET /keys, the store listings: each page is
 * cut to the answer's byte budget and names the next in `next_cursor`): the first page's
 * answer with `field` holding the items of every page, in order.
 */
export async function allPages(route, field) {
  const first = await api("GET", route);
  let cursor = first.next_cursor;
  while (cursor) {
    const page = await api("GET", route, { query: { cursor } });
    first[field] = first[field].concat(page[field]);
    cursor = page.next_cursor;
  }
  return { ...first, next_cursor: null };
}

/**
 * Call the API. `query` values that are empty are left out. Returns the parsed JSON (null for
 * 204). Throws ApiError; a network failure is an ApiError with status 0.
 */
export async function api(method, route, { query, body, key } = {}) {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query || {})) {
    if (value !== undefined && value !== null && value !== "") params.set(name, String(value));
  }
  const search = params.toString();
  const headers = { Authorization: `Bearer ${key ?? apiKey}`, Accept: "application/json" };
  const init = { method, headers, cache: "no-store", credentials: "omit", redirect: "error" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(BASE + route + (search ? `?${search}` : ""), init);
  } catch (error) {
    throw new ApiError(0, {
      error: "network_error",
      message: "The API could not be reached. Check that it is running, then try again.",
    });
  }
  if (response.status === 204) return null;
  let data = null;
  const text = await response.text();
  try {
    data = text ? JSON.parse(text) : null;
  } catch (error) {
    data = null;
  }
  if (response.ok) return data;
  const failure = new ApiError(response.status, data, retryAfterSeconds(response));
  if (response.status === 401 && key === undefined) signOut(failure.message);
  if (response.status === 503) emit("unavailable", failure);
  throw failure;
}
