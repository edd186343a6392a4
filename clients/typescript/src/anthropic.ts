/**
 * `@kividb/memory/anthropic`: Claude's memory tool (`memory_20250818`, the Messages API's
 * client-side tool; `@anthropic-ai/sdk` 1.x and its memory tool helper `betaMemoryTool`, an
 * optional peer dependency) on a KiviDB store's keyed memories under a namespace the caller
 * gives (docs/integrations.md, "TypeScript: Claude's memory tool").
 *
 * The model sees a tree of text files under `/memories`; each file is one keyed memory, its path
 * below `/memories` the key (`/memories/notes/ann.md` is key `notes/ann.md`) and its text the
 * value's `content`. Directories are the keys' `/`-separated prefixes: one exists while a file
 * is under it. What maps to what:
 *
 * | memory tool                              | KiviDB                                                       |
 * |------------------------------------------|--------------------------------------------------------------|
 * | a file `/memories/<path>`                | the keyed memory `<path>` under `namespace`, value `{content}` |
 * | `view` of a file (`view_range`)          | `GET`, lines numbered as the SDK's reference implementation  |
 * | `view` of a directory                    | the keys under it, two levels deep, each with its size in bytes (UTF-8) |
 * | `create`                                 | `PUT` (refused when the file exists, as the reference does)  |
 * | `str_replace`, `insert`                  | `GET`, then `PUT` of the edited text                         |
 * | `delete` of a file or directory          | `DELETE` of each key                                         |
 * | `rename` of a file or directory          | `PUT` under each new key, then `DELETE` of the old           |
 *
 * Paths are checked as the SDK's reference implementation (`BetaLocalFilesystemMemoryTool`)
 * checks them, before anything is read or written: a path must be `/memories` or start with
 * `/memories/` ("Path must start with /memories"); `..` may not climb above it ("would escape
 * /memories directory"). Beyond the reference, which a filesystem guards, a path is refused when
 * it holds a backslash, a control character (NUL included), a bidirectional-text control,
 * a byte-order mark, a lone surrogate, or a name that Unicode compatibility folding
 * (NFKC) turns into `.`, `..` or one holding `/` (fullwidth `．．`, `／`); a path is taken in NFC,
 * so composed and decomposed accents name one file.
 *
 * What does not map: a file is at most 64 KB of JSON (about 60,000 characters of text) and a path
 * at most 1,024 characters (the API's limits for keyed memories: its `ValidationError`); empty
 * directories do not exist (a directory is there while it holds a file); a directory's size is
 * the sum of its files' sizes, not a filesystem block size; an edit or rename is several calls,
 * not one atomic step, so two agents editing one file at once may lose one edit (the last `PUT`
 * wins); a directory holds at most 11,000 files (the search's paging). Every write is a `PUT`
 * or `DELETE` of one key, which the client may send again safely (the same call twice leaves the
 * same state); the tool runner itself never runs a tool call twice.
 */

import { betaMemoryTool, type MemoryToolHandlers } from "@anthropic-ai/sdk/helpers/beta/memory";
import type {
  BetaMemoryTool20250818CreateCommand,
  BetaMemoryTool20250818DeleteCommand,
  BetaMemoryTool20250818InsertCommand,
  BetaMemoryTool20250818RenameCommand,
  BetaMemoryTool20250818StrReplaceCommand,
  BetaMemoryTool20250818ViewCommand,
} from "@anthropic-ai/sdk/resources/beta";

import type { StoreClient } from "./client.js";
import { NotFoundError } from "./errors.js";

const ROOT = "/memories";
/** The keys one search page gives, and the last offset the API takes. */
const PAGE = 1000;
const LAST_OFFSET = 10_000;
/** The reference's line-number width (`String(999999).length`). */
const NUMBER_WIDTH = 6;

// A control character, a bidirectional-text control or a byte-order mark.
const ODD = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ufeff]/u;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** The key of `path` ("" for `/memories` itself), or an `Error` in the reference's words. */
export function memoryKey(path: unknown): string {
  if (typeof path !== "string" || path.length === 0) throw new Error("Path is required and must be a string");
  if (path !== ROOT && !path.startsWith(`${ROOT}/`)) throw new Error(`Path must start with /memories, got: ${path}`);
  if (LONE_SURROGATE.test(path) || ODD.test(path) || path.includes("\\")) {
    throw new Error(`Path ${JSON.stringify(path)} holds a character a memory path may not hold (a control or bidirectional-text character, a backslash, or broken UTF-16)`);
  }
  const names: string[] = [];
  for (const raw of path.slice(ROOT.length).split("/")) {
    const name = raw.normalize("NFC");
    const folded = name.normalize("NFKC");
    if (name === "" || name === ".") continue;
    if (name === "..") {
      if (names.length === 0) throw new Error(`Path ${path} would escape /memories directory`);
      names.pop();
      continue;
    }
    if (folded === "." || folded === ".." || folded.includes("/") || folded.includes("\\")) {
      throw new Error(`Path ${path} would escape /memories directory: ${JSON.stringify(name)} reads as ${JSON.stringify(folded)}`);
    }
    names.push(name);
  }
  return names.join("/");
}

/** `bytes` as the reference shows sizes (`512B`, `1.5K`, `2M`). */
export function formatSize(bytes: number): string {
  if (bytes === 0) return "0B";
  const units = ["B", "K", "M", "G"];
  const at = Math.min(units.length - 1, Math.floor(Math.log(bytes) / Math.log(1024)));
  const size = bytes / 1024 ** at;
  return (size % 1 === 0 ? String(size) : size.toFixed(1)) + units[at];
}

function numbered(lines: string[], first: number): string {
  return lines.map((line, i) => `${String(i + first).padStart(NUMBER_WIDTH, " ")}\t${line}`).join("\n");
}

function shown(key: string): string {
  return key === "" ? ROOT : `${ROOT}/${key}`;
}

export interface KiviDBMemoryToolOptions {
  /** The store (`new MemoryClient().store(instanceId, name)`). */
  store: StoreClient;
  /** The namespace the files are kept under, e.g. `["ann", "claude-memory"]` (1 to 20 labels,
   * none empty or holding `.`). */
  namespace: string[];
  /** Whether the store embeds each file's text, so that the files can be searched by meaning
   * through the keyed search (default false: the memory tool never searches). */
  index?: boolean;
}

/** The six commands of Claude's memory tool over keyed memories (`MemoryToolHandlers`); give it
 * to the SDK with `kividbMemoryTool(options)` or `betaMemoryTool(new KiviDBMemoryTool(options))`.
 * Each command answers the text the model reads, or throws an `Error` whose message the tool
 * runner gives the model as the tool's error; the client's errors (`ApiError` kinds) likewise. */
export class KiviDBMemoryTool implements MemoryToolHandlers {
  readonly store: StoreClient;
  readonly namespace: string[];
  readonly index: boolean;

  constructor(options: KiviDBMemoryToolOptions) {
    if (!Array.isArray(options.namespace) || options.namespace.length === 0 || options.namespace.some((l) => typeof l !== "string" || l === "" || l.includes("."))) {
      throw new TypeError("namespace is one or more labels, none empty or holding '.'");
    }
    this.store = options.store;
    this.namespace = [...options.namespace];
    this.index = options.index ?? false;
  }

  /** The file's text, or undefined when no file has this key. */
  async #read(key: string): Promise<string | undefined> {
    if (key === "") return undefined;
    try {
      const view = await this.store.getKeyedMemory(this.namespace, key);
      const content = (view.value as { content?: unknown }).content;
      return typeof content === "string" ? content : JSON.stringify(view.value);
    } catch (error) {
      if (error instanceof NotFoundError && error.code === "keyed_memory_not_found") return undefined;
      throw error;
    }
  }

  async #write(key: string, content: string): Promise<void> {
    await this.store.putKeyedMemory(this.namespace, key, { content }, this.index ? { texts: [content] } : { index: false });
  }

  /** Every file under the key prefix `under` ("" for all), with its text, in key order. */
  async #files(under: string): Promise<Map<string, string>> {
    const found = new Map<string, string>();
    const wanted = JSON.stringify(this.namespace);
    for (let offset: number | null | undefined = 0; offset != null && offset <= LAST_OFFSET; ) {
      const page = await this.store.searchKeyedMemories(this.namespace, { limit: PAGE, offset });
      for (const view of page.items) {
        // the search takes deeper namespaces too: only this one's files are in the tree
        if (JSON.stringify(view.namespace) !== wanted) continue;
        if (under !== "" && !view.key.startsWith(`${under}/`)) continue;
        const content = (view.value as { content?: unknown }).content;
        found.set(view.key, typeof content === "string" ? content : JSON.stringify(view.value));
      }
      offset = page.next_offset; // a page may be cut short by bytes: follow it
    }
    return new Map([...found].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  }

  async #file(path: string): Promise<[string, string]> {
    const key = memoryKey(path);
    const content = await this.#read(key);
    if (content !== undefined) return [key, content];
    if (key === "" || (await this.#files(key)).size > 0) throw new Error(`The path ${path} is not a file.`);
    throw new Error(`The path ${path} does not exist. Please provide a valid path.`);
  }

  async view(command: BetaMemoryTool20250818ViewCommand): Promise<string> {
    const key = memoryKey(command.path);
    const content = await this.#read(key);
    if (content !== undefined) return this.#viewFile(command, content);
    const files = await this.#files(key);
    if (key !== "" && files.size === 0) throw new Error(`The path ${command.path} does not exist. Please provide a valid path.`);
    const base = shown(key);
    const sizes = new Map<string, number>();
    let total = 0;
    for (const [file, text] of files) {
      const bytes = new TextEncoder().encode(text).length;
      total += bytes;
      const names = (key === "" ? file : file.slice(key.length + 1)).split("/");
      if (names.some((name) => name.startsWith(".") || name === "node_modules")) continue; // as the reference
      for (let depth = 1; depth <= Math.min(2, names.length); depth++) {
        const entry = names.slice(0, depth).join("/") + (depth < names.length ? "/" : "");
        sizes.set(entry, (sizes.get(entry) ?? 0) + bytes);
      }
    }
    const lines = [`${formatSize(total)}\t${base}`];
    for (const entry of [...sizes.keys()].sort()) lines.push(`${formatSize(sizes.get(entry) ?? 0)}\t${base}/${entry}`);
    return `Here're the files and directories up to 2 levels deep in ${base}, excluding hidden items and node_modules:\n${lines.join("\n")}`;
  }

  #viewFile(command: BetaMemoryTool20250818ViewCommand, content: string): string {
    const lines = content.split("\n");
    let first = 1;
    let shownLines = lines;
    const range = command.view_range;
    if (range && range.length === 2) {
      const start = Math.max(1, range[0] as number) - 1;
      const end = range[1] === -1 ? lines.length : (range[1] as number);
      shownLines = lines.slice(start, end);
      first = start + 1;
    }
    return `Here's the content of ${command.path} with line numbers:\n${numbered(shownLines, first)}`;
  }

  async create(command: BetaMemoryTool20250818CreateCommand): Promise<string> {
    const key = memoryKey(command.path);
    if (key === "") throw new Error("Cannot create the /memories directory itself: give a file's path");
    if ((await this.#read(key)) !== undefined || (await this.#files(key)).size > 0) throw new Error(`File ${command.path} already exists`);
    const names = key.split("/");
    for (let depth = 1; depth < names.length; depth++) {
      const parent = names.slice(0, depth).join("/");
      if ((await this.#read(parent)) !== undefined) throw new Error(`The path ${shown(parent)} is a file, not a directory`);
    }
    await this.#write(key, command.file_text);
    return `File created successfully at: ${command.path}`;
  }

  async str_replace(command: BetaMemoryTool20250818StrReplaceCommand): Promise<string> {
    const [key, content] = await this.#file(command.path);
    const at: number[] = [];
    for (let found = content.indexOf(command.old_str); found !== -1 && command.old_str !== ""; found = content.indexOf(command.old_str, found + 1)) {
      at.push(content.slice(0, found).split("\n").length);
    }
    if (at.length === 0) throw new Error(`No replacement was performed, old_str \`${command.old_str}\` did not appear verbatim in ${command.path}.`);
    if (at.length > 1) throw new Error(`No replacement was performed. Multiple occurrences of old_str \`${command.old_str}\` in lines: ${at.join(", ")}. Please ensure it is unique`);
    const edited = content.replace(command.old_str, () => command.new_str);
    await this.#write(key, edited);
    const lines = edited.split("\n");
    const changed = (at[0] as number) - 1;
    const start = Math.max(0, changed - 2);
    const snippet = numbered(lines.slice(start, Math.min(lines.length, changed + 3)), start + 1);
    return `The memory file has been edited. Here is the snippet showing the change (with line numbers):\n${snippet}`;
  }

  async insert(command: BetaMemoryTool20250818InsertCommand): Promise<string> {
    const [key, content] = await this.#file(command.path);
    const lines = content.split("\n");
    if (!Number.isInteger(command.insert_line) || command.insert_line < 0 || command.insert_line > lines.length) {
      throw new Error(`Invalid \`insert_line\` parameter: ${command.insert_line}. It should be within the range of lines of the file: [0, ${lines.length}]`);
    }
    lines.splice(command.insert_line, 0, command.insert_text.replace(/\n$/, ""));
    await this.#write(key, lines.join("\n"));
    return `The file ${command.path} has been edited.`;
  }

  async delete(command: BetaMemoryTool20250818DeleteCommand): Promise<string> {
    const key = memoryKey(command.path);
    if (key === "") throw new Error("Cannot delete the /memories directory itself");
    const keys = (await this.#read(key)) !== undefined ? [key] : [...(await this.#files(key)).keys()];
    if (keys.length === 0) throw new Error(`The path ${command.path} does not exist`);
    for (const each of keys) await this.#forget(each);
    return `Successfully deleted ${command.path}`;
  }

  async rename(command: BetaMemoryTool20250818RenameCommand): Promise<string> {
    const from = memoryKey(command.old_path);
    const to = memoryKey(command.new_path);
    if (from === "") throw new Error("Cannot rename the /memories directory itself");
    if (to === "" || (await this.#read(to)) !== undefined || (await this.#files(to)).size > 0) {
      throw new Error(`The destination ${command.new_path} already exists`);
    }
    if (to.startsWith(`${from}/`)) throw new Error(`Cannot move ${command.old_path} into itself (${command.new_path})`);
    const file = await this.#read(from);
    const moves: [string, string][] = file !== undefined ? [[from, file]] : [...(await this.#files(from))];
    if (moves.length === 0) throw new Error(`The path ${command.old_path} does not exist`);
    // every new key is written before an old one goes: a rename cut short leaves a copy, never a loss
    for (const [key, content] of moves) await this.#write(to + key.slice(from.length), content);
    for (const [key] of moves) await this.#forget(key);
    return `Successfully renamed ${command.old_path} to ${command.new_path}`;
  }

  async #forget(key: string): Promise<void> {
    try {
      await this.store.deleteKeyedMemory(this.namespace, key);
    } catch (error) {
      if (!(error instanceof NotFoundError && error.code === "keyed_memory_not_found")) throw error;
    }
  }
}

/** The memory tool for the SDK's tool runner (`client.beta.messages.toolRunner({ tools:
 * [kividbMemoryTool({ store, namespace })], ... })`): `betaMemoryTool` over a
 * `KiviDBMemoryTool`. */
export function kividbMemoryTool(options: KiviDBMemoryToolOptions): ReturnType<typeof betaMemoryTool> {
  return betaMemoryTool(new KiviDBMemoryTool(options));
}
