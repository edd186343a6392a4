/**
 * `@kividb/memory/openai-agents`: the OpenAI Agents SDK's `Session` (`@openai/agents`, an
 * optional peer dependency) on a KiviDB session, as the Python client's `KiviDBSession`
 * (docs/integrations.md, "OpenAI Agents SDK").
 *
 * Each input item (a message, a function call and its output, a reasoning item, any other
 * Responses item) is one message of the session whose `item` is the item itself, kept and
 * returned as the same JSON value: `getItems` gives back exactly what `addItems` was given, in
 * order. The message's role is the item's (`developer` kept as `system`), else `tool` for an
 * item whose type ends in `_result` or `_output` (a tool's answer) and `assistant` for the rest; its content is the item's text
 * when it has one, so that recall, summaries and extraction read what was said.
 */

import type { AgentInputItem, Session } from "@openai/agents-core";

import type { Schemas, StoreClient } from "./client.js";
import { NotFoundError } from "./errors.js";
import { batches } from "./events.js";

export { MAX_EVENTS_PER_CALL } from "./events.js";

type EventIn = Schemas["EventIn"];
type Message = Schemas["Message"];

/** The most messages one `GET .../sessions/{id}` gives. */
const PAGE = 1000;
const NO_SESSION = "session_not_found";
const ROLES: Record<string, EventIn["role"]> = {
  user: "user",
  assistant: "assistant",
  system: "system",
  developer: "system",
};

type Item = Record<string, unknown>;

/** What an item says in words: its `content` text (or its parts' texts), or a tool output's
 * `output` text (a string, or `{type: "text", text}`); undefined for anything else. */
function itemText(item: Item): string | undefined {
  const content = item.content ?? item.output;
  if (typeof content === "string") return content || undefined;
  if (content && typeof content === "object" && typeof (content as Item).text === "string") {
    return ((content as Item).text as string) || undefined; // a tool's `{type: "text", text}`
  }
  if (Array.isArray(content)) {
    const texts = content
      .map((part) => (part && typeof part === "object" ? (part as Item).text : undefined))
      .filter((text): text is string => typeof text === "string" && text.length > 0);
    return texts.length ? texts.join("\n") : undefined;
  }
  return undefined;
}

/** The event that keeps `item`: its role, its text as `content` when it has one, and the item. */
export function itemEvent(item: AgentInputItem): EventIn {
  const kept = JSON.parse(JSON.stringify(item)) as Item;
  const type = typeof kept.type === "string" ? kept.type : "";
  // the JavaScript SDK's tool results are `function_call_result`, `computer_call_result`...
  const answered = type.endsWith("_output") || type.endsWith("_result");
  const role = ROLES[String(kept.role)] ?? (answered ? "tool" : "assistant");
  const event: EventIn = { role, item: kept };
  const text = itemText(kept);
  if (text !== undefined) event.content = text;
  return event;
}

/** The item a message keeps; a message added without one (by another client) as a
 * `{role, content}` message. */
export function messageItem(message: Message): AgentInputItem {
  if (message.item !== undefined && message.item !== null) return message.item as unknown as AgentInputItem;
  return { role: message.role, content: message.content ?? "" } as unknown as AgentInputItem;
}

export interface KiviDBSessionOptions {
  /** The store the session lives in (`new MemoryClient().store(instanceId, name)`). */
  store: StoreClient;
  /** The actor the session belongs to (its long-term memories are that actor's). */
  actorId?: string;
  /** The most items `getItems()` returns when it is given no limit (all by default). */
  limit?: number;
}

/** An Agents SDK session kept as the KiviDB session `sessionId` (letters, digits and `._:@-`,
 * 1 to 256 characters; another id is a `ValidationError` from the API). Errors: the client's. */
export class KiviDBSession implements Session {
  readonly sessionId: string;
  readonly store: StoreClient;
  readonly actorId: string | undefined;
  readonly limit: number | undefined;

  constructor(sessionId: string, options: KiviDBSessionOptions) {
    this.sessionId = sessionId;
    this.store = options.store;
    this.actorId = options.actorId;
    this.limit = options.limit;
  }

  async getSessionId(): Promise<string> {
    return this.sessionId;
  }

  /** The newest `limit` items (all when none is given), oldest first. */
  async getItems(limit?: number): Promise<AgentInputItem[]> {
    const wanted = limit ?? this.limit;
    if (wanted !== undefined && wanted <= 0) return [];
    return (await this.#messages(wanted)).map(messageItem);
  }

  /** Keep `items` after the session's others, in order (batches of 100, each one idempotent
   * write, so a retried batch is kept once). */
  async addItems(items: AgentInputItem[]): Promise<void> {
    const events = items.map(itemEvent);
    for (const batch of batches(events)) {
      await this.store.addEvents(this.sessionId, batch, this.actorId === undefined ? {} : { actorId: this.actorId });
    }
  }

  /** Take back the newest item; undefined when the session has none. */
  async popItem(): Promise<AgentInputItem | undefined> {
    try {
      const popped = await this.store.popMessage(this.sessionId);
      return popped.message ? messageItem(popped.message) : undefined;
    } catch (error) {
      if (error instanceof NotFoundError && error.code === NO_SESSION) return undefined;
      throw error;
    }
  }

  /** Forget every item (the session is deleted; one that does not exist already is). */
  async clearSession(): Promise<void> {
    try {
      await this.store.deleteSession(this.sessionId);
    } catch (error) {
      if (!(error instanceof NotFoundError && error.code === NO_SESSION)) throw error;
    }
  }

  /** The newest `limit` messages (all when undefined), oldest first, page by page. */
  async #messages(limit: number | undefined): Promise<Message[]> {
    let found: Message[] = [];
    let before: number | undefined;
    while (limit === undefined || found.length < limit) {
      const want = limit === undefined ? PAGE : Math.min(PAGE, limit - found.length);
      let messages: Message[];
      let omitted: boolean;
      try {
        const view = await this.store.getSession(this.sessionId, before === undefined ? { recent: want } : { recent: want, beforeSeq: before });
        messages = view.messages;
        omitted = Boolean((view as { messages_omitted?: number | boolean }).messages_omitted);
      } catch (error) {
        if (error instanceof NotFoundError && error.code === NO_SESSION) return [];
        throw error;
      }
      found = [...messages, ...found];
      const first = messages[0];
      if (first === undefined || (messages.length >= want && first.seq <= 1)) break;
      if (messages.length < want && !omitted) break;
      before = first.seq;
    }
    return found;
  }
}
