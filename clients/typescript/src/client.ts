/**
 * `MemoryClient` and its `StoreClient`: the Python client's operations in camelCase
 * (docs/client.md). Options are camelCase and sent in the API's snake_case; answers are the
 * API's own shapes, typed by `schema.ts`, generated from docs/openapi.json.
 */

import type { components } from "./schema.js";
import { type Call, type CallOptions, idempotencyKey, type Query, segment, send, type Transport } from "./http.js";

export type Schemas = components["schemas"];
type Answer<Name extends keyof Schemas> = Schemas[Name];

export interface ClientOptions {
  /** The API's URL; in Node, `KIVIDB_API_URL` by default. */
  baseUrl?: string;
  /** An API key of the organization; in Node, `KIVIDB_API_KEY` by default. */
  apiKey?: string;
  /** Milliseconds one attempt may take (default 30,000). */
  timeoutMs?: number;
  /** Retries after the first attempt (default 2; see `http.ts`). */
  maxRetries?: number;
  /** The longest `Retry-After` waited for, in milliseconds (default 10,000). */
  maxRetryWaitMs?: number;
  /** The `fetch` to call (default the platform's). */
  fetch?: typeof fetch;
}

/** What every write may take besides `CallOptions`: its `Idempotency-Key` (a new random one by
 * default), the same on every retry. */
export interface WriteOptions extends CallOptions {
  idempotencyKey?: string;
}

function environment(name: string): string | undefined {
  const env = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env;
  return env?.[name] || undefined;
}

/** `camelCase` names as the API's `snake_case`; values left as they are. */
function snake(options: object): Record<string, unknown> {
  const found: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(options)) {
    if (value === undefined || name === "signal" || name === "timeoutMs" || name === "idempotencyKey") continue;
    found[name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)] = value instanceof Date ? value.toISOString() : value;
  }
  return found;
}

function callOptions(options: CallOptions | undefined): CallOptions {
  return { signal: options?.signal, timeoutMs: options?.timeoutMs };
}

function day(value: Date | string | undefined): string | undefined {
  if (value === undefined || typeof value === "string") return value;
  return value.toISOString().slice(0, 10);
}

/** The client of the API (`new MemoryClient({ baseUrl, apiKey })`). */
export class MemoryClient {
  readonly #transport: Transport;

  constructor(options: ClientOptions = {}) {
    const baseUrl = options.baseUrl ?? environment("KIVIDB_API_URL");
    const apiKey = options.apiKey ?? environment("KIVIDB_API_KEY");
    if (!baseUrl) throw new TypeError("Give baseUrl (or set KIVIDB_API_URL).");
    if (!apiKey) throw new TypeError("Give apiKey (or set KIVIDB_API_KEY).");
    this.#transport = {
      baseUrl,
      apiKey,
      timeoutMs: options.timeoutMs ?? 30_000,
      maxRetries: options.maxRetries ?? 2,
      maxRetryWaitMs: options.maxRetryWaitMs ?? 10_000,
      fetch: options.fetch ?? globalThis.fetch.bind(globalThis),
    };
  }

  /** Never shows the key. */
  toString(): string {
    return `MemoryClient(${this.#transport.baseUrl})`;
  }

  toJSON(): object {
    return { baseUrl: this.#transport.baseUrl };
  }

  /** Send `call` (for the store handles and for routes the client has no method for yet). */
  request<T>(call: Call, options?: CallOptions): Promise<T> {
    return send<T>(this.#transport, call, callOptions(options));
  }

  // --- stores ---

  /** A page of the organization's stores (with `unreachable` instances), or of one instance's:
   * at most `limit` (1,000 by default), fewer when more would pass the answer's byte budget;
   * pass the page's `next_cursor` as `cursor` for the next one. */
  async listStores(instanceId?: string, options: CallOptions & { cursor?: string; limit?: number } = {}): Promise<Answer<"OrganizationStoreList"> | Answer<"StoreList">> {
    const path = instanceId === undefined ? "/agent-memory" : `/instances/${segment("instanceId", instanceId)}/agent-memory`;
    return this.request({ method: "GET", path, query: { cursor: options.cursor, limit: options.limit }, idempotent: true }, options);
  }

  /** Create the store or change its settings (the fields of `StorePut`, snake_case as the API
   * has them; the ones not given keep their value). */
  async putStore(instanceId: string, name: string, settings: Answer<"StorePut"> = {}, options?: CallOptions): Promise<Answer<"StoreView">> {
    return this.request({ method: "PUT", path: storePrefix(instanceId, name), body: settings, idempotent: true }, options);
  }

  /** The store's settings, counts and last extraction. */
  async getStore(instanceId: string, name: string, options?: CallOptions): Promise<Answer<"StoreView">> {
    return this.request({ method: "GET", path: storePrefix(instanceId, name), idempotent: true }, options);
  }

  /** Delete the store and everything it keeps. */
  async deleteStore(instanceId: string, name: string, options?: CallOptions): Promise<void> {
    await this.request({ method: "DELETE", path: storePrefix(instanceId, name), idempotent: true }, options);
  }

  // --- keys and usage ---

  /** A new API key limited as asked (admin key only); its `api_key` is shown this once. Not
   * retried after it was sent: a retry could make a second key. */
  async createKey(access: "read" | "write", scope: { name?: string; instances?: string[]; stores?: { instance_id: string; store: string }[]; actors?: string[]; expiresAt?: string | Date } = {}, options?: CallOptions): Promise<Answer<"KeyCreated">> {
    return this.request({ method: "POST", path: "/keys", body: { access, ...snake(scope) }, idempotent: false }, options);
  }

  /** A page of the organization's keys that have not expired, oldest first, never their
   * secrets (admin key only); pass the page's `next_cursor` as `cursor` for the next one. */
  async listKeys(options: CallOptions & { cursor?: string; limit?: number } = {}): Promise<Answer<"KeyList">> {
    return this.request({ method: "GET", path: "/keys", query: { cursor: options.cursor, limit: options.limit }, idempotent: true }, options);
  }

  /** Revoke a key at once (admin key only). */
  async deleteKey(keyId: string, options?: CallOptions): Promise<void> {
    await this.request({ method: "DELETE", path: `/keys/${segment("keyId", keyId)}`, idempotent: true }, options);
  }

  /** The organization's usage by UTC day from `first` to `last` (at most 366 days; by default
   * the last 30) and what its stores hold now (admin key only). */
  async organizationUsage(first?: Date | string, last?: Date | string, options?: CallOptions): Promise<Answer<"UsageReport">> {
    return this.request({ method: "GET", path: "/usage", query: { from: day(first), to: day(last) }, idempotent: true }, options);
  }

  /** A handle on one store, sharing this client. */
  store(instanceId: string, name: string): StoreClient {
    return new StoreClient(this, instanceId, name);
  }
}

function storePrefix(instanceId: string, name: string): string {
  return `/instances/${segment("instanceId", instanceId)}/agent-memory/${segment("name", name)}`;
}

export interface RecallOptions extends CallOptions {
  query?: string;
  actorId?: string;
  limit?: number;
  queryVector?: number[];
  types?: string[];
  maxBytes?: number;
}

export interface AddMemoryOptions extends WriteOptions {
  actorId?: string;
  type?: string;
  topics?: string[];
  vector?: number[];
  metadata?: Record<string, unknown>;
  importance?: number;
  confidence?: number;
  supersedes?: string;
  occurredAt?: string | Date;
}

export interface MemoryFilters {
  includeSuperseded?: boolean;
  asOf?: string | Date;
  topics?: string[];
  metadata?: Record<string, unknown>;
  createdAfter?: string | Date;
  createdBefore?: string | Date;
  occurredAfter?: string | Date;
  occurredBefore?: string | Date;
}

export interface ListMemoriesOptions extends CallOptions, MemoryFilters {
  offset?: number;
  limit?: number;
  actorId?: string;
  type?: string;
}

export interface SearchOptions extends CallOptions, MemoryFilters {
  mode?: "semantic" | "keyword" | "hybrid";
  actorId?: string;
  types?: string[];
  limit?: number;
  queryVector?: number[];
}

/** The routes of one store (`client.store(instanceId, name)`). */
export class StoreClient {
  readonly client: MemoryClient;
  readonly instanceId: string;
  readonly name: string;
  readonly #prefix: string;

  constructor(client: MemoryClient, instanceId: string, name: string) {
    this.client = client;
    this.instanceId = instanceId;
    this.name = name;
    this.#prefix = storePrefix(instanceId, name);
  }

  #call<T>(method: Call["method"], path: string, options: CallOptions | undefined, extra: Partial<Call> = {}): Promise<T> {
    const idempotent = method !== "POST" || extra.idempotencyKey !== undefined || extra.idempotent === true;
    return this.client.request<T>({ method, path: this.#prefix + path, idempotent, ...extra }, options);
  }

  // --- working memory ---

  /** Add a turn's events (`{role, content, name?, created_at?, item?}`) to a session. */
  async addEvents(sessionId: string, events: Answer<"EventIn">[], options: WriteOptions & { actorId?: string } = {}): Promise<Answer<"EventsResult">> {
    const body = { events, ...(options.actorId === undefined ? {} : { actor_id: options.actorId }) };
    return this.#call("POST", `/sessions/${segment("sessionId", sessionId)}/events`, options, { body, idempotencyKey: idempotencyKey(options.idempotencyKey) });
  }

  /** What an agent needs before its next model call: the session's summary and recent
   * messages, the actor's relevant memories and a ready `context`. */
  async recall(sessionId: string, options: RecallOptions = {}): Promise<Answer<"RecallView">> {
    return this.#call("POST", "/recall", options, { body: { session_id: sessionId, ...snake(options) }, idempotent: true });
  }

  async listSessions(options: CallOptions & { offset?: number; limit?: number } = {}): Promise<Answer<"SessionList">> {
    return this.#call("GET", "/sessions", options, { query: snake(options) as Query });
  }

  async getSession(sessionId: string, options: CallOptions & { recent?: number; beforeSeq?: number } = {}): Promise<Answer<"SessionView">> {
    return this.#call("GET", `/sessions/${segment("sessionId", sessionId)}`, options, { query: snake(options) as Query });
  }

  async deleteSession(sessionId: string, options?: CallOptions): Promise<void> {
    await this.#call("DELETE", `/sessions/${segment("sessionId", sessionId)}`, options);
  }

  /** Take back the session's newest message (`message` null when it keeps none). */
  async popMessage(sessionId: string, options: WriteOptions = {}): Promise<Answer<"PoppedMessage">> {
    return this.#call("POST", `/sessions/${segment("sessionId", sessionId)}/pop`, options, { idempotencyKey: idempotencyKey(options.idempotencyKey) });
  }

  /** Queue the session's extraction now. */
  async extract(sessionId: string, options: WriteOptions = {}): Promise<Answer<"ExtractionQueued">> {
    return this.#call("POST", `/sessions/${segment("sessionId", sessionId)}/extract`, options, { idempotencyKey: idempotencyKey(options.idempotencyKey) });
  }

  // --- long-term memory ---

  /** Keep a memory, or answer the one it duplicates (`duplicate` true). */
  async addMemory(text: string, options: AddMemoryOptions = {}): Promise<Answer<"MemoryView">> {
    return this.#call("POST", "/memories", options, { body: { text, ...snake(options) }, idempotencyKey: idempotencyKey(options.idempotencyKey) });
  }

  async listMemories(options: ListMemoriesOptions = {}): Promise<Answer<"MemoryList">> {
    const { topics, metadata, ...rest } = options;
    const query = snake(rest) as Query;
    if (topics !== undefined) {
      if (topics.some((t) => t.includes(","))) throw new TypeError("topics must not hold commas here");
      query.topics = topics.join(",");
    }
    if (metadata !== undefined) query.metadata = JSON.stringify(metadata);
    return this.#call("GET", "/memories", options, { query });
  }

  async getMemory(memoryId: string, options?: CallOptions): Promise<Answer<"MemoryView">> {
    return this.#call("GET", `/memories/${segment("memoryId", memoryId)}`, options);
  }

  /** Change a memory (only the fields given), keeping its previous state as a version. */
  async updateMemory(memoryId: string, patch: Answer<"MemoryPatch">, options: WriteOptions = {}): Promise<Answer<"MemoryView">> {
    return this.#call("PATCH", `/memories/${segment("memoryId", memoryId)}`, options, { body: patch, idempotencyKey: idempotencyKey(options.idempotencyKey) });
  }

  async deleteMemory(memoryId: string, options?: CallOptions): Promise<void> {
    await this.#call("DELETE", `/memories/${segment("memoryId", memoryId)}`, options);
  }

  /** Memories best first for `query`: by meaning, keyword or both (`mode`, hybrid by
   * default); `queryVector` searches by a vector of your own (the query still says what is
   * sought, for the keyword part and the logs of your app). */
  async search(query: string, options: SearchOptions = {}): Promise<Answer<"SearchResult">> {
    const body = { query, ...snake(options) };
    return this.#call("POST", "/memories/search", options, { body, idempotent: true });
  }

  /** Forget every memory of an actor. */
  async forgetActor(actorId: string, options?: CallOptions): Promise<Answer<"ActorForgotten">> {
    return this.#call("DELETE", `/actors/${segment("actorId", actorId)}/memories`, options);
  }

  // --- actors' profiles ---

  /** The actor's profile: each of the store's `profile_fields` that holds a value, with when it was set and by whom. */
  async getProfile(actorId: string, options?: CallOptions): Promise<Answer<"ProfileView">> {
    return this.#call("GET", `/actors/${segment("actorId", actorId)}/profile`, options);
  }

  /** Set the profile fields given (`null` clears one) in one step, each change kept as a version; sent with an idempotency key (a new UUID when not given), so a retry makes one version. */
  async updateProfile(actorId: string, fields: Record<string, unknown>, options: WriteOptions = {}): Promise<Answer<"ProfileView">> {
    return this.#call("PATCH", `/actors/${segment("actorId", actorId)}/profile`, options, { body: { fields }, idempotencyKey: idempotencyKey(options.idempotencyKey) });
  }

  /** The versions of one profile field of the actor, newest first. */
  async profileHistory(actorId: string, field: string, options?: CallOptions): Promise<Answer<"ProfileHistory">> {
    return this.#call("GET", `/actors/${segment("actorId", actorId)}/profile/history`, options, { query: { field } });
  }

  // --- consolidation (docs/consolidation.md) ---

  /** Queue a run that merges, corrects and retires the actor's memories (or get the one already queued or running); `ConflictError` for a store without a language model. Poll `getConsolidation` for its outcome. */
  async consolidate(actorId: string, options: WriteOptions = {}): Promise<Answer<"ConsolidationQueued">> {
    return this.#call("POST", `/actors/${segment("actorId", actorId)}/consolidate`, options, { idempotencyKey: idempotencyKey(options.idempotencyKey) });
  }

  /** A page of the store's runs, newest first, without their steps: of one actor, of one status or several. */
  async listConsolidations(options: CallOptions & { actorId?: string; status?: string | string[]; offset?: number; limit?: number } = {}): Promise<Answer<"ConsolidationList">> {
    const status = Array.isArray(options.status) ? options.status.join(",") : options.status;
    const query: Query = { actor_id: options.actorId, status, offset: options.offset, limit: options.limit };
    return this.#call("GET", "/consolidations", options, { query });
  }

  /** One run with its steps, each with the memories before and after. */
  async getConsolidation(consolidationId: string, options?: CallOptions): Promise<Answer<"Consolidation">> {
    return this.#call("GET", `/consolidations/${segment("consolidationId", consolidationId)}`, options);
  }

  /** Apply a proposed run (review mode): the steps that still hold; the others come back as `conflict` steps. `ConflictError` when none holds or the run is not proposed. */
  async applyConsolidation(consolidationId: string, options: WriteOptions = {}): Promise<Answer<"Consolidation">> {
    return this.#decide(consolidationId, "apply", options);
  }

  /** Discard a proposed run: nothing changes. `ConflictError` when it is not proposed. */
  async discardConsolidation(consolidationId: string, options: WriteOptions = {}): Promise<Answer<"Consolidation">> {
    return this.#decide(consolidationId, "discard", options);
  }

  /** Undo an applied run: the memories it replaced are current again. `ConflictError` naming its results that changed since, if any did. */
  async revertConsolidation(consolidationId: string, options: WriteOptions = {}): Promise<Answer<"Consolidation">> {
    return this.#decide(consolidationId, "revert", options);
  }

  #decide(consolidationId: string, verb: "apply" | "discard" | "revert", options: WriteOptions): Promise<Answer<"Consolidation">> {
    return this.#call("POST", `/consolidations/${segment("consolidationId", consolidationId)}/${verb}`, options, { idempotencyKey: idempotencyKey(options.idempotencyKey) });
  }

  /** Make a superseded or retired version current again: a new memory with its text and fields, superseding whatever of its chain is current. `ConflictError` when the version is current. */
  async restoreMemory(memoryId: string, options: WriteOptions = {}): Promise<Answer<"MemoryView">> {
    return this.#call("POST", `/memories/${segment("memoryId", memoryId)}/restore`, options, { idempotencyKey: idempotencyKey(options.idempotencyKey) });
  }

  // --- keyed memories ---

  async putKeyedMemory(namespace: string[], key: string, value: Record<string, unknown>, options: CallOptions & { texts?: string[]; vectors?: number[][]; index?: boolean; ttlSeconds?: number } = {}): Promise<Answer<"KeyedMemoryView">> {
    return this.#call("PUT", "/keyed-memories", options, { body: { namespace, key, value, ...snake(options) } });
  }

  async getKeyedMemory(namespace: string[], key: string, options: CallOptions & { refreshTtl?: boolean } = {}): Promise<Answer<"KeyedMemoryView">> {
    return this.#call("GET", "/keyed-memories", options, { query: { namespace: labels(namespace), key, refresh_ttl: options.refreshTtl } });
  }

  async deleteKeyedMemory(namespace: string[], key: string, options?: CallOptions): Promise<void> {
    await this.#call("DELETE", "/keyed-memories", options, { query: { namespace: labels(namespace), key } });
  }

  async searchKeyedMemories(namespacePrefix: string[] = [], options: CallOptions & { filter?: Record<string, unknown>; query?: string; queryVector?: number[]; limit?: number; offset?: number; refreshTtl?: boolean } = {}): Promise<Answer<"KeyedSearchResult">> {
    return this.#call("POST", "/keyed-memories/search", options, { body: { namespace_prefix: namespacePrefix, ...snake(options) }, idempotent: true });
  }

  async listKeyedNamespaces(options: CallOptions & { prefix?: string[]; suffix?: string[]; maxDepth?: number; limit?: number; offset?: number } = {}): Promise<Answer<"NamespaceList">> {
    return this.#call("POST", "/keyed-memories/namespaces", options, { body: snake(options), idempotent: true });
  }

  // --- export and import ---

  async exportSessionIds(options: CallOptions & { cursor?: string; limit?: number } = {}): Promise<Answer<"SessionIdPage">> {
    return this.#call("GET", "/export/sessions", options, { query: snake(options) as Query });
  }

  async exportSession(sessionId: string, options: CallOptions & { afterSeq?: number; limit?: number } = {}): Promise<Answer<"SessionExport">> {
    return this.#call("GET", `/export/sessions/${segment("sessionId", sessionId)}`, options, { query: snake(options) as Query });
  }

  /** Put a session as exported (`exportSession`'s answer may be given as it is: its
   * `session_id` and `next_after_seq`, which an import has no place for, are left out). */
  async importSession(sessionId: string, session: Answer<"SessionImport"> | Answer<"SessionExport">, options?: CallOptions): Promise<Answer<"SessionImported">> {
    const { session_id: _id, next_after_seq: _next, ...body } = session as Answer<"SessionExport">;
    return this.#call("PUT", `/import/sessions/${segment("sessionId", sessionId)}`, options, { body });
  }

  async exportMemories(options: CallOptions & { cursor?: string; limit?: number } = {}): Promise<Answer<"MemoryExportPage">> {
    return this.#call("GET", "/export/memories", options, { query: snake(options) as Query });
  }

  /** A page of the store's actors' profiles with every field's history; pass its `next_cursor` for the next one. */
  async exportProfiles(options: CallOptions & { cursor?: string; limit?: number } = {}): Promise<Answer<"ProfileExportPage">> {
    return this.#call("GET", "/export/profiles", options, { query: snake(options) as Query });
  }

  /** Write 1 to 100 exported profiles with their histories (idempotent). */
  async importProfiles(profiles: Answer<"ImportedProfile">[], options: WriteOptions = {}): Promise<Answer<"ProfileImportResult">> {
    return this.#call("POST", "/import/profiles", options, { body: { profiles }, idempotencyKey: idempotencyKey(options.idempotencyKey) });
  }

  async importMemories(memories: Answer<"ImportedMemory">[], options: WriteOptions = {}): Promise<Answer<"MemoryImportResult">> {
    return this.#call("POST", "/import/memories", options, { body: { memories }, idempotencyKey: idempotencyKey(options.idempotencyKey) });
  }

  // --- usage and webhooks ---

  async usage(first?: Date | string, last?: Date | string, options?: CallOptions): Promise<Answer<"UsageReport">> {
    return this.#call("GET", "/usage", options, { query: { from: day(first), to: day(last) } });
  }

  /** A new webhook signing secret, shown only here. Not retried after it was sent (a retry
   * would replace it unseen). */
  async rotateWebhookSecret(options?: CallOptions): Promise<Answer<"WebhookSecret">> {
    return this.#call("POST", "/webhooks/secret", options);
  }

  async webhookDeliveries(options?: CallOptions): Promise<Answer<"DeliveryList">> {
    return this.#call("GET", "/webhooks/deliveries", options);
  }
}

/** A keyed memory's namespace as the API's GET and DELETE take it: labels joined by `.`. */
function labels(namespace: string[]): string {
  if (namespace.length === 0 || namespace.some((l) => l === "" || l.includes("."))) {
    throw new TypeError("a namespace is one or more labels, none empty or holding '.'");
  }
  return namespace.join(".");
}
