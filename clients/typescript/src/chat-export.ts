/**
 * Conversations from ChatGPT's and Claude's data exports (`conversations.json`) as sessions of
 * one actor with their original times, through the session import route: the Python client's
 * `kividb_memory.chat_export` (whose docstring gives the two formats, their public references,
 * what maps and what does not) in TypeScript, reading the same files into the same sessions.
 *
 * - ChatGPT: a JSON array of `{id, title, create_time (epoch seconds), current_node, mapping}`;
 *   the conversation is the path from `current_node` back to the root of `mapping`, reversed.
 * - Claude: a JSON array of `{uuid, name, created_at (ISO 8601), chat_messages: [{uuid, sender,
 *   text, content, created_at, attachments, files}]}`.
 *
 * A conversation is the session `chatgpt-<id>` or `claude-<uuid>`; each message keeps its role,
 * time (one without takes the one before it), text, a tool's `name`, and an `item` naming its
 * source and id. Extraction is armed (`read_seq` 0) unless `extract: false` (working memory
 * only). Every conversation is checked before any is written: `ChatExportError` names the
 * first malformed one (place, id, title) and nothing is imported.
 */

import type { Schemas, StoreClient } from "./client.js";
import { cut, MAX_MESSAGE_CHARS } from "./events.js";

export type ChatSource = "chatgpt" | "claude";
type Json = Record<string, unknown>;

/** A file that is not an export of the format asked for, or its first malformed conversation. */
export class ChatExportError extends Error {
  override name = "ChatExportError";
}

export interface ChatMessage {
  role: "user" | "assistant" | "system" | "tool";
  content: string;
  createdAt: Date;
  name?: string;
  item?: Json;
}

export interface ChatConversation {
  sessionId: string;
  title: string;
  createdAt: Date;
  messages: ChatMessage[];
}

const ROLES = new Set(["user", "assistant", "system", "tool"]);
const SENDERS: Record<string, ChatMessage["role"]> = { human: "user", assistant: "assistant" };
const NOT_ID = /[^A-Za-z0-9_:@\-.]/g;
/** Messages per import call (the route's limit). */
export const IMPORT_PAGE = 200;

const isObject = (value: unknown): value is Json => typeof value === "object" && value !== null && !Array.isArray(value);
const repr = (value: unknown): string => (typeof value === "string" ? `'${value}'` : value === undefined ? "None" : JSON.stringify(value));

function epoch(value: unknown, what: string): Date {
  if (typeof value !== "number" || !Number.isFinite(value)) throw new Error(`${what} is ${repr(value)}, not a time in epoch seconds`);
  const moment = new Date(Math.round(value * 1000));
  if (Number.isNaN(moment.getTime())) throw new Error(`${what} ${repr(value)} is out of range`);
  return moment;
}

function iso(value: unknown, what: string): Date {
  if (typeof value !== "string") throw new Error(`${what} is ${repr(value)}, not an ISO 8601 time`);
  const zoned = /[zZ]|[+-]\d\d:?\d\d$/.test(value) ? value : `${value}Z`;
  const moment = new Date(zoned);
  if (!/^\d{4}-\d\d-\d\d/.test(value) || Number.isNaN(moment.getTime())) throw new Error(`${what} ${repr(value)} is not an ISO 8601 time`);
  return moment;
}

function sessionId(source: ChatSource, raw: unknown): string {
  if (typeof raw !== "string" || raw.trim() === "") throw new Error(`its id is ${repr(raw ?? "")}, not a non-empty string`);
  return `${source}-${raw.trim().replace(NOT_ID, "-")}`.slice(0, 256);
}

/** The item, or undefined when its JSON passes the API's limit. */
function fitted(item: Json): Json | undefined {
  return JSON.stringify(item).length <= MAX_MESSAGE_CHARS ? item : undefined;
}

function message(role: ChatMessage["role"], text: string, createdAt: Date, item: Json, name?: unknown): ChatMessage {
  const kept: ChatMessage = { role, content: cut(text, MAX_MESSAGE_CHARS), createdAt };
  if (typeof name === "string" && name) kept.name = name.slice(0, 128);
  const small = fitted(item);
  if (small) kept.item = small;
  return kept;
}

// --- ChatGPT ---

function gptPart(part: unknown): string {
  if (typeof part === "string") return part;
  if (!isObject(part)) return "";
  const kind = String(part.content_type ?? "part");
  if (kind.includes("image")) return "[image]";
  if (kind.includes("audio")) return typeof part.text === "string" && part.text ? part.text : "[audio]";
  return `[${kind}]`;
}

function gptText(content: Json): string {
  if (Array.isArray(content.parts)) return content.parts.map(gptPart).filter((t) => t).join("\n");
  for (const name of ["text", "result"]) if (typeof content[name] === "string") return content[name] as string;
  if (Array.isArray(content.thoughts)) return content.thoughts.filter(isObject).map((t) => String(t.content ?? "")).join("\n");
  if (typeof content.content === "string") return content.content;
  return ["user_profile", "user_instructions"].map((k) => content[k]).filter((t) => typeof t === "string" && t).join("\n");
}

function gptBranch(conversation: Json): Json[] {
  const mapping = conversation.mapping;
  if (!isObject(mapping) || Object.keys(mapping).length === 0) throw new Error("its mapping is missing or empty");
  let nodeId: unknown = conversation.current_node;
  if (nodeId === undefined || nodeId === null) {
    const leaves = Object.entries(mapping).filter(([, n]) => isObject(n) && !(Array.isArray(n.children) && n.children.length > 0));
    nodeId = leaves.length > 0 ? leaves[leaves.length - 1]?.[0] : null;
  }
  const branch: Json[] = [];
  const seen = new Set<string>();
  while (nodeId !== null && nodeId !== undefined) {
    if (typeof nodeId !== "string" || seen.has(nodeId)) throw new Error(`its message tree loops or names ${repr(nodeId)} as a node`);
    const node = Object.hasOwn(mapping, nodeId) ? mapping[nodeId] : undefined;
    if (!isObject(node)) throw new Error(`node ${repr(nodeId)} of its branch is not in its mapping`);
    seen.add(nodeId);
    branch.push(node);
    nodeId = node.parent;
  }
  return branch.reverse();
}

function gptMessage(raw: Json, previous: Date): ChatMessage | undefined {
  const author = isObject(raw.author) ? raw.author : undefined;
  const role = author?.role;
  if (typeof role !== "string" || !ROLES.has(role)) throw new Error(`message ${repr(raw.id)} has the role ${repr(role)}`);
  if (!isObject(raw.content)) throw new Error(`message ${repr(raw.id)} has no content object`);
  const text = gptText(raw.content).trim();
  if (!text) return undefined;
  const when = raw.create_time === null || raw.create_time === undefined ? previous : epoch(raw.create_time, `message ${repr(raw.id)}'s create_time`);
  const item: Json = { source: "chatgpt", id: raw.id ?? null, content_type: raw.content.content_type ?? null };
  if (raw.recipient !== undefined && raw.recipient !== null && raw.recipient !== "all") item.recipient = raw.recipient;
  return message(role as ChatMessage["role"], text, when, item, author?.name);
}

function chatgpt(conversation: Json): ChatConversation {
  const started = epoch(conversation.create_time, "its create_time");
  const messages: ChatMessage[] = [];
  for (const node of gptBranch(conversation)) {
    if (node.message === null || node.message === undefined) continue;
    if (!isObject(node.message)) throw new Error(`node ${repr(node.id)} holds ${typeof node.message}, not a message`);
    const kept = gptMessage(node.message, messages.at(-1)?.createdAt ?? started);
    if (kept) messages.push(kept);
  }
  const title = typeof conversation.title === "string" ? conversation.title : "";
  return { sessionId: sessionId("chatgpt", conversation.id || conversation.conversation_id), title, createdAt: started, messages };
}

// --- Claude ---

function claudeBlocks(blocks: unknown[]): [string[], Json[]] {
  const texts: string[] = [];
  const tools: Json[] = [];
  for (const block of blocks.filter(isObject)) {
    if (block.type === "text" && typeof block.text === "string") texts.push(block.text);
    else if (block.type === "tool_use") {
      tools.push({ type: "tool_use", name: block.name ?? null, input: block.input ?? null });
      texts.push(`[tool ${block.name}: ${JSON.stringify(block.input ?? null)}]`);
    } else if (block.type === "tool_result") {
      const said = Array.isArray(block.content) ? block.content.filter(isObject).map((b) => String(b.text ?? "")) : [];
      tools.push({ type: "tool_result", name: block.name ?? null, is_error: block.is_error ?? false });
      texts.push(`[result of ${block.name}: ${said.filter((s) => s).join(" ")}]`);
    }
  }
  return [texts, tools];
}

function claudeMessage(raw: unknown, previous: Date): ChatMessage | undefined {
  if (!isObject(raw)) throw new Error(`a message is ${typeof raw}, not an object`);
  const role = SENDERS[String(raw.sender)];
  if (role === undefined) throw new Error(`message ${repr(raw.uuid)} has the sender ${repr(raw.sender)}`);
  const [texts, tools] = Array.isArray(raw.content) ? claudeBlocks(raw.content) : [[], []];
  let text = typeof raw.text === "string" ? raw.text : "";
  if (!text || tools.length > 0) text = texts.filter((t) => t).join("\n") || text;
  const files = [...(Array.isArray(raw.attachments) ? raw.attachments : []), ...(Array.isArray(raw.files) ? raw.files : [])]
    .filter(isObject)
    .map((f) => f.file_name)
    .filter((n) => typeof n === "string" && n);
  text = [text.trim(), ...files.map((n) => `[file: ${n}]`)].join("\n").trim();
  if (!text) return undefined;
  const when = raw.created_at === null || raw.created_at === undefined ? previous : iso(raw.created_at, `message ${repr(raw.uuid)}'s created_at`);
  const item: Json = { source: "claude", id: raw.uuid ?? null };
  if (tools.length > 0) item.tools = tools;
  return message(role, text, when, item);
}

function claude(conversation: Json): ChatConversation {
  const started = iso(conversation.created_at, "its created_at");
  if (!Array.isArray(conversation.chat_messages)) throw new Error("its chat_messages is missing or not a list");
  const messages: ChatMessage[] = [];
  for (const raw of conversation.chat_messages) {
    const kept = claudeMessage(raw, messages.at(-1)?.createdAt ?? started);
    if (kept) messages.push(kept);
  }
  const title = typeof conversation.name === "string" ? conversation.name : "";
  return { sessionId: sessionId("claude", conversation.uuid), title, createdAt: started, messages };
}

// --- the file ---

function named(conversation: Json, place: number): string {
  const raw = conversation.id || conversation.conversation_id || conversation.uuid;
  return `conversation ${place} (id ${repr(raw)}, title ${repr(conversation.title || conversation.name)})`;
}

/** The conversations of an export (its text or parsed JSON), in the file's order;
 * `ChatExportError` naming the first malformed one. */
export function parseChatExport(data: unknown, source: ChatSource): ChatConversation[] {
  if (source !== "chatgpt" && source !== "claude") throw new ChatExportError(`unknown export format ${repr(source)}: chatgpt or claude`);
  let parsed = data;
  if (typeof data === "string") {
    try {
      parsed = JSON.parse(data);
    } catch (error) {
      throw new ChatExportError(`the export is not JSON: ${(error as Error).message}`);
    }
  }
  if (!Array.isArray(parsed)) throw new ChatExportError(`a ${source} conversations.json is a JSON array of conversations, not ${isObject(parsed) ? "dict" : typeof parsed}`);
  const seen = new Map<string, number>();
  return parsed.map((conversation: unknown, at: number) => {
    const place = at + 1;
    if (!isObject(conversation)) throw new ChatExportError(`conversation ${place} is ${typeof conversation}, not an object`);
    let found: ChatConversation;
    try {
      found = source === "chatgpt" ? chatgpt(conversation) : claude(conversation);
    } catch (error) {
      throw new ChatExportError(`${named(conversation, place)}: ${(error as Error).message}; nothing was imported`);
    }
    const before = seen.get(found.sessionId);
    if (before !== undefined) throw new ChatExportError(`${named(conversation, place)}: its id is also conversation ${before}'s; nothing was imported`);
    seen.set(found.sessionId, place);
    return found;
  });
}

/** The bodies of `PUT .../import/sessions/{id}` for `conversation`: its state with pages of 200
 * messages, sequence numbers from 1. */
export function sessionPages(conversation: ChatConversation, actorId: string, options: { extract: boolean; expiresAt: Date }): Schemas["SessionImport"][] {
  const count = conversation.messages.length;
  const last = Math.max(conversation.createdAt.getTime(), ...conversation.messages.map((m) => m.createdAt.getTime()));
  const state = {
    actor_id: actorId,
    message_count: count,
    created_at: new Date(Math.min(conversation.createdAt.getTime(), last)).toISOString(),
    last_event_at: new Date(last).toISOString(),
    expires_at: options.expiresAt.toISOString(),
    read_seq: options.extract ? 0 : count,
    folded_seq: 0,
    failures: 0,
  };
  const pages: Schemas["SessionImport"][] = [];
  for (let start = 0; start < count; start += IMPORT_PAGE) {
    const messages = conversation.messages.slice(start, start + IMPORT_PAGE).map((m, i) => ({
      seq: start + i + 1,
      role: m.role,
      content: m.content,
      created_at: m.createdAt.toISOString(),
      ...(m.name === undefined ? {} : { name: m.name }),
      ...(m.item === undefined ? {} : { item: m.item }),
    }));
    pages.push({ ...state, messages });
  }
  return pages;
}

export interface ImportChatOptions {
  /** The actor the conversations belong to. */
  actorId: string;
  /** Arm extraction on the sessions (default true); false keeps them as working memory only. */
  extract?: boolean;
  /** Called after each conversation. */
  onProgress?: (conversation: ChatConversation, done: number, total: number) => void;
}

/** What `importChat` did: sessions written, their messages, those new to the store, and the
 * conversations left out for having no message with text. */
export interface ChatImported {
  sessions: number;
  messages: number;
  messagesAdded: number;
  empty: string[];
}

/** Import `conversations` (from `parseChatExport`) into `store` as sessions of `actorId`
 * (idempotent: imported again, nothing is added). Each session lives the store's
 * `session_ttl_seconds` from now. Errors: the client's (`NotFoundError` for a missing store). */
export async function importChat(store: StoreClient, conversations: ChatConversation[], options: ImportChatOptions): Promise<ChatImported> {
  if (typeof options.actorId !== "string" || options.actorId === "") throw new TypeError("actorId must be a non-empty string");
  const settings = await store.client.getStore(store.instanceId, store.name);
  const expiresAt = new Date(Date.now() + settings.session_ttl_seconds * 1000);
  const done: ChatImported = { sessions: 0, messages: 0, messagesAdded: 0, empty: [] };
  for (const [at, conversation] of conversations.entries()) {
    if (conversation.messages.length === 0) {
      done.empty.push(conversation.sessionId);
    } else {
      for (const page of sessionPages(conversation, options.actorId, { extract: options.extract ?? true, expiresAt })) {
        done.messagesAdded += (await store.importSession(conversation.sessionId, page)).messages_added;
      }
      done.sessions += 1;
      done.messages += conversation.messages.length;
    }
    options.onProgress?.(conversation, at + 1, conversations.length);
  }
  return done;
}
