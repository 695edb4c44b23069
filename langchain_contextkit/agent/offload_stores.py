"""Where offloaded tool results go: the store protocol and its two stores.

`NoteOffloadStore` keeps a result in any `NoteStore` (a `StoreNoteStore` over a shared
LangGraph `BaseStore` lets every process read it back) and points at a `NoteTool` read;
`WorkspaceOffloadStore` writes it atomically inside a `TerminalTool`'s root and points at
a `tail | head` command. Keys are built from the message alone, so the pointer is the
same on every call and every worker. The policy that decides what to offload is
`langchain_contextkit.agent.tool_results`.
"""

# String paths throughout, as os.path.realpath returns them:
# ruff: noqa: PTH103, PTH112, PTH117, PTH118, PTH206

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from langchain_core.runnables.config import run_in_executor

from langchain_contextkit.errors import ConfigError, NoteError, NoteNotFoundError, check_count
from langchain_contextkit.notes._fsio import read_bytes, write_atomic

if TYPE_CHECKING:
    from collections.abc import Mapping

    from langchain_core.messages import ToolMessage

    from langchain_contextkit.notes.store import NoteStore
    from langchain_contextkit.tools.terminal import TerminalTool

__all__ = [
    "DEFAULT_OFFLOAD_FOLDER",
    "HiddenSpan",
    "NoteOffloadStore",
    "OffloadStore",
    "WorkspaceOffloadStore",
    "offload_key",
]

logger = logging.getLogger(__name__)

DEFAULT_OFFLOAD_FOLDER = ".contextkit/tool_results"
"""Where `WorkspaceOffloadStore` writes, relative to its root (hidden from `ls`)."""

_SLUG = re.compile(r"[^A-Za-z0-9_-]+")
_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,90}")
_NOTE_PREFIX = "note_offload_"
_LINES = re.compile(r"[^\n]*\n|[^\n]+\Z")


# -- keys and spans ----------------------------------------------------------------------


def _slug(text: str, limit: int) -> str:
    return _SLUG.sub("_", text).strip("_-")[:limit].strip("_-")


def offload_key(message: ToolMessage, text: str) -> str:
    """The store key of a result: its tool, its call and a digest of its text.

    Derived from the message alone, so every process and every call names it alike; the
    names are reduced to ASCII letters, digits, ``_`` and ``-`` (a hostile tool name or
    call id cannot make a path or an id of another shape).

    Args:
        message: The tool message.
        text: Its text (what is stored).

    Raises:
        UnicodeEncodeError: When `text` is not valid Unicode (an unpaired surrogate).
    """
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    tool = _slug(message.name or "tool", 24) or "tool"
    call = _slug(message.tool_call_id or message.id or "", 32)
    return f"{tool}-{call}-{digest}" if call else f"{tool}-{digest}"


@dataclass(frozen=True, slots=True)
class HiddenSpan:
    """The part of a result the preview does not show."""

    start: int
    """First hidden character (an index into the text)."""
    end: int
    """One past the last hidden character."""
    first_line: int
    """Line (1-based) of the first hidden character."""
    last_line: int
    """Line (1-based) of the last hidden character."""
    lines: int
    """Lines of the whole text."""


# -- the stores --------------------------------------------------------------------------


@runtime_checkable
class OffloadStore(Protocol):
    """Where offloaded results go, and the tool call that reads them back.

    `save` must be idempotent (the same key and text again: no rewrite) and raise on
    failure; the offloader then keeps the result whole in the request.
    """

    @property
    def reader(self) -> str:
        """The name of the tool the pointer calls (it must be bound to the model)."""
        ...

    def save(self, key: str, text: str) -> None:
        """Store `text` whole under `key` (a no-op when it is already there)."""
        ...

    async def asave(self, key: str, text: str) -> None:
        """Async `save`."""
        ...

    def pointer(self, key: str, text: str, hidden: HiddenSpan) -> str:
        """The reader's arguments (JSON) and any note on them, for the pointer line."""
        ...

    def reads(self, args: Mapping[str, Any]) -> bool:
        """Tell whether a call of the reader with `args` reads an offloaded result."""
        ...


def _check_key(key: str) -> str:
    if _KEY.fullmatch(key) is None:
        msg = f"not an offload key: {key[:40]!r}"
        raise ValueError(msg)
    return key


class NoteOffloadStore:
    """Offloaded results as notes of a [`NoteStore`][langchain_contextkit.notes.NoteStore].

    Each result is a `reference` note tagged ``offload`` whose id comes from the result's
    key, so every process sharing the store (a `StoreNoteStore` over one Postgres
    `BaseStore`) finds it under the same id. A result longer than `page_chars` (or the
    store's `max_content_chars`) is split at line ends into numbered parts (``..._p1``,
    ``..._p2``, ...) that hold it whole, in order, so one read returns a page the window
    can take. Give it its own namespace or folder when a `NoteSource` feeds the same store
    into the retrieval block.

    Example:
        ```python
        from langgraph.store.memory import InMemoryStore

        from langchain_contextkit.notes import StoreNoteStore
        from langchain_contextkit.agent.offload_stores import NoteOffloadStore

        notes = StoreNoteStore(InMemoryStore(), namespace=("offload",))
        store = NoteOffloadStore(notes)
        store.save("terminal-call_1-0123456789abcdef", "whole text")
        print(notes.get("note_offload_terminal-call_1-0123456789abcdef").content)
        # whole text
        ```
    """

    def __init__(self, store: NoteStore, *, reader: str = "note", page_chars: int = 8_000) -> None:
        """Wrap a note store.

        Args:
            store: Where the notes go.
            reader: The name of the `NoteTool` over `store` bound to the model.
            page_chars: Characters one note holds at most (a read returns one page).

        Raises:
            ConfigError: When `page_chars` is below 100.
        """
        check_count("page_chars", page_chars, minimum=100)
        self.store = store
        self.page_chars = page_chars
        self._reader = reader

    @property
    def reader(self) -> str:
        """The note tool's name."""
        return self._reader

    def note_ids(self, key: str, text: str) -> list[tuple[str, str]]:
        """The notes a result is stored as: (id, content) in order."""
        base = _NOTE_PREFIX + _check_key(key)
        size = min(self.page_chars, self.store.max_content_chars)
        parts = _split(text, size)
        if len(parts) == 1:
            return [(base, text)]
        # The part size is in the id: stores configured apart never clash over a part.
        return [(f"{base}_{size}c_p{number}", part) for number, part in enumerate(parts, 1)]

    def save(self, key: str, text: str) -> None:
        """Write the result's notes that are missing or differ (see the class)."""
        for note_id, part in self.note_ids(key, text):
            try:
                if self.store.get(note_id).content == part:
                    continue
                self.store.update(note_id, content=part)
            except NoteNotFoundError:
                try:
                    self.store.create(note_id=note_id, **_note_fields(key, part))
                except NoteError:  # created meanwhile by another process?
                    if self.store.get(note_id).content != part:
                        raise

    async def asave(self, key: str, text: str) -> None:
        """Async `save`, through the store's async methods."""
        for note_id, part in self.note_ids(key, text):
            try:
                if (await self.store.aget(note_id)).content == part:
                    continue
                await self.store.aupdate(note_id, content=part)
            except NoteNotFoundError:
                try:
                    await self.store.acreate(note_id=note_id, **_note_fields(key, part))
                except NoteError:
                    if (await self.store.aget(note_id)).content != part:
                        raise

    def pointer(self, key: str, text: str, hidden: HiddenSpan) -> str:
        """A read of the note (the part holding the first hidden character)."""
        notes = self.note_ids(key, text)
        at, index = 0, 0
        for index, (_, part) in enumerate(notes):  # noqa: B007 - index used below
            if at + len(part) > hidden.start:
                break
            at += len(part)
        args = json.dumps({"action": "read", "note_id": notes[index][0]})
        if len(notes) == 1:
            return args
        return (
            f"{args} (part {index + 1} of {len(notes)}; the notes {notes[0][0]} to "
            f"{notes[-1][0]} hold the whole result in order)"
        )

    def reads(self, args: Mapping[str, Any]) -> bool:
        """A read of one of the offload notes."""
        note_id = args.get("note_id")
        return isinstance(note_id, str) and note_id.startswith(_NOTE_PREFIX)


def _note_fields(key: str, content: str) -> dict[str, Any]:
    return {
        "title": f"Offloaded tool result {key}",
        "content": content,
        "note_type": "reference",
        "tags": ("offload",),
    }


def _split(text: str, most: int) -> list[str]:
    """`text` in parts of at most `most` characters, cut after a line end when one is near."""
    parts = []
    rest = text
    while len(rest) > most:
        cut = rest.rfind("\n", most // 2, most) + 1 or most
        parts.append(rest[:cut])
        rest = rest[cut:]
    parts.append(rest)
    return parts


class WorkspaceOffloadStore:
    """Offloaded results as files in a folder inside a `TerminalTool`'s root.

    Files are written atomically (a temporary file, fsync, rename) and only inside
    `root/folder`; a folder that resolves outside the root (a symlink) is refused. The
    pointer is ``tail -n +A <file> | head -n K``: the page of at most `page_chars`
    characters that starts at the first hidden line, with a path relative to the root
    (`head` and `tail` are in `TerminalTool`'s default whitelist; plain ``cd`` goes back
    to the root). A page is at least one line: a result of very long lines is read a line
    at a time, cut by the terminal's output cap, and `grep -n` finds the rest.

    Example:
        ```python
        import tempfile
        from pathlib import Path

        from langchain_contextkit.agent.offload_stores import WorkspaceOffloadStore

        with tempfile.TemporaryDirectory() as root:
            store = WorkspaceOffloadStore(root)
            store.save("terminal-call_1-0123456789abcdef", "whole text")
            print(Path(store.path("terminal-call_1-0123456789abcdef")).read_text())
        # whole text
        ```
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        folder: str = DEFAULT_OFFLOAD_FOLDER,
        reader: str = "terminal",
        page_chars: int = 8_000,
    ) -> None:
        """Configure the folder.

        Args:
            root: The `TerminalTool`'s root (an existing directory).
            folder: Where the files go, relative to `root` (created when missing).
            reader: The terminal tool's name.
            page_chars: Characters one pointer read returns at most (keep it under the
                terminal's `max_output_chars`).

        Raises:
            ConfigError: When `root` is not a directory or `folder` leaves it.
        """
        real = os.path.realpath(os.fspath(root))
        if not os.path.isdir(real):
            msg = f"root {os.fspath(root)!r} is not a directory"
            raise ConfigError(msg)
        normal = os.path.normpath(folder)
        if os.path.isabs(normal) or normal == os.curdir or normal.split(os.sep)[0] == os.pardir:
            msg = f"folder must be a sub-folder of the root, got {folder!r}"
            raise ConfigError(msg)
        check_count("page_chars", page_chars, minimum=100)
        self.root = real
        self.folder = normal
        self.page_chars = page_chars
        self._reader = reader

    @classmethod
    def for_terminal(
        cls, tool: TerminalTool, *, folder: str = DEFAULT_OFFLOAD_FOLDER
    ) -> WorkspaceOffloadStore:
        """A store in `tool`'s root whose pointer `tool` runs and returns uncut.

        Raises:
            ConfigError: When `tool` does not allow both `head` and `tail`.
        """
        missing = sorted({"head", "tail"} - set(tool.allowed_commands))
        if missing:
            msg = f"the terminal does not allow {', '.join(missing)}: the pointer needs both"
            raise ConfigError(msg)
        page = max(100, tool.max_output_chars * 4 // 5)  # room for the tool's own notes
        return cls(tool.root, folder=folder, reader=tool.name, page_chars=page)

    @property
    def reader(self) -> str:
        """The terminal tool's name."""
        return self._reader

    def relative_path(self, key: str) -> str:
        """The file of `key`, relative to the root (as the pointer names it)."""
        return f"{self.folder.replace(os.sep, '/')}/{_check_key(key)}.txt"

    def path(self, key: str) -> str:
        """The file of `key` (absolute)."""
        return os.path.join(self.root, self.folder, f"{_check_key(key)}.txt")

    def _directory(self) -> str:
        """The folder, created when missing, after checking it resolves inside the root."""
        wanted = os.path.join(self.root, self.folder)
        os.makedirs(wanted, exist_ok=True)
        if os.path.realpath(wanted) != wanted:
            msg = f"{self.folder!r} resolves outside {self.root!r} (a symlink?): not written"
            raise OSError(msg)
        return wanted

    def save(self, key: str, text: str) -> None:
        """Write the file atomically, unless it already holds exactly `text`."""
        data = text.encode("utf-8")
        directory = self._directory()
        name = f"{_check_key(key)}.txt"
        if read_bytes(directory, name) != data:
            write_atomic(directory, name, data)  # over a symlink: replaces the link itself

    async def asave(self, key: str, text: str) -> None:
        """Async `save` (in an executor: file I/O)."""
        await run_in_executor(None, self.save, key, text)

    def pointer(self, key: str, text: str, hidden: HiddenSpan) -> str:
        """The terminal command reading the page that starts at the first hidden line."""
        first = hidden.first_line
        lines = _LINES.findall(text)[first - 1 : hidden.last_line]  # as tail and head count
        count, size = 0, 0
        for line in lines:
            if count and size + len(line) > self.page_chars:
                break
            count, size = count + 1, size + len(line)
        command = f"tail -n +{first} {self.relative_path(key)} | head -n {count}"
        return (
            f"{json.dumps({'command': command})} (lines {first}-{first + count - 1}, path "
            "from the workspace root; change the numbers to read other lines)"
        )

    def reads(self, args: Mapping[str, Any]) -> bool:
        """A command that names the offload folder."""
        command = args.get("command")
        return isinstance(command, str) and self.folder.replace(os.sep, "/") in command
