"""`StoreNoteStore`: notes in any LangGraph `BaseStore`, shared by processes and machines.

Each note is one item keyed by its id in one namespace; its value is `Note.to_dict()`.
`list_notes` and `search` work on an in-memory copy of the namespace: every write also
replaces a generation item (`"__generation__"`) with a fresh token, and a reader reloads
its copy only when that token changed. `get`, `update` and `delete` read the item itself.

Limits: `BaseStore` has no compare-and-set, so two machines creating notes at once may
pass `max_notes` by a few, and concurrent updates of one note are last-writer-wins on the
whole note. Items in the namespace that do not parse as notes are ignored with a warning.
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
import threading
from typing import TYPE_CHECKING, TypeVar

from langchain_core.runnables.config import run_in_executor
from langgraph.store.base import BaseStore, GetOp, Item, Op, PutOp, Result, SearchOp

from langchain_contextkit.errors import ConfigError, InvalidNoteError
from langchain_contextkit.notes._search import SearchIndex, query_terms
from langchain_contextkit.notes.model import (
    DEFAULT_MAX_CONTENT_CHARS,
    DEFAULT_MAX_NOTES,
    Note,
    NoteHit,
    NoteInfo,
    is_note_id,
    new_note_id,
    select,
)
from langchain_contextkit.notes.store import (
    DEFAULT_SEARCH_LIMIT,
    Flow,
    NoteStore,
    Revise,
    _check_filters,
    adrive,
    not_found,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from langchain_contextkit.notes.model import NoteType

__all__ = ["DEFAULT_NAMESPACE", "StoreNoteStore"]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

DEFAULT_NAMESPACE: tuple[str, ...] = ("notes",)
"""The namespace notes are kept in unless told otherwise."""

_GENERATION_KEY = "__generation__"
_PAGE = 1000  # items per search call when the namespace is (re)loaded
_LOAD_ATTEMPTS = 3  # reloads retried when a write lands in the middle of one


class StoreNoteStore(NoteStore):
    """Notes kept in a LangGraph `BaseStore` under one namespace (`batch` / `abatch`).

    ```python
    from langgraph.store.memory import InMemoryStore

    from langchain_contextkit.notes import StoreNoteStore

    shared = InMemoryStore()
    writer = StoreNoteStore(shared, namespace=("notes", "project-x"))
    reader = StoreNoteStore(shared, namespace=("notes", "project-x"))
    note = writer.create(title="依赖冲突", content="库 A 需要 B<2", note_type="blocker")
    print([info.title for info in reader.list_notes(note_type="blocker")])
    print(shared.get(("notes", "project-x"), note.id).value["type"])
    # ['依赖冲突']
    # blocker
    ```
    """

    store: BaseStore
    """The LangGraph store holding the notes."""

    namespace: tuple[str, ...]
    """The namespace the notes live in."""

    def __init__(
        self,
        store: BaseStore,
        *,
        namespace: Sequence[str] = DEFAULT_NAMESPACE,
        max_notes: int | None = DEFAULT_MAX_NOTES,
        max_content_chars: int = DEFAULT_MAX_CONTENT_CHARS,
    ) -> None:
        """Keep notes in `store` under `namespace`.

        Args:
            store: Any LangGraph `BaseStore` (`InMemoryStore`, `PostgresStore`, ...).
            namespace: Non-empty labels without dots (a LangGraph rule).
            max_notes: Notes the namespace holds before `create` is refused; `None` for
                no cap.
            max_content_chars: Characters a note's content may have.

        Raises:
            ConfigError: If `store` is not a `BaseStore`, the namespace is malformed or a
                limit is invalid.
        """
        super().__init__(max_notes=max_notes, max_content_chars=max_content_chars)
        _check_store(store)
        labels = (namespace,) if isinstance(namespace, str) else tuple(namespace)
        if not labels or not all(
            isinstance(label, str) and label and "." not in label for label in labels
        ):
            msg = f"namespace must be non-empty labels without dots, got {namespace!r}"
            raise ConfigError(msg)
        self.store = store
        self.namespace = labels
        self._lock = threading.Lock()
        self._notes: dict[str, Note] = {}
        self._generation: str | None = None
        self._loaded = False
        self._search_index: SearchIndex | None = None

    def __repr__(self) -> str:
        """Show the store's type and the namespace."""
        return f"{type(self).__name__}({type(self.store).__name__}, namespace={self.namespace!r})"

    # -- the operations (see `NoteStore`), answered by `store.batch` / `store.abatch` ---

    def _batch(self, ops: list[Op]) -> list[Result]:
        return self.store.batch(ops)

    async def _async(self, make: Callable[[], Flow[_T]]) -> _T:
        return await adrive(make(), self.store.abatch)

    async def asearch(
        self,
        query: str,
        *,
        note_type: NoteType | None = None,
        tags: Sequence[str] = (),
        limit: int = DEFAULT_SEARCH_LIMIT,
    ) -> list[NoteHit]:
        """Async twin of `search`; the ranking runs in an executor, off the event loop."""
        kind, wanted, most = _check_filters(note_type, tags, limit, allow_none=False)
        await adrive(self._refresh(), self.store.abatch)
        return await run_in_executor(
            None, self._search_local, str(query), kind, wanted, most or limit
        )

    def _insert(self, draft: Note, *, named: bool) -> Flow[Note]:
        yield from self._refresh()
        self._check_room(len(self._notes))
        note = draft
        while True:
            (existing,) = yield [GetOp(self.namespace, note.id)]
            if existing is None and note.id not in self._notes:
                break
            if named:
                raise self._taken(note.id)
            note = dataclasses.replace(note, id=new_note_id(note.created_at))
        yield from self._commit(note.id, note)
        return note

    def _read(self, note_id: str) -> Flow[Note]:
        (found,) = yield [GetOp(self.namespace, note_id)]
        return self._from_item(_item(found), note_id)

    def _change(self, note_id: str, revise: Revise | None) -> Flow[Note]:
        (found,) = yield [GetOp(self.namespace, note_id)]
        note = self._from_item(_item(found), note_id)
        if revise is not None:
            note = revise(note)
        yield from self._commit(note_id, None if revise is None else note)
        return note

    def _infos(self) -> Flow[list[NoteInfo]]:
        yield from self._refresh()
        with self._lock:
            return [note.info() for note in self._notes.values()]

    def _search(
        self, query: str, kind: NoteType | None, tags: Sequence[str], limit: int
    ) -> Flow[list[NoteHit]]:
        yield from self._refresh()
        return self._search_local(query, kind, tags, limit)

    def _commit(self, note_id: str, note: Note | None) -> Flow[None]:
        """Write (or, for `None`, delete) a note and bump the generation token."""
        token = secrets.token_hex(8)
        # The generation is read in the same batch, just before the writes: if it is the
        # one our copy was loaded at, nobody else wrote since and our copy stays warm.
        seen, _, _ = yield [
            GetOp(self.namespace, _GENERATION_KEY),
            PutOp(self.namespace, note_id, None if note is None else note.to_dict(), ttl=None),
            PutOp(self.namespace, _GENERATION_KEY, {"token": token}, index=False, ttl=None),
        ]
        with self._lock:
            fresh = self._loaded and _token(_item(seen)) == self._generation
            if note is None:
                self._notes.pop(note_id, None)
            else:
                self._notes[note_id] = note
            self._generation = token if fresh else None

    def _refresh(self) -> Flow[None]:
        """Reload the namespace into memory if anyone wrote since we last did."""
        (found,) = yield [GetOp(self.namespace, _GENERATION_KEY)]
        token = _token(_item(found))
        with self._lock:
            if self._loaded and token == self._generation and token is not None:
                return
        notes: dict[str, Note] = {}
        for _ in range(_LOAD_ATTEMPTS):
            notes = {}
            offset = 0
            while True:
                (result,) = yield [SearchOp(self.namespace, limit=_PAGE, offset=offset)]
                page = _items(result)
                for found in page:
                    if found.namespace == self.namespace and is_note_id(found.key):
                        note = self._parse(found)
                        if note is not None:
                            notes[found.key] = note
                if len(page) < _PAGE:
                    break
                offset += len(page)
            # A write during the pages may have shifted them: if so, read them again.
            (found,) = yield [GetOp(self.namespace, _GENERATION_KEY)]
            if _token(_item(found)) == token:
                break
            token = _token(_item(found))
        with self._lock:
            self._notes = notes
            self._generation = token
            self._loaded = True

    # -- helpers -------------------------------------------------------------------------

    def _search_local(
        self, query: str, kind: NoteType | None, wanted: Sequence[str], most: int
    ) -> list[NoteHit]:
        """Rank the in-memory copy (no store access)."""
        with self._lock:
            notes = dict(self._notes)
        if not query_terms(query):
            recent = select(notes.values(), note_type=kind, tags=wanted, limit=most)
            return [NoteHit(note=notes[info.id], score=0.0) for info in recent]
        if self._search_index is None:
            self._search_index = SearchIndex()
        # A note is its own version stamp: notes are immutable and compared by value.
        self._search_index.sync(
            dict(notes),
            lambda ids: ((notes[note_id], notes[note_id]) for note_id in ids),
        )
        ranked = self._search_index.search(query, note_type=kind, tags=wanted, limit=most)
        return [NoteHit(note=note, score=score) for note, score in ranked]

    def _from_item(self, item: Item | None, note_id: str) -> Note:
        note = None if item is None else self._parse(item)
        if note is None:
            raise not_found(note_id)
        return note

    def _parse(self, item: Item) -> Note | None:
        try:
            note = Note.from_dict(item.value)
        except InvalidNoteError as error:
            logger.warning("ignoring item %r in %r: %s", item.key, self.namespace, error)
            return None
        if note.id != item.key:
            logger.warning(
                "item %r in %r holds note %r; using the key", item.key, self.namespace, note.id
            )
            note = dataclasses.replace(note, id=item.key)
        return note


def _check_store(store: object) -> None:
    """Refuse anything but a LangGraph store (typed `object`: it comes from users)."""
    if not isinstance(store, BaseStore):
        msg = f"store must be a LangGraph BaseStore, got {type(store).__name__}"
        raise ConfigError(msg)


def _item(result: Result) -> Item | None:
    """The result of a `GetOp`."""
    return result if isinstance(result, Item) else None


def _items(result: Result) -> list[Item]:
    """The results of a `SearchOp`."""
    return [found for found in result or () if isinstance(found, Item)]  # type: ignore[union-attr]


def _token(item: Item | None) -> str | None:
    """The generation token in a generation item, if any."""
    if item is None or not isinstance(item.value, dict):
        return None
    token = item.value.get("token")
    return token if isinstance(token, str) else None
