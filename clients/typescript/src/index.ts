/**
 * `@kividb/memory`: the TypeScript client of the KiviDB agent memory API (docs/client.md,
 * "TypeScript"). ESM, no runtime dependency beyond the platform's `fetch` (Node 20+, browsers,
 * edge runtimes); the API's shapes are generated from docs/openapi.json (`schema.ts`).
 */

export { MemoryClient, StoreClient } from "./client.js";
export type {
  AddMemoryOptions,
  ClientOptions,
  ListMemoriesOptions,
  MemoryFilters,
  RecallOptions,
  Schemas,
  SearchOptions,
  WriteOptions,
} from "./client.js";
export * from "./errors.js";
export type { Call, CallOptions } from "./http.js";
export type { components, paths } from "./schema.js";
export { ChatExportError, importChat, parseChatExport, sessionPages } from "./chat-export.js";
export type { ChatConversation, ChatImported, ChatMessage, ChatSource, ImportChatOptions } from "./chat-export.js";
