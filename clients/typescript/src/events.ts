/**
 * Events as the framework adapters send them: within the API's limits (docs/limits.md, "Events"),
 * so that one long message or one photo never makes a whole turn fail, and without bytes of
 * media, which are the app's to keep.
 */

import type { Schemas } from "./client.js";

type EventIn = Schemas["EventIn"];

/** The API's limit of events in one `POST .../events`. */
export const MAX_EVENTS_PER_CALL = 100;
/** The API's limit of a message's `content`, and of its `item` as compact JSON, in characters. */
export const MAX_MESSAGE_CHARS = 32_000;
/** The API's limit of a search or recall `query`, in characters. */
export const MAX_QUERY_CHARS = 8_000;
/** The API's limit of a memory's `text`, in characters. */
export const MAX_MEMORY_CHARS = 8_000;

/** `text` cut to at most `limit` characters (UTF-16 code units, which is never fewer than the
 * API's count of code points), never between the two halves of a surrogate pair; with `marker`
 * the cut text ends with `… [N characters cut]` within the limit. */
export function cut(text: string, limit: number, marker = true): string {
  if (text.length <= limit) return text;
  const note = marker ? ` … [${text.length - limit} characters cut]` : "";
  let end = Math.max(0, limit - note.length);
  const last = text.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end -= 1; // a high surrogate whose pair would be cut off
  return text.slice(0, end) + note;
}

/** The event within the API's limits: an `item` longer than `MAX_MESSAGE_CHARS` as JSON is left
 * out (its text stays as `content`, or its JSON text, cut, when it has no content), and a
 * `content` longer than that is cut with a marker saying how much. */
export function fitEvent(event: EventIn): EventIn {
  const fitted: EventIn = { ...event };
  if (fitted.item !== undefined && fitted.item !== null) {
    const json = JSON.stringify(fitted.item);
    if (json.length > MAX_MESSAGE_CHARS) {
      delete fitted.item;
      if (fitted.content === undefined) fitted.content = json;
    }
  }
  if (typeof fitted.content === "string") fitted.content = cut(fitted.content, MAX_MESSAGE_CHARS);
  return fitted;
}

/** `events` in batches the API takes in one call. */
export function batches<T>(events: readonly T[]): T[][] {
  const out: T[][] = [];
  for (let start = 0; start < events.length; start += MAX_EVENTS_PER_CALL) {
    out.push(events.slice(start, start + MAX_EVENTS_PER_CALL));
  }
  return out;
}

/** A required id given by the app (an actor or a session): a non-empty string, else a
 * `TypeError` naming `name` (an unset environment variable reaches here as undefined, and would
 * otherwise widen a read to every actor). */
export function requiredId(name: string, value: unknown): string {
  if (typeof value !== "string" || value.length === 0) {
    throw new TypeError(`${name} must be a non-empty string`);
  }
  return value;
}
