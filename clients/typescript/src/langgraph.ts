/**
 * `@kividb/memory/langgraph`: LangGraph.js's `BaseStore` (`@langchain/langgraph` 1.x, whose
 * store classes live in `@langchain/langgraph-checkpoint`; optional peer dependencies) on a
 * KiviDB store's keyed memories, the TypeScript twin of the Python client's `KiviDBStore`
 * (docs/integrations.md, "TypeScript: LangGraph.js").
 *
 * Each item is the keyed memory under its namespace and key (`PUT/GET/DELETE .../keyed-memories`);
 * `search` and `listNamespaces` are the API's keyed search and namespace listing, so filters,
 * paging and similarity run in the service. What maps to what:
 *
 * | LangGraph.js                                   | KiviDB                                                    |
 * |------------------------------------------------|-----------------------------------------------------------|
 * | `Item` (`namespace`, `key`, `value`)           | a keyed memory, its value kept and read back exactly      |
 * | `createdAt`, `updatedAt`                       | the memory's `created_at` (first put), `updated_at`       |
 * | `put(ns, key, null)` / `delete`                | `DELETE` (one that is not there already is gone)          |
 * | `put(..., index: false)`                       | `index: false` (kept out of searches by meaning)          |
 * | `put(..., index: ["a.b"])`                     | the texts at those paths (`texts`, or `vectors` with `index`) |
 * | `IndexConfig` (`dims`, `embeddings`, `fields`) | vectors made here, one per text at `fields`; the query's `query_vector` |
 * | no `IndexConfig`                               | the store's own embedding model embeds value and query    |
 * | `SearchItem.score`                             | the cosine similarity of the item's closest vector        |
 * | `filter` (`$eq`, `$ne`, `$gt`, `$gte`, `$lt`, `$lte`) | the API's filter, NaN and infinities rewritten (JSON has none) |
 * | `ttl` (`defaultTTL` minutes, `refreshOnRead`)  | `ttl_seconds`, `refresh_ttl` on gets and searches         |
 *
 * What does not map: namespace labels holding `.` (the API joins labels with it) or `:` (which
 * LangGraph.js refuses too): `InvalidNamespaceError`, raised before any op of the batch runs;
 * a value over 64 KB or deeper than 32 levels (the client's `ValidationError`, nothing kept);
 * one search reads at most 20,000 items under its prefix (409 `store_too_large`); `limit` is
 * at most 1,000 and `offset` 10,000; on a store without an embedding model and without
 * `index`, a query is ignored (newest first) and a put's `index: [...]` too, as LangGraph's
 * own stores ignore both without an index config. Every write is a `PUT` or `DELETE` of one
 * key, which the client may send again safely (no idempotency key is needed: the same put
 * twice leaves the same item).
 */

import {
  BaseStore,
  getTextAtPath,
  type IndexConfig,
  type Item,
  type ListNamespacesOperation,
  type Operation,
  type OperationResults,
  type PutOperation,
  type SearchItem,
  type SearchOperation,
  type GetOperation,
  validateNamespace,
} from "@langchain/langgraph-checkpoint";

import type { Schemas, StoreClient } from "./client.js";
import { NotFoundError, ValidationError } from "./errors.js";

type View = Schemas["KeyedMemoryView"];

/** LangGraph.js's TTL settings, as its Redis and Postgres stores take them. */
export interface TTLConfig {
  /** Minutes an item lives after its put (the store's `memory_ttl_seconds` without one). */
  defaultTTL?: number;
  /** Whether a get or search starts an item's time again (default true). */
  refreshOnRead?: boolean;
}

export interface KiviDBStoreOptions {
  /** The store (`new MemoryClient().store(instanceId, name)`). */
  store: StoreClient;
  /** LangGraph's `IndexConfig`: embed here with `embeddings`; `dims` must be the store's
   * `dimensions`. */
  index?: IndexConfig;
  ttl?: TTLConfig;
}

const LARGEST = Number.MAX_VALUE;

/** A filter no value can match (a NaN operand, or beyond every number). */
class Nothing extends Error {}

/** One operator of a filter as JSON can carry it: an operand that is NaN or an infinity
 * becomes the condition it means for finite numbers (`$lt: Infinity` is any number), undefined
 * for one every value meets, `Nothing` for one none does (IEEE 754: NaN is unequal and
 * unordered to all). */
function operand(op: string, value: unknown): Record<string, unknown> | undefined {
  if (typeof value !== "number" || Number.isFinite(value)) return { [op]: value };
  if (Number.isNaN(value)) {
    if (op === "$ne") return undefined;
    throw new Nothing();
  }
  const positive = value > 0;
  if ((op === "$lt" || op === "$lte") && positive) return { $lte: LARGEST };
  if ((op === "$gt" || op === "$gte") && !positive) return { $gte: -LARGEST };
  if (op === "$ne") return undefined;
  throw new Nothing();
}

/** A LangGraph `filter` as the API takes it (non-finite operands rewritten); `Nothing` when
 * no value can match it. */
export function apiFilter(conditions: Record<string, unknown> | undefined): Record<string, unknown> | undefined {
  if (!conditions || Object.keys(conditions).length === 0) return undefined;
  const out: Record<string, unknown> = {};
  for (const [path, wanted] of Object.entries(conditions)) {
    const isOps =
      wanted !== null && typeof wanted === "object" && !Array.isArray(wanted) &&
      Object.keys(wanted).length > 0 && Object.keys(wanted).every((k) => k.startsWith("$"));
    if (isOps) {
      const merged: Record<string, unknown> = {};
      for (const [op, value] of Object.entries(wanted as Record<string, unknown>)) Object.assign(merged, operand(op, value) ?? {});
      if (Object.keys(merged).length > 0) out[path] = merged;
    } else if (typeof wanted === "number" && !Number.isFinite(wanted)) {
      throw new Nothing(); // equal to NaN or an infinity: no JSON value is
    } else {
      out[path] = wanted;
    }
  }
  return Object.keys(out).length > 0 ? out : undefined;
}

function item(view: View): Item {
  return {
    namespace: view.namespace,
    key: view.key,
    value: view.value,
    createdAt: new Date(view.created_at),
    updatedAt: new Date(view.updated_at),
  };
}

function searchItem(view: View): SearchItem {
  const found: SearchItem = item(view);
  if (typeof view.similarity === "number") found.score = view.similarity;
  return found;
}

function isPut(op: Operation): op is PutOperation {
  return "value" in op && "key" in op;
}
function isGet(op: Operation): op is GetOperation {
  return "key" in op && !("value" in op);
}
function isSearch(op: Operation): op is SearchOperation {
  return "namespacePrefix" in op;
}
function isList(op: Operation): op is ListNamespacesOperation {
  return "limit" in op && !("namespacePrefix" in op) && !("key" in op);
}

function missing(error: unknown): boolean {
  return error instanceof NotFoundError && error.code === "keyed_memory_not_found";
}

/** A LangGraph.js store on a KiviDB store's keyed memories (`new KiviDBStore({ store })`).
 * Errors: `InvalidNamespaceError` before any op of a batch runs; the client's (`ApiError`
 * and its kinds, `ApiConnectionError`) for the rest. */
export class KiviDBStore extends BaseStore {
  readonly store: StoreClient;
  readonly index: IndexConfig | undefined;
  readonly ttl: TTLConfig | undefined;
  readonly #fields: string[];

  constructor(options: KiviDBStoreOptions) {
    super();
    this.store = options.store;
    this.index = options.index;
    this.ttl = options.ttl;
    this.#fields = options.index?.fields ?? ["$"];
  }

  /** Run `operations` in order, each op's result at its place (`null` for a put). */
  async batch<Op extends Operation[]>(operations: Op): Promise<OperationResults<Op>> {
    for (const op of operations) {
      if (isSearch(op)) validateNamespace(op.namespacePrefix, { allowEmpty: true, allowReservedRoot: true });
      else if (isGet(op) || isPut(op)) validateNamespace(op.namespace, { allowReservedRoot: true });
      else if (isList(op)) for (const c of op.matchConditions ?? []) validateNamespace(c.path, { allowEmpty: true, allowReservedRoot: true });
    }
    const results: unknown[] = [];
    for (const op of operations) {
      if (isPut(op)) {
        await this.#put(op);
        results.push(null); // as LangGraph.js's InMemoryStore answers a put in a batch
      }
      else if (isGet(op)) results.push(await this.#get(op));
      else if (isSearch(op)) results.push(await this.#search(op));
      else if (isList(op)) results.push(await this.#namespaces(op));
      else throw new TypeError(`unknown operation ${JSON.stringify(op)}`);
    }
    return results as OperationResults<Op>;
  }

  #refresh(): boolean {
    return this.ttl !== undefined && (this.ttl.refreshOnRead ?? true);
  }

  async #get(op: GetOperation): Promise<Item | null> {
    try {
      return item(await this.store.getKeyedMemory(op.namespace, op.key, { refreshTtl: this.#refresh() }));
    } catch (error) {
      if (missing(error)) return null;
      throw error;
    }
  }

  /** The texts of a put's value at its `index` paths, else the index config's fields. */
  #texts(op: PutOperation): string[] {
    const paths = Array.isArray(op.index) ? op.index : this.#fields;
    const value = op.value as Record<string, unknown>;
    return paths.flatMap((path) => (path === "$" ? [JSON.stringify(value)] : getTextAtPath(value, path)));
  }

  async #put(op: PutOperation): Promise<void> {
    if (op.value === null) {
      try {
        await this.store.deleteKeyedMemory(op.namespace, op.key);
      } catch (error) {
        if (!missing(error)) throw error;
      }
      return;
    }
    const options: Parameters<StoreClient["putKeyedMemory"]>[3] = {};
    if (this.ttl?.defaultTTL !== undefined) options.ttlSeconds = this.ttl.defaultTTL * 60;
    if (op.index === false) {
      options.index = false;
    } else if (this.index !== undefined) {
      const texts = this.#texts(op);
      if (texts.length === 0) options.index = false; // nothing to embed: found by filters only
      else options.vectors = await this.index.embeddings.embedDocuments(texts);
    } else if (Array.isArray(op.index)) {
      const texts = this.#texts(op); // the store's model embeds the texts at these paths
      if (texts.length === 0) options.index = false;
      else options.texts = texts;
    }
    try {
      await this.store.putKeyedMemory(op.namespace, op.key, op.value, options);
    } catch (error) {
      if (!(error instanceof ValidationError && error.code === "vector_required" && options.texts)) throw error;
      // No embedding model anywhere: LangGraph's stores ignore `index` without an index
      // config, and so does this one.
      delete options.texts;
      await this.store.putKeyedMemory(op.namespace, op.key, op.value, options);
    }
  }

  async #search(op: SearchOperation): Promise<SearchItem[]> {
    let filter: Record<string, unknown> | undefined;
    try {
      filter = apiFilter(op.filter);
    } catch (error) {
      if (error instanceof Nothing) return [];
      throw error;
    }
    const options: Parameters<StoreClient["searchKeyedMemories"]>[1] = { limit: op.limit ?? 10, offset: op.offset ?? 0 };
    if (filter !== undefined) options.filter = filter;
    if (op.query && this.index !== undefined) options.queryVector = await this.index.embeddings.embedQuery(op.query);
    else if (op.query) options.query = op.query;
    if (this.#refresh()) options.refreshTtl = true;
    let found: Schemas["KeyedSearchResult"];
    try {
      found = await this.store.searchKeyedMemories(op.namespacePrefix, options);
    } catch (error) {
      if (!(error instanceof ValidationError && error.code === "vector_required" && options.query)) throw error;
      // No embedding model anywhere: a query is ignored, as LangGraph's stores ignore it
      // without an index config (newest first, filters applied).
      delete options.query;
      found = await this.store.searchKeyedMemories(op.namespacePrefix, options);
    }
    return found.items.map(searchItem);
  }

  async #namespaces(op: ListNamespacesOperation): Promise<string[][]> {
    const prefix = op.matchConditions?.find((c) => c.matchType === "prefix")?.path;
    const suffix = op.matchConditions?.find((c) => c.matchType === "suffix")?.path;
    const found = await this.store.listKeyedNamespaces({
      ...(prefix && prefix.length > 0 ? { prefix } : {}),
      ...(suffix && suffix.length > 0 ? { suffix } : {}),
      ...(op.maxDepth === undefined ? {} : { maxDepth: op.maxDepth }),
      limit: op.limit,
      offset: op.offset,
    });
    return found.namespaces;
  }
}
