"""`NoteStore`: the interface every note store implements, sync and async.

Two implementations ship: [`FileNoteStore`][langchain_contextkit.notes.FileNoteStore]
(markdown files plus a JSON index, for one machine) and
[`StoreNoteStore`][langchain_contextkit.notes.StoreNoteStore] (any LangGraph
`BaseStore`, for notes shared between processes or machines). Both validate every
argument the same way and rank searches the same way, so an agent cannot tell them apart.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

from langchain_core.runnables.config import run_in_executor

from langchain_contextkit.errors import ConfigError, InvalidNoteError, NoteLimitError
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
    summarize,
    utc_now,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["DEFAULT_RECENT", "DEFAULT_SEARCH_LIMIT", "NoteStore"]

DEFAULT_SEARCH_LIMIT = 10
"""Results `search` returns when no limit is given."""

DEFAULT_RECENT = 5
"""Latest notes `summary` lists when not told otherwise."""


class NoteStore(ABC):
    """Where notes live: create, read, update, delete, list, search and summarise them.

    Every method validates its arguments and raises a
    [`NoteError`][langchain_contextkit.errors.NoteError] subclass whose message says what
    to change: `NoteNotFoundError` for an unknown id, `InvalidNoteError` for a malformed
    id, type, title, tag or content, `NoteLimitError` when the store is full or a content
    too long. Each method has an async twin (`acreate`, `aget`, ...); by default they run
    the sync method in an executor, and stores with native async I/O override them.

    `list` and `summary` order notes newest first. `search` ranks by BM25 relevance to
    the query over title, tags and content (CJK text included), filters by type and tags
    (a note passes the tag filter if it has *any* of the tags), and breaks ties by
    recency; a query with no searchable word lists the newest matching notes.

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

        Args:
            max_notes: Notes the store holds before `create` is refused; `None` for no
                cap.
            max_content_chars: Characters a note's content may have.

        Raises:
            ConfigError: If a limit is not a positive integer.
        """
        if max_notes is not None and (
            isinstance(max_notes, bool) or not isinstance(max_notes, int) or max_notes < 1
        ):
            msg = f"max_notes must be a positive integer or None, got {max_notes!r}"
            raise ConfigError(msg)
        if (
            isinstance(max_content_chars, bool)
            or not isinstance(max_content_chars, int)
            or max_content_chars < 1
        ):
            msg = f"max_content_chars must be a positive integer, got {max_content_chars!r}"
            raise ConfigError(msg)
        self.max_notes = max_notes
        self.max_content_chars = max_content_chars

    # -- the interface -----------------------------------------------------------------

    @abstractmethod
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

    @abstractmethod
    def get(self, note_id: str) -> Note:
        """Return the note `note_id`.

        Raises:
            InvalidNoteError: If `note_id` is malformed.
            NoteNotFoundError: If no note has that id.
        """

    @abstractmethod
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

    @abstractmethod
    def delete(self, note_id: str) -> NoteInfo:
        """Delete a note and return what it was.

        Raises:
            InvalidNoteError: If `note_id` is malformed.
            NoteNotFoundError: If no note has that id.
        """

    @abstractmethod
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

    @abstractmethod
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

    def summary(self, *, recent: int = DEFAULT_RECENT) -> NoteSummary:
        """Count the notes per type and list the `recent` latest.

        Args:
            recent: How many of the latest notes to include.
        """
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
        # `note_id` only when given: a store written before it existed still works.
        named = {} if note_id is None else {"note_id": note_id}
        return await run_in_executor(
            None,
            lambda: self.create(
                title=title, content=content, note_type=note_type, tags=tags, **named
            ),
        )

    async def aget(self, note_id: str) -> Note:
        """Async twin of `get`."""
        return await run_in_executor(None, self.get, note_id)

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
        return await run_in_executor(
            None,
            lambda: self.update(
                note_id, title=title, content=content, note_type=note_type, tags=tags
            ),
        )

    async def adelete(self, note_id: str) -> NoteInfo:
        """Async twin of `delete`."""
        return await run_in_executor(None, self.delete, note_id)

    async def alist_notes(
        self,
        *,
        note_type: NoteType | None = None,
        tags: Sequence[str] = (),
        limit: int | None = None,
    ) -> list[NoteInfo]:
        """Async twin of `list`."""
        return await run_in_executor(
            None, lambda: self.list_notes(note_type=note_type, tags=tags, limit=limit)
        )

    async def asearch(
        self,
        query: str,
        *,
        note_type: NoteType | None = None,
        tags: Sequence[str] = (),
        limit: int = DEFAULT_SEARCH_LIMIT,
    ) -> list[NoteHit]:
        """Async twin of `search`."""
        return await run_in_executor(
            None, lambda: self.search(query, note_type=note_type, tags=tags, limit=limit)
        )

    async def asummary(self, *, recent: int = DEFAULT_RECENT) -> NoteSummary:
        """Async twin of `summary`."""
        return await run_in_executor(None, lambda: self.summary(recent=recent))

    # -- helpers for implementations ---------------------------------------------------

    def _draft(
        self,
        *,
        title: object,
        content: object,
        note_type: object,
        tags: object,
        note_id: object = None,
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

    def _revise(
        self,
        note: Note,
        *,
        title: object = None,
        content: object = None,
        note_type: object = None,
        tags: object = None,
    ) -> Note:
        """Validate an update call's arguments and apply them to `note`."""
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
                note.content if content is None else check_content(content, self.max_content_chars)
            ),
        )

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

    @staticmethod
    def _check_filters(
        note_type: object, tags: object, limit: object, *, allow_none: bool
    ) -> tuple[NoteType | None, tuple[str, ...], int | None]:
        """Validate the filters of `list` and `search`."""
        kind = None if note_type is None else check_note_type(note_type)
        wanted = check_tags(tags)
        if limit is None and allow_none:
            return kind, wanted, None
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            msg = f"limit must be a positive integer, got {limit!r}"
            raise InvalidNoteError(msg)
        return kind, wanted, limit
