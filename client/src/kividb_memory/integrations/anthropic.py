"""Claude's memory tool (``memory_20250818``) on a store's keyed memories: ``KiviDBMemoryTool``
(sync, an ``anthropic`` ``BetaAbstractMemoryTool``) and ``AsyncKiviDBMemoryTool`` (async, a
``BetaAsyncAbstractMemoryTool``).

``pip install "kividb-memory[anthropic]"``. Each file below ``/memories`` is the keyed memory under
the namespace the caller gives and the file's path below ``/memories`` as its key
(``/memories/notes/todo.md`` is the key ``notes/todo.md``), its text as the value ``{"content":
text}``. Directories are not kept: a directory is there while a file below it is. The commands
answer as the SDK's reference implementation (``BetaLocalFilesystemMemoryTool``, anthropic
2.17.0) does, word for word, and refuse what it refuses with its words: a path not under
``/memories``, one whose ``..`` would leave it; this adapter refuses as well a path holding
control, format, surrogate, private-use or unassigned characters, or not in Unicode NFC (a
file system would keep two names that look the same as two files; a key would too).

What does not map: a directory holds no size of its own (``view`` shows the bytes of the files
below it, where the reference shows the directory entry's size); an empty directory does not
exist (the reference keeps one after its last file is deleted); ``create`` checks and then
writes, and ``rename`` of a directory moves its files one by one, so neither is atomic against
another writer of the same namespace; a file is at most about 64 KB (a keyed memory's value),
a namespace at most 11,000 files as listed (the API reads 1,000 a page, 10,000 deep);
symlinks and file modes have no counterpart. Files expire after the store's
``memory_ttl_seconds`` unless ``ttl_seconds`` is given. Mapping: docs/integrations.md,
"Claude's memory tool".
"""

from __future__ import annotations

import unicodedata
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from anthropic.lib.tools import BetaAbstractMemoryTool, BetaAsyncAbstractMemoryTool, ToolError
from anthropic.types.beta import (
    BetaCacheControlEphemeralParam,
    BetaMemoryTool20250818CreateCommand,
    BetaMemoryTool20250818DeleteCommand,
    BetaMemoryTool20250818InsertCommand,
    BetaMemoryTool20250818RenameCommand,
    BetaMemoryTool20250818StrReplaceCommand,
    BetaMemoryTool20250818ViewCommand,
)

from kividb_memory.async_client import AsyncStoreClient
from kividb_memory.client import StoreClient
from kividb_memory.errors import NotFoundError, ValidationError
from kividb_memory.integrations.sessions import (
    AnyStore,
    async_store_from_env,
    run_now,
    store_from_env,
)

Call = Callable[..., Awaitable[Any]]
ROOT = "/memories"
MAX_LINES = 999_999
LINE_NUMBER_WIDTH = len(str(MAX_LINES))
PAGE = 1000
_REFUSED_CATEGORIES = {"Cc", "Cf", "Cs", "Co", "Cn"}
"""Control, format (zero-width, bidi overrides), surrogate, private-use, unassigned."""


def memory_key(path: str) -> str:
    """The key of a ``/memories`` path: its part below ``/memories``, ``.`` and ``..`` resolved
    and repeated slashes dropped (``""`` for ``/memories`` itself). ``ToolError`` (the
    reference implementation's words) for a path not under ``/memories`` or that ``..`` would
    take out of it, and for one holding odd characters (see the module)."""
    if not isinstance(path, str) or not path.startswith(ROOT):
        raise ToolError(f"Path must start with /memories, got: {path}")
    rest = path[len(ROOT) :]
    if rest and not rest.startswith("/"):
        raise ToolError(f"Path must start with /memories, got: {path}")
    odd = [c for c in path if unicodedata.category(c) in _REFUSED_CATEGORIES]
    if odd or unicodedata.normalize("NFC", path) != path:
        raise ToolError(
            f"Path {path!r} holds characters a memory path may not have (control, format, "
            "surrogate, private-use or unassigned characters, or text not in Unicode NFC)"
        )
    parts: list[str] = []
    for part in rest.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                raise ToolError(f"Path {path} would escape /memories directory")
            parts.pop()
        else:
            parts.append(part)
    return "/".join(parts)


def format_size(size: int) -> str:
    """A byte count as the reference implementation shows it (``0B``, ``12B``, ``1.5K``)."""
    if size == 0:
        return "0B"
    units = ["B", "K", "M", "G"]
    i = min((size.bit_length() - 1) // 10, len(units) - 1)
    scaled = size / (1024**i)
    return f"{int(scaled)}{units[i]}" if scaled == int(scaled) else f"{scaled:.1f}{units[i]}"


def _numbered(lines: Sequence[str], first: int) -> str:
    return "\n".join(
        f"{str(i + first).rjust(LINE_NUMBER_WIDTH)}\t{line}" for i, line in enumerate(lines)
    )


def _lines_keeping_cr(content: str) -> list[str]:
    lines = content.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


class _Files:
    """The six commands over one namespace, written once for both tools: each takes ``call``
    (``AnyStore.call`` or ``call_now``) and answers the reference implementation's text."""

    def __init__(self, namespace: Sequence[str], ttl_seconds: float | None) -> None:
        if isinstance(namespace, str) or not namespace:
            raise ValueError("namespace: a tuple of 1 to 20 labels, e.g. ('claude', 'user-7')")
        self.namespace = tuple(namespace)
        self.ttl_seconds = ttl_seconds

    async def files(self, call: Call) -> dict[str, str]:
        """Every file of the namespace: key -> content."""
        found: dict[str, str] = {}
        offset = 0
        while True:
            page = await call("search_keyed_memories", self.namespace, limit=PAGE, offset=offset)
            for item in page.items:
                if tuple(item.namespace) == self.namespace:
                    found[item.key] = str(item.value.get("content", ""))
            if page.next_offset is None:  # a page may be cut short by bytes: follow it
                return found
            offset = page.next_offset

    async def read(self, call: Call, key: str) -> str | None:
        try:
            view = await call("get_keyed_memory", self.namespace, key)
        except NotFoundError as exc:
            if exc.code != "keyed_memory_not_found":
                raise
            return None
        return str(view.value.get("content", ""))

    async def write(self, call: Call, key: str, content: str) -> None:
        try:
            await call(
                "put_keyed_memory",
                self.namespace,
                key,
                {"content": content},
                index=False,
                ttl_seconds=self.ttl_seconds,
            )
        except ValidationError as exc:
            raise ToolError(f"The memory could not be kept: {exc}") from exc

    async def remove(self, call: Call, key: str) -> None:
        try:
            await call("delete_keyed_memory", self.namespace, key)
        except NotFoundError as exc:
            if exc.code != "keyed_memory_not_found":
                raise  # gone already (a retried delete) is what was asked

    async def below(self, call: Call, key: str) -> dict[str, str]:
        """The files below the directory ``key`` (every file for the root)."""
        everything = await self.files(call)
        if not key:
            return everything
        return {k: v for k, v in everything.items() if k.startswith(key + "/")}

    async def file_or_error(self, call: Call, path: str) -> tuple[str, str]:
        key = memory_key(path)
        content = await self.read(call, key) if key else None
        if content is None:
            if not key or await self.below(call, key):
                raise ToolError(f"The path {path} is not a file.")
            raise ToolError(f"The path {path} does not exist. Please provide a valid path.")
        return key, content

    async def view(self, call: Call, command: BetaMemoryTool20250818ViewCommand) -> str:
        key = memory_key(command.path)
        content = await self.read(call, key) if key else None
        if content is not None:
            return _view_file(command, content)
        children = await self.below(call, key)
        if key and not children:
            raise ToolError(f"The path {command.path} does not exist. Please provide a valid path.")
        return _view_directory(command.path, key, children)

    async def create(self, call: Call, command: BetaMemoryTool20250818CreateCommand) -> str:
        key = memory_key(command.path)
        if not key:
            raise ToolError("Cannot create a file at the /memories directory itself")
        if await self.read(call, key) is not None or await self.below(call, key):
            raise ToolError(f"File {command.path} already exists")
        parts = key.split("/")
        for i in range(1, len(parts)):
            if await self.read(call, "/".join(parts[:i])) is not None:
                raise ToolError(f"The path {ROOT}/{'/'.join(parts[:i])} is a file")
        await self.write(call, key, command.file_text)
        return f"File created successfully at: {command.path}"

    async def str_replace(
        self, call: Call, command: BetaMemoryTool20250818StrReplaceCommand
    ) -> str:
        key, content = await self.file_or_error(call, command.path)
        count = content.count(command.old_str)
        if count == 0:
            raise ToolError(
                f"No replacement was performed, old_str `{command.old_str}` did not appear "
                f"verbatim in {command.path}."
            )
        if count > 1:
            lines: list[int] = []
            start = content.find(command.old_str)
            while start != -1:
                lines.append(content[:start].count("\n") + 1)
                start = content.find(command.old_str, start + 1)
            raise ToolError(
                f"No replacement was performed. Multiple occurrences of old_str "
                f"`{command.old_str}` in lines: {', '.join(map(str, lines))}. Please ensure it "
                "is unique"
            )
        changed = content[: content.find(command.old_str)].count("\n")
        new_content = content.replace(command.old_str, command.new_str)
        await self.write(call, key, new_content)
        new_lines = new_content.split("\n")
        first = max(0, changed - 2)
        last = min(len(new_lines), changed + 3)
        return (
            "The memory file has been edited. Here is the snippet showing the change (with "
            "line numbers):\n" + _numbered(new_lines[first:last], first + 1)
        )

    async def insert(self, call: Call, command: BetaMemoryTool20250818InsertCommand) -> str:
        key, content = await self.file_or_error(call, command.path)
        lines = _lines_keeping_cr(content)
        if command.insert_line < 0 or command.insert_line > len(lines):
            raise ToolError(
                f"Invalid `insert_line` parameter: {command.insert_line}. "
                f"It should be within the range [0, {len(lines)}]."
            )
        lines.insert(command.insert_line, command.insert_text.rstrip("\n"))
        new_content = "\n".join(lines)
        if not new_content.endswith("\n"):
            new_content += "\n"
        await self.write(call, key, new_content)
        return f"The file {command.path} has been edited."

    async def delete(self, call: Call, command: BetaMemoryTool20250818DeleteCommand) -> str:
        key = memory_key(command.path)
        if not key:
            raise ToolError("Cannot delete the /memories directory itself")
        if await self.read(call, key) is not None:
            await self.remove(call, key)
        else:
            children = await self.below(call, key)
            if not children:
                raise ToolError(f"The path {command.path} does not exist")
            for child in children:
                await self.remove(call, child)
        return f"Successfully deleted {command.path}"

    async def rename(self, call: Call, command: BetaMemoryTool20250818RenameCommand) -> str:
        old, new = memory_key(command.old_path), memory_key(command.new_path)
        if not old:
            raise ToolError("Cannot rename the /memories directory itself")
        if not new or await self.read(call, new) is not None or await self.below(call, new):
            raise ToolError(f"The destination {command.new_path} already exists")
        if new.startswith(old + "/"):
            raise ToolError(f"Cannot move {command.old_path} into itself")
        content = await self.read(call, old)
        if content is not None:
            moves = {old: (new, content)}
        else:
            children = await self.below(call, old)
            if not children:
                raise ToolError(f"The path {command.old_path} does not exist")
            moves = {k: (new + k[len(old) :], v) for k, v in children.items()}
        for source, (target, text) in moves.items():
            await self.write(call, target, text)  # kept at the new path before the old goes
            await self.remove(call, source)
        return f"Successfully renamed {command.old_path} to {command.new_path}"

    async def clear(self, call: Call) -> str:
        for key in await self.files(call):
            await self.remove(call, key)
        return "All memory cleared"


def _view_file(command: BetaMemoryTool20250818ViewCommand, content: str) -> str:
    lines = content.split("\n")
    if len(lines) > MAX_LINES:
        raise ToolError(f"File {command.path} exceeds maximum line limit of 999,999 lines.")
    shown, first = lines, 1
    if command.view_range and len(command.view_range) == 2:
        start = max(1, command.view_range[0]) - 1
        end = len(lines) if command.view_range[1] == -1 else command.view_range[1]
        shown, first = lines[start:end], start + 1
    return f"Here's the content of {command.path} with line numbers:\n" + _numbered(shown, first)


def _view_directory(path: str, key: str, files: dict[str, str]) -> str:
    """Two levels below the directory, hidden names (``.x``) left out, each entry with its
    size: a file's bytes (UTF-8), a directory's files' bytes added up."""
    sizes: dict[tuple[str, ...], int] = {}
    directories: set[tuple[str, ...]] = set()
    total = 0
    for file_key, content in files.items():
        size = len(content.encode("utf-8"))
        total += size
        parts = tuple((file_key[len(key) + 1 :] if key else file_key).split("/"))
        if any(p.startswith(".") for p in parts[:2]):
            continue
        for depth in (1, 2):
            if len(parts) >= depth:
                sizes[parts[:depth]] = sizes.get(parts[:depth], 0) + size
                if len(parts) > depth:
                    directories.add(parts[:depth])
    lines = [f"{format_size(total)}\t{path}"]
    for entry in sorted(sizes):
        name = "/".join(entry) + ("/" if entry in directories else "")
        lines.append(f"{format_size(sizes[entry])}\t{path}/{name}")
    header = (
        f"Here're the files and directories up to 2 levels deep in {path}, excluding hidden items:"
    )
    return header + "\n" + "\n".join(lines)


class KiviDBMemoryTool(BetaAbstractMemoryTool):
    """Claude's memory tool for the SDK's sync tool runner, on the keyed memories under
    ``namespace`` (1 to 20 labels, none holding ``.``; e.g. ``("claude", user_id)``).
    ``store``: a ``StoreClient``, or None for one from ``KIVIDB_API_URL``, ``KIVIDB_API_KEY``,
    ``KIVIDB_INSTANCE`` and ``KIVIDB_STORE`` (an ``AsyncStoreClient`` belongs to
    ``AsyncKiviDBMemoryTool``: ``TypeError``). ``ttl_seconds``: how long a file lives after its
    last write (default the store's ``memory_ttl_seconds``). A command the reference
    implementation refuses raises its ``ToolError`` (the runner gives the model its text);
    the client's errors otherwise."""

    def __init__(
        self,
        *,
        namespace: Sequence[str],
        store: StoreClient | None = None,
        ttl_seconds: float | None = None,
        cache_control: BetaCacheControlEphemeralParam | None = None,
    ) -> None:
        super().__init__(cache_control=cache_control)
        if isinstance(store, AsyncStoreClient):
            raise TypeError("an AsyncStoreClient needs AsyncKiviDBMemoryTool")
        self._files = _Files(namespace, ttl_seconds)
        self._store = AnyStore(store if store is not None else store_from_env())

    @property
    def namespace(self) -> tuple[str, ...]:
        """The namespace whose keyed memories are the files."""
        return self._files.namespace

    def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        """A file with line numbers (``view_range`` ``[first, last]``, ``-1`` the end), or a
        directory's entries two levels deep with their sizes."""
        return run_now(self._files.view(self._store.call_now, command))

    def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        """A new file; ``ToolError`` when something is there already."""
        return run_now(self._files.create(self._store.call_now, command))

    def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        """Replace the one occurrence of ``old_str``; ``ToolError`` for none or several."""
        return run_now(self._files.str_replace(self._store.call_now, command))

    def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        """Insert a line of text after line ``insert_line`` (0: at the top)."""
        return run_now(self._files.insert(self._store.call_now, command))

    def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        """Delete a file, or a directory with everything below it."""
        return run_now(self._files.delete(self._store.call_now, command))

    def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        """Move a file or a directory; ``ToolError`` when the destination exists."""
        return run_now(self._files.rename(self._store.call_now, command))

    def clear_all_memory(self) -> str:
        """Delete every file of the namespace."""
        return run_now(self._files.clear(self._store.call_now))


class AsyncKiviDBMemoryTool(BetaAsyncAbstractMemoryTool):
    """``KiviDBMemoryTool`` for the SDK's async tool runner: ``store`` a ``StoreClient`` (its
    calls in a worker thread) or an ``AsyncStoreClient``, None for one from the environment."""

    def __init__(
        self,
        *,
        namespace: Sequence[str],
        store: StoreClient | AsyncStoreClient | None = None,
        ttl_seconds: float | None = None,
        cache_control: BetaCacheControlEphemeralParam | None = None,
    ) -> None:
        super().__init__(cache_control=cache_control)
        self._files = _Files(namespace, ttl_seconds)
        self._store = AnyStore(store if store is not None else async_store_from_env())

    @property
    def namespace(self) -> tuple[str, ...]:
        """The namespace whose keyed memories are the files."""
        return self._files.namespace

    async def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        """As ``KiviDBMemoryTool.view``."""
        return await self._files.view(self._store.call, command)

    async def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        """As ``KiviDBMemoryTool.create``."""
        return await self._files.create(self._store.call, command)

    async def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        """As ``KiviDBMemoryTool.str_replace``."""
        return await self._files.str_replace(self._store.call, command)

    async def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        """As ``KiviDBMemoryTool.insert``."""
        return await self._files.insert(self._store.call, command)

    async def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        """As ``KiviDBMemoryTool.delete``."""
        return await self._files.delete(self._store.call, command)

    async def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        """As ``KiviDBMemoryTool.rename``."""
        return await self._files.rename(self._store.call, command)

    async def clear_all_memory(self) -> str:
        """As ``KiviDBMemoryTool.clear_all_memory``."""
        return await self._files.clear(self._store.call)


__all__ = ["AsyncKiviDBMemoryTool", "KiviDBMemoryTool", "format_size", "memory_key"]
