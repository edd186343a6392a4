/**
 * `@kividb/memory/strands`: a `MemoryStore` for Strands Agents for TypeScript
 * (`@strands-agents/sdk` 1.19, an optional peer dependency) on a KiviDB store's long-term
 * memory, as the Python client's `KiviDBMemoryStore` (docs/integrations.md, "Strands Agents").
 *
 * `search` is the store's search for one actor; `add` keeps a memory of the actor (redacted and
 * deduplicated as every memory is); `addMessages` adds a batch of the conversation to the
 * actor's session, where the store's own extraction draws memories from it once the
 * conversation goes quiet. Each batch goes with an idempotency key made of this store's run id
 * and the messages' `sequenceNumbers` (`AddMessagesContext`), so a batch the manager sends
 * again is kept once.
 */

import type { AddMessagesContext, MemoryEntry, MemoryStore, MessageData, SearchOptions } from "@strands-agents/sdk";

import type { Schemas, StoreClient } from "./client.js";
import { batches, fitEvent, MAX_EVENTS_PER_CALL, requiredId } from "./events.js";

type EventIn = Schemas["EventIn"];
type JSONValue = NonNullable<MemoryEntry["metadata"]>[string];

export const DESCRIPTION = "Long-term memory of the user: facts, preferences and events from past sessions.";

/** `value` as JSON without media bytes: Strands' image, document, video and audio blocks keep
 * their bytes under `source.bytes` (base64 in JSON); those are left out, their format, name and
 * location kept. */
function withoutBytes(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutBytes);
  if (!value || typeof value !== "object") return value;
  const kept: Record<string, unknown> = {};
  for (const [key, field] of Object.entries(value as Record<string, unknown>)) {
    if (key !== "bytes") kept[key] = withoutBytes(field);
  }
  return kept;
}

/** The event of one Strands message: its role (`assistant`, else `user`: Strands gives tool
 * results in user messages), the text of its text blocks as content, and the message itself
 * (tool uses and results kept as given, media without their bytes) as the item; within the
 * API's limits (`fitEvent`: a longer text is cut with a marker, a longer item left out). */
export function messageEvent(message: MessageData): EventIn {
  const kept = withoutBytes(JSON.parse(JSON.stringify(message))) as { role?: unknown; content?: unknown };
  const blocks = Array.isArray(kept.content) ? (kept.content as Record<string, unknown>[]) : [];
  const text = blocks
    .map((block) => (block && typeof block.text === "string" ? block.text : ""))
    .filter((t) => t.length > 0)
    .join("\n");
  const event: EventIn = { role: kept.role === "assistant" ? "assistant" : "user", item: kept as Record<string, unknown> };
  if (text) event.content = text;
  return fitEvent(event);
}

/** The SHA-256 of an event's JSON, in hex (Web Crypto: Node, browsers and edge runtimes). */
async function digest(event: EventIn): Promise<string> {
  const hash = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(JSON.stringify(event)));
  return Array.from(new Uint8Array(hash), (byte) => byte.toString(16).padStart(2, "0")).join("");
}

export interface KiviDBMemoryStoreOptions {
  /** The store (`new MemoryClient().store(instanceId, name)`). */
  store: StoreClient;
  /** The actor whose long-term memory this is. */
  actorId: string;
  /** The name Strands' tools target this store by (default `kividb`). */
  name?: string;
  /** What the store holds, shown in the memory tools' descriptions. */
  description?: string;
  /** Whether `add_memory` and extraction may write here (default true). */
  writable?: boolean;
  /** The most results of one search, when the caller gives none (else the API's 10). */
  maxSearchResults?: number;
  /** `hybrid` (default: keywords and meaning), `semantic`, or `keyword` (the only one for a
   * store without an embedding model). */
  searchMode?: "hybrid" | "semantic" | "keyword";
  /** The session `addMessages` adds to (default `strands-<actorId>`). */
  sessionId?: string;
  /** Strands' extraction setting; `true` makes the manager hand batches of the conversation to
   * `addMessages` (the store extracts them with its own language model). */
  extraction?: MemoryStore["extraction"];
}

/** The long-term memory of `actorId` in a KiviDB store, as a Strands `MemoryStore`. Errors: the
 * client's (`ApiError` and its kinds, `ApiConnectionError`). */
export class KiviDBMemoryStore implements MemoryStore {
  readonly name: string;
  readonly description: string;
  readonly writable: boolean;
  readonly maxSearchResults?: number;
  readonly extraction?: MemoryStore["extraction"];
  readonly store: StoreClient;
  readonly actorId: string;
  readonly sessionId: string;
  readonly searchMode: "hybrid" | "semantic" | "keyword";
  #run = crypto.randomUUID();
  /** The sequence numbers kept under this run id. */
  #acknowledged = new Set<number>();
  /** The batches whose sending failed under this run id (they may have been kept): each key
   * with its (sequence number, message digest) pairs; sent again, a batch goes under its key. */
  #unsure: [string, [number, string][]][] = [];

  constructor(options: KiviDBMemoryStoreOptions) {
    this.store = options.store;
    this.actorId = requiredId("actorId", options.actorId);
    this.name = options.name ?? "kividb";
    this.description = options.description ?? DESCRIPTION;
    this.writable = options.writable ?? true;
    if (options.maxSearchResults !== undefined) this.maxSearchResults = options.maxSearchResults;
    if (options.extraction !== undefined) this.extraction = options.extraction;
    this.sessionId = options.sessionId === undefined ? `strands-${this.actorId}` : requiredId("sessionId", options.sessionId);
    this.searchMode = options.searchMode ?? "hybrid";
  }

  /** The actor's memories best first for `query` (`maxSearchResults` of the options, else the
   * store's, else the API's default of 10); each entry's metadata holds the memory's `id`,
   * `score`, `type`, `created_at` and its own metadata. */
  async search(query: string, options?: SearchOptions): Promise<MemoryEntry[]> {
    const limit = options?.maxSearchResults ?? this.maxSearchResults;
    const found = await this.store.search(query, {
      mode: this.searchMode,
      actorId: this.actorId,
      ...(limit === undefined ? {} : { limit }),
    });
    return found.memories.map((memory) => ({
      content: memory.text,
      metadata: {
        id: memory.id,
        score: memory.score ?? null,
        type: memory.type,
        created_at: memory.created_at,
        ...((memory.metadata ?? {}) as Record<string, JSONValue>),
      },
    }));
  }

  /** Keep `content` as a memory of the actor (`metadata` as the memory's); the kept memory (the
   * one it duplicates, `duplicate` true, when the actor has it). */
  async add(content: string, metadata?: Record<string, JSONValue>): Promise<Schemas["MemoryView"]> {
    return this.store.addMemory(content, {
      actorId: this.actorId,
      ...(metadata && Object.keys(metadata).length > 0 ? { metadata } : {}),
    });
  }

  /**
   * Add `messages` to the actor's session, in batches of 100, each with an idempotency key made
   * of this store's run id and the messages' sequence numbers. A batch whose sending failed (an
   * error, a time-out: it may or may not have been kept) and that comes again with the same
   * numbers and messages goes under the same key, so it is kept once, also when it comes back
   * with the messages that followed it. Numbers this store already saw acknowledged belong to a
   * new run (Strands numbers each agent run from 0, and one store may serve several agents in
   * turn), as do numbers that come back with other messages: a new run id, so they are kept.
   * Without sequence numbers each call is its own write (the client's retries still send one key).
   */
  async addMessages(messages: MessageData[], context?: AddMessagesContext): Promise<void> {
    const events = messages.map(messageEvent);
    const numbers = context?.sequenceNumbers;
    const write = (batch: EventIn[], idempotencyKey?: string) =>
      this.store.addEvents(this.sessionId, batch, { actorId: this.actorId, ...(idempotencyKey === undefined ? {} : { idempotencyKey }) });
    if (events.length === 0) return;
    if (numbers === undefined || numbers.length !== events.length || new Set(numbers).size !== numbers.length) {
      for (const batch of batches(events)) await write(batch);
      return;
    }
    const pairs: [number, string][] = await Promise.all(
      events.map(async (event, i): Promise<[number, string]> => [numbers[i] as number, await digest(event)]),
    );
    const unsure = new Map(this.#unsure.flatMap(([, group]) => group));
    if (pairs.some(([n, d]) => this.#acknowledged.has(n) || (unsure.get(n) ?? d) !== d)) {
      this.#run = crypto.randomUUID();
      this.#acknowledged = new Set();
      this.#unsure = [];
    }
    // Every write of this call stays unsure until the call has succeeded whole: Strands sends
    // a failed call's messages again (with the ones after them), and a write of it that was
    // kept must then go under its own key again, or it would be kept twice.
    const written: [string, [number, string][]][] = [];
    for (const [key, at] of this.#plan(pairs)) {
      const group = at.map((i) => pairs[i] as [number, string]);
      try {
        await write(at.map((i) => events[i] as EventIn), key);
      } catch (error) {
        const pending = new Set([key, ...written.map(([k]) => k)]);
        this.#unsure = [...this.#unsure.filter(([k]) => !pending.has(k)), ...written, [key, group]];
        throw error;
      }
      written.push([key, group]);
    }
    for (const [, group] of written) for (const [n] of group) this.#acknowledged.add(n);
    const done = new Set(written.map(([k]) => k));
    this.#unsure = this.#unsure.filter(([k]) => !done.has(k));
  }

  /** The writes of a batch, in order: each earlier batch whose sending failed and whose messages
   * are all here again, under its own key (Strands sends a failed batch again with the messages
   * that came after it), then the rest in batches of 100 under new keys. */
  #plan(pairs: [number, string][]): [string, number[]][] {
    const where = new Map(pairs.map(([n], i) => [n, i]));
    const plan: [string, number[]][] = [];
    const taken = new Set<number>();
    for (const [key, group] of this.#unsure) {
      if (group.every(([n]) => where.has(n))) {
        const at = group.map(([n]) => where.get(n) as number);
        plan.push([key, at]);
        for (const i of at) taken.add(i);
      }
    }
    const rest = pairs.map((_, i) => i).filter((i) => !taken.has(i));
    for (let start = 0; start < rest.length; start += MAX_EVENTS_PER_CALL) {
      const at = rest.slice(start, start + MAX_EVENTS_PER_CALL);
      const first = (pairs[at[0] as number] as [number, string])[0];
      const last = (pairs[at[at.length - 1] as number] as [number, string])[0];
      plan.push([`strands:${this.#run}:${first}-${last}:${at.length}`, at]);
    }
    return plan.sort((a, b) => Math.min(...a[1]) - Math.min(...b[1]));
  }
}
