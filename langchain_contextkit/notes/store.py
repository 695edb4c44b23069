"""`NoteStore`: the interface every note store implements, sync and async.

The public methods validate their arguments once, here, and run one of five operations
the backend writes once as a flow: a generator that yields batches of LangGraph store
operations, receives their results and returns its value. A sync driver answers them
with `batch`, an async one with `abatch`; a backend that needs no store operation (the
file store) returns `done(value)`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, TypeVar

from langchain_core.runnables.config import run_in_executor
from langgraph.store.base import Op, Result

from langchain_contextkit.errors import (
    ConfigError,
    InvalidNoteError,
    NoteLimitError,
    NoteNotFoundError,
)
from langchain_contextkit.notes.model import (
    DEFAULT_MAX_CONTENT_CHARS,
    DEFAULT_MAX_NOTES,
    Note,
    NoteHit,
    NoteInfo,
    NoteSummary,
    NoteType,
    check_content,
    check_note_id,
    check_note_type,
    check_tags,
    check_title,
    new_note_id,
    select,
    summarize,
    utc_now,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Sequence

__all__ = ["DEFAULT_RECENT", "DEFAULT_SEARCH_LIMIT", "NoteStore"]

DEFAULT_SEARCH_LIMIT = 10
"""Results `search` returns when no limit is given."""

DEFAULT_RECENT = 5
"""Latest notes `summary` lists when not told otherwise."""

_T = TypeVar("_T")
Flow = Generator[list[Op], list[Result], _T]
Revise = Callable[[Note], Note]


def done(value: _T) -> Flow[_T]:
    """A flow that needs no store operation: it returns `value` at once."""
    yield from ()
    return value


def drive(flow: Flow[_T], batch: Callable[[list[Op]], list[Result]]) -> _T:
    """Run a flow, answering each batch of operations with `batch`."""
    try:
        ops = next(flow)
        while True:
            ops = flow.send(batch(ops))
    except StopIteration as stop:
        value: _T = stop.value
        return value


async def adrive(flow: Flow[_T], abatch: Callable[[list[Op]], Awaitable[list[Result]]]) -> _T:
    """Async twin of `drive`."""
    try:
        ops = next(flow)
        while True:
            ops = flow.send(await abatch(ops))
    except StopIteration as stop:
        value: _T = stop.value
        return value


class NoteStore(ABC):
    """Where notes live: create, read, update, delete, list, search and summarise them.

    Every method validates its arguments and raises a
    [`NoteError`][langchain_contextkit.errors.NoteError] subclass whose message says what
    to change: `NoteNotFoundError` for an unknown id, `InvalidNoteError` for a malformed
    id, type, title, tag or content, `NoteLimitError` when the store is full or a content
    too long. Each method has an async twin (`acreate`, `aget`, ...).

    `list_notes` and `summary` order notes newest first. `search` ranks by BM25 relevance
    over title, tags and content (CJK text included), filters by type and tags (a note
    passes the tag filter if it has *any* of them), and breaks ties by recency; a query
    with no searchable word lists the newest matching notes.

    ```python
    import tempfile

    from langchain_contextkit.notes import FileNoteStore

    with tempfile.TemporaryDirectory() as workspace:
        store = FileNoteStore(workspace)
        note = store.create(
            title="Dependency clash", content="lib A needs B<2", note_type="blocker"
        )
        store.update(note.id, content="lib A needs B<2; pinned B==1.9")
        print(store.get(note.id).content)
        print([hit.note.title for hit in store.search("clash")])
        print(store.summary().by_type)
    # lib A needs B<2; pinned B==1.9
    # ['Dependency clash']
    # {'blocker': 1}
    ```
    """

    max_notes: int | None
    """Notes the store holds before `create` is refused; `None` for no cap."""

    max_content_chars: int
    """Characters a note's content may have."""

    def __init__(
        self,
        *,
        max_notes: int | None = DEFAULT_MAX_NOTES,
        max_content_chars: int = DEFAULT_MAX_CONTENT_CHARS,
    ) -> None:
        """Check and keep the limits shared by every store.

        Raises:
            ConfigError: If a limit is not a positive integer.
        """
        for name, value, optional in (
            ("max_notes", max_notes, True),
            ("max_content_chars", max_content_chars, False),
        ):
            if not (optional and value is None) and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                kind = "a positive integer or None" if optional else "a positive integer"
                msg = f"{name} must be {kind}, got {value!r}"
                raise ConfigError(msg)
        self.max_notes = max_notes
        self.max_content_chars = max_content_chars

    # -- the interface -----------------------------------------------------------------

    def create(
        self,
        *,
        title: str,
        content: str,
        note_type: NoteType = "general",
        tags: Sequence[str] = (),
        note_id: str | None = None,
    ) -> Note:
        """Create a note and return it, with its new id.

        Args:
            title: A short one-line title.
            content: The body, markdown.
            note_type: What the note records.
            tags: Labels to filter by later.
            note_id: The id to create it under (a caller that derives ids from what it
                stores, so every process names a note alike); default a fresh one.

        Raises:
            InvalidNoteError: If an argument is malformed, or a note `note_id` exists.
            NoteLimitError: If the store holds `max_notes` notes or the content is over
                `max_content_chars`.
        """
        draft = self._draft(title, content, note_type, tags, note_id)
        return self._sync(lambda: self._insert(draft, named=note_id is not None))

    def get(self, note_id: str) -> Note:
        """Return the note `note_id`.

        Raises:
            InvalidNoteError: If `note_id` is malformed.
            NoteNotFoundError: If no note has that id.
        """
        return self._sync(lambda: self._read(check_note_id(note_id)))

    def update(
        self,
        note_id: str,
        *,
        title: str | None = None,
        content: str | None = None,
        note_type: NoteType | None = None,
        tags: Sequence[str] | None = None,
    ) -> Note:
        """Change the given fields of a note (the others are kept) and return it.

        Raises:
            InvalidNoteError: If an argument is malformed or nothing would change.
            NoteNotFoundError: If no note has that id.
            NoteLimitError: If the content is over `max_content_chars`.
        """
        revise = self._reviser(title, content, note_type, tags)
        return self._sync(lambda: self._change(check_note_id(note_id), revise))

    def delete(self, note_id: str) -> NoteInfo:
        """Delete a note and return what it was.

        Raises:
            InvalidNoteError: If `note_id` is malformed.
            NoteNotFoundError: If no note has that id.
        """
        return self._sync(lambda: self._change(check_note_id(note_id), None)).info()

    def list_notes(
        self,
        *,
        note_type: NoteType | None = None,
        tags: Sequence[str] = (),
        limit: int | None = None,
    ) -> list[NoteInfo]:
        """Return notes newest first, optionally filtered by type and tags.

        Args:
            note_type: Keep only notes of this type.
            tags: Keep only notes with at least one of these tags.
            limit: Maximum number of notes; `None` for all.
        """
        kind, wanted, most = _check_filters(note_type, tags, limit, allow_none=True)
        return select(self._sync(self._infos), note_type=kind, tags=wanted, limit=most)

    def search(
        self,
        query: str,
        *,
        note_type: NoteType | None = None,
        tags: Sequence[str] = (),
        limit: int = DEFAULT_SEARCH_LIMIT,
    ) -> list[NoteHit]:
        """Return the notes most relevant to `query`, best first.

        Args:
            query: Free text, in any language.
            note_type: Keep only notes of this type.
            tags: Keep only notes with at least one of these tags.
            limit: Maximum number of results.
        """
        kind, wanted, most = _check_filters(note_type, tags, limit, allow_none=False)
        return self._sync(lambda: self._search(str(query), kind, wanted, most or limit))

    def summary(self, *, recent: int = DEFAULT_RECENT) -> NoteSummary:
        """Count the notes per type and list the `recent` latest."""
        return summarize(self.list_notes(), recent=recent)

    # -- async twins -------------------------------------------------------------------

    async def acreate(
        self,
        *,
        title: str,
        content: str,
        note_type: NoteType = "general",
        tags: Sequence[str] = (),
        note_id: str | None = None,
    ) -> Note:
        """Async twin of `create`."""
        draft = self._draft(title, content, note_type, tags, note_id)
        return await self._async(lambda: self._insert(draft, named=note_id is not None))

    async def aget(self, note_id: str) -> Note:
        """Async twin of `get`."""
        return await self._async(lambda: self._read(check_note_id(note_id)))

    async def aupdate(
        self,
        note_id: str,
        *,
        title: str | None = None,
        content: str | None = None,
        note_type: NoteType | None = None,
        tags: Sequence[str] | None = None,
    ) -> Note:
        """Async twin of `update`."""
        revise = self._reviser(title, content, note_type, tags)
        return await self._async(lambda: self._change(check_note_id(note_id), revise))

    async def adelete(self, note_id: str) -> NoteInfo:
        """Async twin of `delete`."""
        return (await self._async(lambda: self._change(check_note_id(note_id), None))).info()

    async def alist_notes(
        self,
        *,
        note_type: NoteType | None = None,
        tags: Sequence[str] = (),
        limit: int | None = None,
    ) -> list[NoteInfo]:
        """Async twin of `list_notes`."""
        kind, wanted, most = _check_filters(note_type, tags, limit, allow_none=True)
        return select(await self._async(self._infos), note_type=kind, tags=wanted, limit=most)

    async def asearch(
        self,
        query: str,
        *,
        note_type: NoteType | None = None,
        tags: Sequence[str] = (),
        limit: int = DEFAULT_SEARCH_LIMIT,
    ) -> list[NoteHit]:
        """Async twin of `search`."""
        kind, wanted, most = _check_filters(note_type, tags, limit, allow_none=False)
        return await self._async(lambda: self._search(str(query), kind, wanted, most or limit))

    async def asummary(self, *, recent: int = DEFAULT_RECENT) -> NoteSummary:
        """Async twin of `summary`."""
        return summarize(await self.alist_notes(), recent=recent)

    # -- what a backend implements -----------------------------------------------------

    @abstractmethod
    def _insert(self, draft: Note, *, named: bool) -> Flow[Note]:
        """Store a new note (a fresh id on a clash, unless `named`: then `_taken`)."""

    @abstractmethod
    def _read(self, note_id: str) -> Flow[Note]:
        """The note `note_id`, or `NoteNotFoundError`."""

    @abstractmethod
    def _change(self, note_id: str, revise: Revise | None) -> Flow[Note]:
        """Replace a note by `revise(note)`, or delete it if `None`; return the note."""

    @abstractmethod
    def _infos(self) -> Flow[list[NoteInfo]]:
        """Every note's metadata."""

    @abstractmethod
    def _search(
        self, query: str, kind: NoteType | None, tags: Sequence[str], limit: int
    ) -> Flow[list[NoteHit]]:
        """Ranked hits (see `search`), or the newest notes when `query` has no word."""

    def _sync(self, make: Callable[[], Flow[_T]]) -> _T:
        """Run an operation; a store with store operations answers them in `_batch`."""
        return drive(make(), self._batch)

    async def _async(self, make: Callable[[], Flow[_T]]) -> _T:
        """Run an operation from async code; by default `_sync` in an executor."""
        return await run_in_executor(None, self._sync, make)

    def _batch(self, ops: list[Op]) -> list[Result]:
        msg = f"{type(self).__name__} runs no store operations, got {ops!r}"
        raise TypeError(msg)

    # -- helpers for implementations ---------------------------------------------------

    def _draft(
        self, title: object, content: object, note_type: object, tags: object, note_id: object
    ) -> Note:
        """Validate a create call's arguments into a note with its id (fresh by default)."""
        now = utc_now()
        return Note(
            id=new_note_id(now) if note_id is None else check_note_id(note_id),
            title=check_title(title),
            type=check_note_type(note_type),
            tags=check_tags(tags),
            created_at=now,
            updated_at=now,
            content=check_content(content, self.max_content_chars),
        )

    def _reviser(
        self, title: object, content: object, note_type: object, tags: object
    ) -> Callable[[Note], Note]:
        """What an update does to the note it reads (validated when applied)."""

        def revise(note: Note) -> Note:
            if title is None and content is None and note_type is None and tags is None:
                msg = "nothing to update: give at least one of title, content, note_type or tags"
                raise InvalidNoteError(msg)
            return Note(
                id=note.id,
                title=note.title if title is None else check_title(title),
                type=note.type if note_type is None else check_note_type(note_type),
                tags=note.tags if tags is None else check_tags(tags),
                created_at=note.created_at,
                # Never earlier than the version it replaces, whatever the clock did.
                updated_at=max(utc_now(), note.updated_at),
                content=(
                    note.content
                    if content is None
                    else check_content(content, self.max_content_chars)
                ),
            )

        return revise

    @staticmethod
    def _taken(note_id: str) -> InvalidNoteError:
        """The error of a create under a given id that a note already has."""
        msg = f"a note with id {note_id!r} exists: read or update it instead"
        return InvalidNoteError(msg)

    def _check_room(self, count: int) -> None:
        """Refuse a create when the store already holds `max_notes` notes."""
        if self.max_notes is not None and count >= self.max_notes:
            msg = (
                f"the notes store is full ({count} notes, max_notes={self.max_notes}): "
                "update or delete an existing note instead of creating a new one"
            )
            raise NoteLimitError(msg)


def not_found(note_id: str) -> NoteNotFoundError:
    """The error for an id no note has."""
    return NoteNotFoundError(
        f"no note with id {note_id!r} (deleted, or never created): use list or search "
        "to find the ids of existing notes"
    )


def _check_filters(
    note_type: object, tags: object, limit: object, *, allow_none: bool
) -> tuple[NoteType | None, tuple[str, ...], int | None]:
    """Validate the filters of `list_notes` and `search`."""
    kind = None if note_type is None else check_note_type(note_type)
    wanted = check_tags(tags)
    if limit is None and allow_none:
        return kind, wanted, None
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        msg = f"limit must be a positive integer, got {limit!r}"
        raise InvalidNoteError(msg)
    return kind, wanted, limit
