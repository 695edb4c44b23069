r"""Large tool results offloaded: stored whole, shown as head + tail + a pointer.

One tool result can take more of the window than the whole conversation around it (a man
page, a log, a search over a repository).
[`ToolResultOffloader`][langchain_contextkit.agents.offload.ToolResultOffloader] stores such a
result whole and shows the model, in the request only, its first and last lines with one
line between them that says exactly which tool call reads the rest (progressive
disclosure: the model loads what it needs, when it needs it). The history in the agent's
state is never rewritten.

Two stores ship behind the small [`OffloadStore`][langchain_contextkit.agents.offload.OffloadStore]
protocol:

- [`NoteOffloadStore`][langchain_contextkit.agents.offload.NoteOffloadStore]: any `NoteStore`
  (a `StoreNoteStore` over a shared LangGraph `BaseStore` lets every process read it
  back); the pointer is a `NoteTool` read.
- [`WorkspaceOffloadStore`][langchain_contextkit.agents.offload.WorkspaceOffloadStore]: a folder
  inside a `TerminalTool`'s root; the pointer is a `tail | head` command its default
  whitelist allows, reading one page of lines.

Everything the request shows is a function of the message alone (its tool call id, tool
name and content digest) and of the window's ledger: a caller that re-sends the whole list
each turn gets the same request, byte for byte, as one with a checkpointer.

```python
import tempfile

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from langchain_contextkit.agents.offload import (
    OffloadConfig,
    ToolResultOffloader,
    WorkspaceOffloadStore,
)

with tempfile.TemporaryDirectory() as root:
    store = WorkspaceOffloadStore(root)
    offloader = ToolResultOffloader(OffloadConfig(store=store))
    big = "\n".join(f"line {n}: " + "noise " * 8 for n in range(1, 401))
    call = {"name": "terminal", "args": {"command": "cat big.log"}, "id": "call_1"}
    messages = [
        HumanMessage("Read the log."),
        AIMessage("", tool_calls=[call]),
        ToolMessage(big, tool_call_id="call_1", name="terminal"),
    ]
    outcome = offloader.offload(messages, room=20_000, tools=["terminal"])
    shown = outcome.messages[-1].text
    print(outcome.count, len(shown) < len(big), messages[-1].text == big)
    pointer = next(line for line in shown.splitlines() if line.startswith("[offloaded"))
    print(pointer[:57])
    print(pointer[pointer.index("{") :].split(" |")[0])
# 1 True True
# [offloaded: 21922 of 23491 characters not shown (lines 15
# {"command": "tail -n +15 .contextkit/tool_results/terminal-call_1-a8da9e908dfc298a.txt
```
"""

# String paths throughout, as os.path.realpath returns them:
# ruff: noqa: PTH103, PTH105, PTH108, PTH112, PTH117, PTH118, PTH206

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import re
import secrets
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables.config import run_in_executor

from langchain_contextkit._validate import check_count
from langchain_contextkit.errors import ConfigError, NoteError, NoteNotFoundError
from langchain_contextkit.tokens import TokenCounter, count_tokens

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from langchain_core.messages import BaseMessage

    from langchain_contextkit.agents.ledger import CallLedger
    from langchain_contextkit.notes.store import NoteStore
    from langchain_contextkit.tools.terminal import TerminalTool

__all__ = [
    "DEFAULT_OFFLOAD_FOLDER",
    "DEFAULT_OFFLOAD_MIN_TOKENS",
    "DEFAULT_OFFLOAD_SHARE",
    "DEFAULT_PREVIEW_TOKENS",
    "HiddenSpan",
    "NoteOffloadStore",
    "OffloadConfig",
    "OffloadOutcome",
    "OffloadStore",
    "ToolResultOffloader",
    "WorkspaceOffloadStore",
    "offload_key",
    "with_offload_tally",
]

logger = logging.getLogger(__name__)

DEFAULT_OFFLOAD_SHARE = 0.1
"""A result over this share of the trajectory budget is offloaded.

deepagents offloads over 20,000 tokens, a tenth of a 200k window; a tenth of the room the
conversation has keeps that proportion on every window, so a tool loop of several large
steps still fits before compaction or reduction has to step in."""

DEFAULT_OFFLOAD_MIN_TOKENS = 1_000
"""The threshold never goes below this: under ~1,000 tokens (a screenful or two) a result
costs less to show than the extra call that would read it back, so a small window does
not turn every result into a pointer."""

DEFAULT_PREVIEW_TOKENS = 400
"""Head plus tail shown of an offloaded result (at most a quarter of the threshold)."""

DEFAULT_OFFLOAD_FOLDER = ".contextkit/tool_results"
"""Where `WorkspaceOffloadStore` writes, relative to its root (hidden from `ls`)."""

_MEMO_SIZE = 256  # entries per memo; each may hold a large result alive
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
        from langchain_contextkit.agents.offload import NoteOffloadStore

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

        from langchain_contextkit.agents.offload import WorkspaceOffloadStore

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
        target = os.path.join(directory, name)
        if _read_bytes(target) == data:
            return
        tmp = os.path.join(directory, f".tmp-{secrets.token_hex(8)}")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(tmp, flags | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, target)  # over a symlink: replaces the link, not its target
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise

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


def _read_bytes(path: str) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as file:
        return file.read()


# -- the policy --------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class OffloadConfig:
    """When a tool result is offloaded, where to, and how much of it stays in view.

    The threshold is ``max(min_tokens, share * trajectory budget)``: a share, so it
    scales with the window, and a floor, so a small window does not offload every result.
    The trajectory budget is the uncalibrated one, so a threshold (and every pointer)
    stays put while the calibration learns.

    Example:
        ```python
        import tempfile

        from langchain_contextkit.agents.offload import OffloadConfig, WorkspaceOffloadStore

        with tempfile.TemporaryDirectory() as root:
            config = OffloadConfig(store=WorkspaceOffloadStore(root))
            print(config.threshold(3_000), config.threshold(120_000))
        # 1000 12000
        ```
    """

    store: OffloadStore
    """Where results go, and which tool reads them back."""
    share: float = DEFAULT_OFFLOAD_SHARE
    """Share of the trajectory budget a result may take before it is offloaded."""
    min_tokens: int = DEFAULT_OFFLOAD_MIN_TOKENS
    """The threshold's floor, in tokens."""
    preview_tokens: int = DEFAULT_PREVIEW_TOKENS
    """Head plus tail shown (at most a quarter of the threshold), in tokens."""
    require_reader: bool = True
    """Offload only when the store's reader tool is bound to the model (else the pointer
    could not be followed, and the result is kept whole)."""

    def __post_init__(self) -> None:
        """Check the knobs.

        Raises:
            ConfigError: When `store` is not an `OffloadStore`, `share` is not in (0, 1],
                or a token count is not a positive integer.
        """
        store: object = self.store  # checked at run time: callers are not always typed
        if not isinstance(store, OffloadStore):
            msg = (
                f"store must be an OffloadStore (NoteOffloadStore, WorkspaceOffloadStore), "
                f"got {type(store).__name__}"
            )
            raise ConfigError(msg)
        if isinstance(self.share, bool) or not 0 < self.share <= 1:
            msg = f"share must be in (0, 1], got {self.share!r}"
            raise ConfigError(msg)
        check_count("min_tokens", self.min_tokens, minimum=1)
        check_count("preview_tokens", self.preview_tokens, minimum=1)

    def threshold(self, room: int) -> int:
        """Tokens a result may have before it is offloaded, for a trajectory budget `room`."""
        return max(self.min_tokens, int(self.share * room))


@dataclass(frozen=True, slots=True)
class OffloadOutcome:
    """The request's messages with large results replaced, and what that did."""

    messages: list[BaseMessage]
    """The view: the same list when nothing was offloaded."""
    count: int = 0
    """Results shown as head + tail + pointer."""
    saved: int = 0
    """Tokens the previews saved (the results' minus the previews')."""
    failed: int = 0
    """Results kept whole because the store refused them (logged as warnings)."""


@dataclass(frozen=True, slots=True)
class _Job:
    index: int
    key: str
    text: str
    tokens: int


class ToolResultOffloader:
    """Replace large tool results by head + tail + pointer in a request (see the module).

    Holds two bounded memos: the previews already rendered (so an unchanged message gets
    the very same view object every call) and the keys already stored (so a result is
    written once per process).
    """

    def __init__(
        self, config: OffloadConfig, *, token_counter: TokenCounter = count_tokens
    ) -> None:
        """Configure the offloader.

        Args:
            config: The policy and the store.
            token_counter: Counts a result's tokens (the ledger's counter).
        """
        self.config = config
        self.counter = token_counter
        self._lock = threading.Lock()
        self._tokens: OrderedDict[str, int] = OrderedDict()
        self._views: OrderedDict[tuple[object, ...], tuple[BaseMessage, int]] = OrderedDict()
        self._stored: OrderedDict[str, None] = OrderedDict()

    # -- planning (pure) -------------------------------------------------------------------

    def _plan(self, messages: Sequence[BaseMessage], room: int, tools: Sequence[Any]) -> list[_Job]:
        config = self.config
        if config.require_reader and config.store.reader not in _tool_names(tools):
            return []
        threshold = config.threshold(room)
        reads = _reads(messages, config.store)
        jobs = []
        for index, message in enumerate(messages):
            if not isinstance(message, ToolMessage) or message.tool_call_id in reads:
                continue
            text = message.content
            if not isinstance(text, str):
                # Blocks (images, files, text parts): their order and kinds are the
                # provider's format; rewriting some of them is not worth the risk.
                logger.debug("tool result %s has list content: not offloaded", index)
                continue
            if len(text) <= threshold // 8:  # no counter gives 8+ tokens a character
                continue
            tokens = self._count(text)
            if tokens <= threshold:
                continue
            try:
                key = offload_key(message, text)
            except UnicodeEncodeError:
                logger.warning("tool result %s is not valid Unicode: kept whole", index)
                continue
            jobs.append(_Job(index, key, text, tokens))
        return jobs

    def _count(self, text: str) -> int:
        known = self._tokens.get(text)
        if known is None:
            known = self.counter(text)
            with self._lock:
                _remember(self._tokens, text, known)
        return known

    def _preview(self, job: _Job, message: BaseMessage, room: int) -> tuple[BaseMessage, int]:
        """The view of `message` and its tokens; the same object for the same message."""
        budget = min(self.config.preview_tokens, self.config.threshold(room) // 4)
        memo = (job.key, budget, message.id, getattr(message, "status", None))
        known = self._views.get(memo)
        if known is None:
            shown, tokens = self._render(job, budget)
            known = (message.model_copy(update={"content": shown}), tokens)
            with self._lock:
                _remember(self._views, memo, known)
        return known

    def _render(self, job: _Job, budget: int) -> tuple[str, int]:
        text = job.text
        head_end = _head_end(text, budget // 2, self.counter)
        tail_start = max(head_end, _tail_start(text, budget - budget // 2, self.counter))
        hidden = _hidden(text, head_end, tail_start)
        line = (
            f"[offloaded: {hidden.end - hidden.start} of {len(text)} characters not shown "
            f"(lines {hidden.first_line}-{hidden.last_line} of {hidden.lines}); the whole "
            f"result is saved. Read the rest with the {self.config.store.reader} tool: "
            f"{self.config.store.pointer(job.key, text, hidden)}]"
        )
        head = text[:head_end]
        newline = "" if not head or head.endswith("\n") else "\n"
        shown = f"{head}{newline}{line}\n{text[tail_start:]}"
        return shown, self.counter(shown)

    def _view(
        self, messages: Sequence[BaseMessage], jobs: list[_Job], done: set[str], room: int
    ) -> OffloadOutcome:
        view = list(messages)
        count = saved = 0
        for job in jobs:
            if job.key not in done:
                continue
            view[job.index], tokens = self._preview(job, messages[job.index], room)
            count += 1
            saved += max(0, job.tokens - tokens)
        failed = len(jobs) - count
        if not count:
            return OffloadOutcome(list(messages), 0, 0, failed)
        return OffloadOutcome(view, count, saved, failed)

    def _stored_already(self, key: str) -> bool:
        return key in self._stored

    def _mark_stored(self, key: str) -> None:
        with self._lock:
            _remember(self._stored, key, None)

    # -- the entry points ------------------------------------------------------------------

    def offload(
        self, messages: Sequence[BaseMessage], *, room: int, tools: Sequence[Any] = ()
    ) -> OffloadOutcome:
        """The request's view of `messages` with every large tool result offloaded.

        Args:
            messages: The conversation (never changed).
            room: The trajectory budget the threshold is a share of.
            tools: The tools bound to the model (their names, to find the reader).

        Returns:
            The view and the tally; a result whose write failed stays whole.
        """
        jobs = self._plan(messages, room, tools)
        done: set[str] = set()
        for job in jobs:
            if self._stored_already(job.key):
                done.add(job.key)
                continue
            try:
                self.config.store.save(job.key, job.text)
            except Exception as error:  # noqa: BLE001 - never lose data: keep it whole
                _log_failure(job, error)
                continue
            self._mark_stored(job.key)
            done.add(job.key)
        return self._view(messages, jobs, done, room)

    async def aoffload(
        self, messages: Sequence[BaseMessage], *, room: int, tools: Sequence[Any] = ()
    ) -> OffloadOutcome:
        """Async `offload` (the store's `asave`)."""
        jobs = self._plan(messages, room, tools)
        done: set[str] = set()
        for job in jobs:
            if self._stored_already(job.key):
                done.add(job.key)
                continue
            try:
                await self.config.store.asave(job.key, job.text)
            except Exception as error:  # noqa: BLE001 - never lose data: keep it whole
                _log_failure(job, error)
                continue
            self._mark_stored(job.key)
            done.add(job.key)
        return self._view(messages, jobs, done, room)


def _log_failure(job: _Job, error: Exception) -> None:
    logger.warning(
        "could not offload tool result %s (%s: %s); it stays whole in the request",
        job.key,
        type(error).__name__,
        error,
    )


def _remember(memo: OrderedDict[Any, Any], key: object, value: object) -> None:
    memo[key] = value
    memo.move_to_end(key)
    while len(memo) > _MEMO_SIZE:
        memo.popitem(last=False)


def _tool_names(tools: Sequence[Any]) -> set[str]:
    names = set()
    for tool in tools:
        if isinstance(tool, str):
            names.add(tool)
        elif isinstance(tool, dict):
            function = tool.get("function")
            name = function.get("name") if isinstance(function, dict) else tool.get("name")
            if isinstance(name, str):
                names.add(name)
        elif isinstance(getattr(tool, "name", None), str):
            names.add(tool.name)
    return names


def _reads(messages: Sequence[BaseMessage], store: OffloadStore) -> set[str]:
    """Ids of the tool calls that read an offloaded result: never offloaded again."""
    ids = set()
    for message in messages:
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                if call["name"] == store.reader and call["id"] and store.reads(call["args"]):
                    ids.add(call["id"])
    return ids


def _head_end(text: str, budget: int, counter: TokenCounter) -> int:
    """End of the longest run of whole lines from the start within `budget` tokens."""
    end = 0
    used = 0
    while end < len(text):
        stop = text.find("\n", end)
        stop = len(text) if stop < 0 else stop + 1
        cost = counter(text[end:stop])
        if used + cost > budget:
            break
        used += cost
        end = stop
    if end == 0:  # one long first line: cut it by characters
        end = _chars_within(text, budget, counter, from_end=False)
    return end


def _tail_start(text: str, budget: int, counter: TokenCounter) -> int:
    """Start of the longest run of whole lines at the end within `budget` tokens."""
    start = len(text)
    used = 0
    while start > 0:
        prev = text.rfind("\n", 0, start - 1) + 1
        cost = counter(text[prev:start])
        if used + cost > budget:
            break
        used += cost
        start = prev
    if start == len(text):
        start = len(text) - _chars_within(text, budget, counter, from_end=True)
    return start


def _chars_within(text: str, budget: int, counter: TokenCounter, *, from_end: bool) -> int:
    """Characters from one end of `text` that fit `budget` tokens (binary search)."""
    low, high = 0, min(len(text), budget * 8)
    while low < high:
        middle = (low + high + 1) // 2
        piece = text[-middle:] if from_end else text[:middle]
        if counter(piece) <= budget:
            low = middle
        else:
            high = middle - 1
    return low


def _hidden(text: str, start: int, end: int) -> HiddenSpan:
    first = text.count("\n", 0, start) + 1
    last = text.count("\n", 0, max(start, end - 1)) + 1
    lines = text.count("\n") + (not text.endswith("\n"))
    return HiddenSpan(start, end, first, last, lines)


def with_offload_tally(ledger: CallLedger, outcome: OffloadOutcome | None) -> CallLedger:
    """`ledger` with the outcome's tally (unchanged when nothing was offloaded or failed)."""
    if outcome is None or not (outcome.count or outcome.failed):
        return ledger
    return dataclasses.replace(
        ledger,
        offloaded=outcome.count,
        offloaded_tokens=outcome.saved,
        offload_failed=outcome.failed,
    )
