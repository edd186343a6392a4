/**
 * `@kividb/memory/ai-sdk`: a KiviDB store for the Vercel AI SDK (`ai` 7, an optional peer
 * dependency, with `zod`), as docs/integrations.md ("TypeScript: Vercel AI SDK") describes.
 *
 * - `kividbMemory(options)`: a language model middleware (`wrapLanguageModel`) that puts
 *   recall's `context` in front of every model call as a system message, and adds what each
 *   model call brought to the session: the messages since the model's last answer, and its
 *   new answer.
 * - `kividbTools(options)`: `recall`, `searchMemories` and `remember` as `tool()` definitions
 *   with zod input schemas, for a model that decides itself when to look or to keep.
 */

import { tool, type LanguageModelMiddleware, type ToolSet } from "ai";
import { z } from "zod";

import type { Schemas, StoreClient } from "./client.js";
import { batches, cut, fitEvent, MAX_MEMORY_CHARS, MAX_QUERY_CHARS, requiredId } from "./events.js";

type EventIn = Schemas["EventIn"];
type CallParams = Parameters<NonNullable<LanguageModelMiddleware["transformParams"]>>[0]["params"];
type PromptMessage = CallParams["prompt"][number];
type GenerateResult = Awaited<ReturnType<NonNullable<LanguageModelMiddleware["wrapGenerate"]>>>;
type OutputPart = GenerateResult["content"][number];
type StreamPart = Awaited<ReturnType<NonNullable<LanguageModelMiddleware["wrapStream"]>>>["stream"] extends ReadableStream<infer P> ? P : never;
type Part = { type: string; [field: string]: unknown };

/** How many turns' contexts a middleware remembers for the later steps of the same turn. */
const REMEMBERED_TURNS = 64;
/** Part types that carry a file's bytes in `data` (the AI SDK's own, of this version and the
 * ones before it, which tool outputs may still use). */
const FILE_PARTS = new Set(["file", "reasoning-file", "image", "media", "image-data", "file-data"]);

export interface KiviDBMemoryOptions {
  /** The store (`new MemoryClient().store(instanceId, name)`). */
  store: StoreClient;
  /** The KiviDB session the conversation is kept in (letters, digits and `._:@-`). */
  sessionId: string;
  /** The actor whose long-term memories recall gives (else the session's actor). */
  actorId?: string;
  /** The most long-term memories recall gives (the API's default: 10). */
  limit?: number;
  /** Only memories of these types. */
  types?: string[];
  /** Add each turn to the session (default true); false only reads. */
  addTurns?: boolean;
  /** Called with an error of recall or of adding a turn instead of failing the model call;
   * left out, the error is the model call's (nothing is lost without the caller knowing). */
  onError?: (error: unknown) => void;
}

/** The text of a message's or an answer's parts: its text parts, or a tool result's output. */
function partsText(parts: readonly Part[]): string {
  const texts: string[] = [];
  for (const part of parts) {
    if (part.type === "text" && typeof part.text === "string") texts.push(part.text);
    else if (part.type === "tool-result") texts.push(outputText(part.output ?? part.result));
  }
  return texts.filter((text) => text.length > 0).join("\n");
}

/** A tool result's output as text: `{type: "text" | "error-text", value}` as its value,
 * `{type: "content", value: parts}` as its text parts, any other output (JSON) as its JSON. */
function outputText(output: unknown): string {
  if (output && typeof output === "object") {
    const { type, value } = output as { type?: unknown; value?: unknown };
    if ((type === "text" || type === "error-text") && typeof value === "string") return value;
    if (type === "json" || type === "error-json") return JSON.stringify(value ?? null);
    if (type === "content" && Array.isArray(value)) return partsText(value as Part[]);
    if (type === "execution-denied") return "(the tool's execution was denied)";
  }
  return typeof output === "string" ? output : JSON.stringify(withoutBytes(output) ?? null);
}

/** `value` as JSON without the bytes of a file, anywhere in it (a tool's output may hold
 * files): a file part's inline `data` becomes `{type: "data"}`; its media type, name, URL or
 * reference stay. Provider options and metadata are the provider's, not the conversation's. */
function withoutBytes(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutBytes);
  if (value instanceof Uint8Array) return { type: "data" };
  if (value instanceof URL) return value.href;
  if (!value || typeof value !== "object") return value;
  const kept: Record<string, unknown> = {};
  for (const [key, field] of Object.entries(value as Record<string, unknown>)) {
    if (key === "providerOptions" || key === "providerMetadata") continue;
    kept[key] = withoutBytes(field);
  }
  if (typeof kept.type === "string" && FILE_PARTS.has(kept.type) && "data" in kept) {
    const data = kept.data as { type?: unknown } | string | undefined;
    if (typeof data === "string" || (data && typeof data === "object" && (data.type === "data" || data.type === undefined))) {
      kept.data = { type: "data" };
    }
  }
  return kept;
}

/** A part as it is kept in an event's `item`: its JSON without bytes (`withoutBytes`). */
function keptPart(part: Part): Part {
  return JSON.parse(JSON.stringify(withoutBytes(part))) as Part;
}

/** The event of one message: its role, its text as `content`, and, when it holds more than
 * text (tool calls and results, files, reasoning), the message itself as `item`; within the
 * API's limits (`fitEvent`). Undefined for a message with nothing to keep. */
export function messageEvent(role: "user" | "assistant" | "tool", parts: readonly Part[]): EventIn | undefined {
  const kept = parts.filter((part) => part.preliminary !== true); // a streamed tool's interim results
  if (kept.length === 0) return undefined;
  const text = partsText(kept);
  const event: EventIn = { role };
  if (text) event.content = text;
  if (kept.some((part) => part.type !== "text")) event.item = { role, content: kept.map(keptPart) };
  return event.content === undefined && event.item === undefined ? undefined : fitEvent(event);
}

/** What the prompt brought since the model's last answer: every message after its last
 * assistant message (all of them when it has none), system messages left out, as events. */
export function promptTurn(prompt: readonly PromptMessage[]): EventIn[] {
  let start = 0;
  for (let i = prompt.length - 1; i >= 0; i--) {
    if (prompt[i]?.role === "assistant") {
      start = i + 1;
      break;
    }
  }
  const events: EventIn[] = [];
  for (const message of prompt.slice(start)) {
    if (message.role === "system") continue;
    const event = messageEvent(message.role, message.content as unknown as Part[]);
    if (event) events.push(event);
  }
  return events;
}

/** The prompt's last user message's place and text, which name the turn it belongs to. */
function turnOf(prompt: readonly PromptMessage[]): { key: string; text: string | undefined; continued: boolean } | undefined {
  for (let i = prompt.length - 1; i >= 0; i--) {
    const message = prompt[i];
    if (message?.role === "user") {
      const parts = message.content as unknown as Part[];
      const text = partsText(parts).trim() || undefined;
      const continued = prompt.slice(i + 1).some((later) => later.role !== "system");
      return { key: `${i}\u0000${JSON.stringify(parts.map(keptPart))}`, text, continued };
    }
  }
  return undefined;
}

/**
 * A middleware for `wrapLanguageModel({ model, middleware: kividbMemory({ store, sessionId,
 * actorId }) })`.
 *
 * Before each model call it recalls (`POST S/recall`, the prompt's last user message as the
 * query, cut at the API's 8,000 characters) and puts the `context` (the session's summary and
 * recent messages, the actor's relevant memories) as a system message after the prompt's own
 * system messages. The later steps of a turn (`generateText`'s tool loop: the prompt goes on
 * after its last user message) get the context of the turn's first step, so it never repeats
 * the turn the prompt already holds.
 *
 * After each model call that answered (a stream: once it ends without an error) it adds what
 * the call brought to the session: the prompt's messages after the model's last answer (the
 * user's message, or the results of the tools the model called) and the new answer (its text
 * and tool calls), in order (`POST .../events`, batches of 100, each with an idempotency key).
 * Nothing is added twice and nothing waits for a turn's end, so a turn that stops at a tool call
 * (a step limit, a tool the app runs itself) is kept as far as it went. A call that failed adds
 * nothing. Events stay within the API's limits (`fitEvent`: a longer text is cut with a marker).
 *
 * Errors: the client's (`ApiError` and its kinds, `ApiConnectionError`), thrown from the model
 * call, unless `onError` is given. The call's `abortSignal` aborts the middleware's calls too.
 */
export function kividbMemory(options: KiviDBMemoryOptions): LanguageModelMiddleware {
  const { store, onError } = options;
  const sessionId = requiredId("sessionId", options.sessionId);
  const actorId = options.actorId === undefined ? undefined : requiredId("actorId", options.actorId);
  const addTurns = options.addTurns ?? true;
  const contexts = new Map<string, string>();

  const failed = (error: unknown): void => {
    if (onError === undefined) throw error;
    onError(error);
  };

  const recall = async (params: CallParams): Promise<string> => {
    const turn = turnOf(params.prompt);
    const known = turn?.continued ? contexts.get(turn.key) : undefined;
    if (known !== undefined) return known;
    const signal = params.abortSignal;
    const recalled = await store.recall(sessionId, {
      ...(turn?.text === undefined ? {} : { query: cut(turn.text, MAX_QUERY_CHARS, false) }),
      ...(actorId === undefined ? {} : { actorId }),
      ...(options.limit === undefined ? {} : { limit: options.limit }),
      ...(options.types === undefined ? {} : { types: options.types }),
      ...signalOf(signal),
    });
    if (turn !== undefined) {
      contexts.delete(turn.key);
      contexts.set(turn.key, recalled.context);
      if (contexts.size > REMEMBERED_TURNS) contexts.delete(contexts.keys().next().value as string);
    }
    return recalled.context;
  };

  const addTurn = async (params: CallParams, answer: readonly Part[]): Promise<void> => {
    if (!addTurns) return;
    const events = promptTurn(params.prompt);
    const answered = messageEvent("assistant", answer);
    if (answered) events.push(answered);
    const signal = params.abortSignal;
    try {
      for (const batch of batches(events)) {
        await store.addEvents(sessionId, batch, { ...(actorId === undefined ? {} : { actorId }), ...signalOf(signal) });
      }
    } catch (error) {
      failed(error);
    }
  };

  return {
    specificationVersion: "v4",

    async transformParams({ params }) {
      let context: string;
      try {
        context = await recall(params);
      } catch (error) {
        failed(error);
        return params;
      }
      if (!context.trim()) return params;
      const leading = params.prompt.findIndex((message) => message.role !== "system");
      const at = leading < 0 ? params.prompt.length : leading;
      const prompt = [...params.prompt.slice(0, at), { role: "system" as const, content: context }, ...params.prompt.slice(at)];
      return { ...params, prompt };
    },

    async wrapGenerate({ doGenerate, params }) {
      const result = await doGenerate();
      await addTurn(params, answerParts(result.content));
      return result;
    },

    async wrapStream({ doStream, params }) {
      const result = await doStream();
      const texts = new Map<string, string>();
      const answer: Part[] = [];
      let broken = false;
      const watch = new TransformStream<StreamPart, StreamPart>({
        transform(part, controller) {
          const seen = part as unknown as Part;
          if (seen.type === "text-delta") {
            const id = String(seen.id);
            if (!texts.has(id)) answer.push({ type: "text", text: "", id });
            texts.set(id, (texts.get(id) ?? "") + String(seen.delta ?? ""));
          } else if (seen.type === "tool-call" || seen.type === "tool-result") {
            answer.push(seen);
          } else if (seen.type === "error") {
            broken = true;
          } else if (seen.type === "finish") {
            const reason = seen.finishReason as { unified?: unknown } | string | undefined;
            if ((typeof reason === "object" ? reason?.unified : reason) === "error") broken = true;
          }
          controller.enqueue(part);
        },
        async flush() {
          // a stream that failed is not a turn: the app sends it again, or gives up
          if (broken) return;
          const parts = answer.map((part) =>
            part.type === "text" ? { type: "text", text: texts.get(String(part.id)) ?? "" } : part,
          );
          await addTurn(params, answerParts(parts as unknown as GenerateResult["content"]));
        },
      });
      return { ...result, stream: result.stream.pipeThrough(watch) };
    },
  };
}

/** The parts of a model's answer that belong in the conversation: its text, its tool calls
 * and the results of tools the provider ran (its reasoning and sources are the model's). */
function answerParts(content: readonly OutputPart[]): Part[] {
  const parts: Part[] = [];
  for (const part of content as unknown as Part[]) {
    if (part.type === "text" && typeof part.text === "string" && part.text) parts.push({ type: "text", text: part.text });
    else if (part.type === "tool-call") {
      let input: unknown = part.input;
      if (typeof input === "string") {
        try {
          input = JSON.parse(input);
        } catch {
          // kept as the model wrote it
        }
      }
      parts.push({ type: "tool-call", toolCallId: part.toolCallId, toolName: part.toolName, input });
    } else if (part.type === "tool-result" && part.preliminary !== true) {
      parts.push({ type: "tool-result", toolCallId: part.toolCallId, toolName: part.toolName, output: { type: "json", value: part.result ?? null } });
    }
  }
  return parts;
}

export interface KiviDBToolsOptions {
  /** The store (`new MemoryClient().store(instanceId, name)`). */
  store: StoreClient;
  /** The actor whose memories the tools read and keep. */
  actorId: string;
  /** The session `recall` reads; left out, there is no `recall` tool. */
  sessionId?: string;
  /** How `searchMemories` ranks: `hybrid` (default: keywords and meaning), `semantic`, or
   * `keyword` (the only one for a store without an embedding model). */
  searchMode?: "hybrid" | "semantic" | "keyword";
  /** The most memories one search or recall gives (default 10; a call may ask for fewer). */
  limit?: number;
}

/** `{ signal }` when there is one (the client's options take no undefined signal). */
function signalOf(signal: AbortSignal | undefined): { signal?: AbortSignal } {
  return signal === undefined ? {} : { signal };
}

/** The most memories a tool call may ask for (the API's own limit of one search is higher). */
const MAX_TOOL_LIMIT = 50;

/**
 * The memory tools of one actor, for `generateText({ tools: { ...kividbTools({ store, actorId,
 * sessionId }) } })`:
 * - `recall` (only with a `sessionId`): the session's summary, recent messages and the actor's
 *   memories relevant to `query`, as recall's `context` text;
 * - `searchMemories`: the actor's memories best first for `query` (`id`, `text`, `type`,
 *   `score`, `created_at`);
 * - `remember`: keeps `text` as a memory of the actor (redacted and deduplicated as every
 *   memory is; the store embeds it, so it needs an embedding model) and answers its `id` and
 *   whether it was a `duplicate`.
 *
 * A tool's error (an `ApiError`) is thrown from its `execute`; the AI SDK gives it to the model
 * as the tool's error.
 */
export function kividbTools(options: KiviDBToolsOptions): ToolSet {
  const { store } = options;
  const actorId = requiredId("actorId", options.actorId);
  const sessionId = options.sessionId === undefined ? undefined : requiredId("sessionId", options.sessionId);
  const limit = options.limit ?? 10;
  const asked = z.number().int().min(1).max(MAX_TOOL_LIMIT).optional().describe("How many memories at most");
  const tools: ToolSet = {
    searchMemories: tool({
      description: "Search the user's long-term memories (facts, preferences, events from past conversations) for a query.",
      inputSchema: z.object({ query: z.string().min(1).max(MAX_QUERY_CHARS).describe("What to look for"), limit: asked }),
      execute: async ({ query, limit: wanted }, { abortSignal }) => {
        const found = await store.search(query, {
          actorId, mode: options.searchMode ?? "hybrid", limit: Math.min(wanted ?? limit, limit), ...signalOf(abortSignal),
        });
        return found.memories.map((memory) => ({
          id: memory.id,
          text: memory.text,
          type: memory.type,
          score: memory.score,
          created_at: memory.created_at,
        }));
      },
    }),
    remember: tool({
      description: "Keep a fact, preference or event about the user in long-term memory, in one short sentence.",
      inputSchema: z.object({
        text: z.string().min(1).max(MAX_MEMORY_CHARS).describe("The memory, one short self-contained sentence"),
        type: z.string().optional().describe("semantic (a fact or preference) or episodic (an event); semantic when left out"),
      }),
      execute: async ({ text, type }, { abortSignal }) => {
        const kept = await store.addMemory(text, { actorId, ...(type === undefined ? {} : { type }), ...signalOf(abortSignal) });
        return { id: kept.id, duplicate: Boolean((kept as { duplicate?: boolean }).duplicate) };
      },
    }),
  };
  if (sessionId !== undefined) {
    tools.recall = tool({
      description: "Recall what is known for this conversation: its summary, recent messages and the user's memories relevant to a query.",
      inputSchema: z.object({ query: z.string().min(1).max(MAX_QUERY_CHARS).optional().describe("What the memories should be about") }),
      execute: async ({ query }, { abortSignal }) => {
        const recalled = await store.recall(sessionId, { actorId, limit, ...(query === undefined ? {} : { query }), ...signalOf(abortSignal) });
        return recalled.context;
      },
    });
  }
  return tools;
}
