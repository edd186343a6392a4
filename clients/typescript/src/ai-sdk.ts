/**
 * `@kividb/memory/ai-sdk`: a KiviDB store for the Vercel AI SDK (`ai` 7, an optional peer
 * dependency, with `zod`), as docs/integrations.md ("TypeScript: Vercel AI SDK") describes.
 *
 * - `kividbMemory(options)`: a language model middleware (`wrapLanguageModel`) that puts
 *   recall's `context` in front of every model call as a system message, and adds the turn to
 *   the session once the model answers without calling a tool.
 * - `kividbTools(options)`: `recall`, `searchMemories` and `remember` as `tool()` definitions
 *   with zod input schemas, for a model that decides itself when to look or to keep.
 */

import { tool, type LanguageModelMiddleware, type ToolSet } from "ai";
import { z } from "zod";

import type { Schemas, StoreClient } from "./client.js";

type EventIn = Schemas["EventIn"];
type CallParams = Parameters<NonNullable<LanguageModelMiddleware["transformParams"]>>[0]["params"];
type PromptMessage = CallParams["prompt"][number];
type GenerateResult = Awaited<ReturnType<NonNullable<LanguageModelMiddleware["wrapGenerate"]>>>;
type OutputPart = GenerateResult["content"][number];
type StreamPart = Awaited<ReturnType<NonNullable<LanguageModelMiddleware["wrapStream"]>>>["stream"] extends ReadableStream<infer P> ? P : never;
type Part = { type: string; [field: string]: unknown };

/** The API's limit of events in one `POST .../events`. */
const MAX_EVENTS_PER_CALL = 100;

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

/** A tool result's output as text: `{type: "text" | "error-text", value}` as its value, any
 * other output (JSON, content parts) as its JSON. */
function outputText(output: unknown): string {
  if (output && typeof output === "object") {
    const { type, value } = output as { type?: unknown; value?: unknown };
    if ((type === "text" || type === "error-text") && typeof value === "string") return value;
    if (type === "json" || type === "error-json") return JSON.stringify(value ?? null);
  }
  return typeof output === "string" ? output : JSON.stringify(output ?? null);
}

/** A part as it is kept in an event's `item`, as JSON: a file's inline bytes are left out
 * (`data: {type: "data"}`; its media type, name, URL or reference are kept); provider options
 * and metadata are the provider's, not the conversation's. */
function keptPart(part: Part): Part {
  const { providerOptions: _options, providerMetadata: _metadata, ...kept } = part;
  const data = kept.data as { type?: unknown } | undefined;
  if ((kept.type === "file" || kept.type === "reasoning-file") && data && typeof data === "object" && data.type === "data") {
    kept.data = { type: "data" };
  }
  return JSON.parse(JSON.stringify(kept)) as Part;
}

/** The event of one message: its role, its text as `content`, and, when it holds more than
 * text (tool calls and results, files, reasoning), the message itself as `item`. */
export function messageEvent(role: "user" | "assistant" | "tool", parts: readonly Part[]): EventIn | undefined {
  if (parts.length === 0) return undefined;
  const text = partsText(parts);
  const event: EventIn = { role };
  if (text) event.content = text;
  if (parts.some((part) => part.type !== "text")) event.item = { role, content: parts.map(keptPart) };
  return event.content === undefined && event.item === undefined ? undefined : event;
}

/** The prompt's turn so far: its last user message and every message after it (the tool
 * calls and results of earlier steps of the same turn), as events. */
export function promptTurn(prompt: readonly PromptMessage[]): EventIn[] {
  let start = -1;
  for (let i = prompt.length - 1; i >= 0; i--) {
    if (prompt[i]?.role === "user") {
      start = i;
      break;
    }
  }
  if (start < 0) return [];
  const events: EventIn[] = [];
  for (const message of prompt.slice(start)) {
    if (message.role === "system") continue;
    const event = messageEvent(message.role, message.content as unknown as Part[]);
    if (event) events.push(event);
  }
  return events;
}

/** The text of the prompt's last user message (undefined when it has none: recall then takes
 * the session's latest user message). */
function lastUserText(prompt: readonly PromptMessage[]): string | undefined {
  for (let i = prompt.length - 1; i >= 0; i--) {
    const message = prompt[i];
    if (message?.role === "user") return partsText(message.content as unknown as Part[]).trim() || undefined;
  }
  return undefined;
}

/**
 * A middleware for `wrapLanguageModel({ model, middleware: kividbMemory({ store, sessionId,
 * actorId }) })`. Before each model call it recalls (`POST S/recall` with the last user
 * message's text as the query) and puts the `context` (the session's summary and recent
 * messages, the actor's relevant memories) as a system message after the prompt's own system
 * messages. Once the model answers without calling a tool (the turn's end; with `generateText`'s
 * tool loop, after its last step), it adds the turn: the last user message, the steps' tool calls
 * and results, and the answer (`POST .../events`, batches of 100, each with an idempotency key).
 * A step that calls tools adds nothing yet, so the turn is kept whole and recall's `context`
 * never repeats what the prompt already holds. Streams are added when they end.
 *
 * Errors: the client's (`ApiError` and its kinds, `ApiConnectionError`), thrown from the model
 * call, unless `onError` is given.
 */
export function kividbMemory(options: KiviDBMemoryOptions): LanguageModelMiddleware {
  const { store, sessionId, actorId, onError } = options;
  const addTurns = options.addTurns ?? true;

  const failed = (error: unknown): void => {
    if (onError === undefined) throw error;
    onError(error);
  };

  const addTurn = async (prompt: readonly PromptMessage[], answer: readonly Part[]): Promise<void> => {
    if (!addTurns) return;
    const events = promptTurn(prompt);
    const answered = messageEvent("assistant", answer);
    if (answered) events.push(answered);
    try {
      for (let start = 0; start < events.length; start += MAX_EVENTS_PER_CALL) {
        const batch = events.slice(start, start + MAX_EVENTS_PER_CALL);
        await store.addEvents(sessionId, batch, actorId === undefined ? {} : { actorId });
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
        const query = lastUserText(params.prompt);
        const recalled = await store.recall(sessionId, {
          ...(query === undefined ? {} : { query }),
          ...(actorId === undefined ? {} : { actorId }),
          ...(options.limit === undefined ? {} : { limit: options.limit }),
          ...(options.types === undefined ? {} : { types: options.types }),
        });
        context = recalled.context;
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
      const parts = result.content as unknown as Part[];
      if (!parts.some((part: Part) => part.type === "tool-call" && part.providerExecuted !== true)) {
        await addTurn(params.prompt, answerParts(result.content));
      }
      return result;
    },

    async wrapStream({ doStream, params }) {
      const result = await doStream();
      const texts = new Map<string, string>();
      const answer: Part[] = [];
      let calledTool = false;
      const watch = new TransformStream<StreamPart, StreamPart>({
        transform(part, controller) {
          const seen = part as unknown as Part;
          if (seen.type === "text-delta") {
            const id = String(seen.id);
            if (!texts.has(id)) answer.push({ type: "text", text: "", id });
            texts.set(id, (texts.get(id) ?? "") + String(seen.delta ?? ""));
          } else if (seen.type === "tool-call") {
            if (seen.providerExecuted !== true) calledTool = true;
            answer.push(seen);
          } else if (seen.type === "tool-result") {
            answer.push(seen);
          }
          controller.enqueue(part);
        },
        async flush() {
          if (calledTool) return;
          const parts = answer.map((part) =>
            part.type === "text" ? { type: "text", text: texts.get(String(part.id)) ?? "" } : part,
          );
          await addTurn(params.prompt, answerParts(parts as unknown as GenerateResult["content"]));
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
    } else if (part.type === "tool-result") {
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
  const { store, actorId, sessionId } = options;
  const limit = options.limit ?? 10;
  const asked = z.number().int().min(1).max(MAX_TOOL_LIMIT).optional().describe("How many memories at most");
  const tools: ToolSet = {
    searchMemories: tool({
      description: "Search the user's long-term memories (facts, preferences, events from past conversations) for a query.",
      inputSchema: z.object({ query: z.string().min(1).describe("What to look for"), limit: asked }),
      execute: async ({ query, limit: wanted }) => {
        const found = await store.search(query, { actorId, mode: options.searchMode ?? "hybrid", limit: Math.min(wanted ?? limit, limit) });
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
        text: z.string().min(1).describe("The memory, one short self-contained sentence"),
        type: z.string().optional().describe("semantic (a fact or preference) or episodic (an event); semantic when left out"),
      }),
      execute: async ({ text, type }) => {
        const kept = await store.addMemory(text, { actorId, ...(type === undefined ? {} : { type }) });
        return { id: kept.id, duplicate: Boolean((kept as { duplicate?: boolean }).duplicate) };
      },
    }),
  };
  if (sessionId !== undefined) {
    tools.recall = tool({
      description: "Recall what is known for this conversation: its summary, recent messages and the user's memories relevant to a query.",
      inputSchema: z.object({ query: z.string().min(1).optional().describe("What the memories should be about") }),
      execute: async ({ query }) => {
        const recalled = await store.recall(sessionId, { actorId, limit, ...(query === undefined ? {} : { query }) });
        return recalled.context;
      },
    });
  }
  return tools;
}
