"""`NoteSource`: the agent's notes as a context source, open blockers first.

Feeds the notes relevant to a query from a [`NoteStore`][langchain_contextkit.notes.NoteStore]
into the context the builder (or the agent path) assembles, under the same token budget
as every other source.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langchain_contextkit.errors import ConfigError
from langchain_contextkit.notes.store import NoteStore
from langchain_contextkit.retrieval.result import RetrievalResult
from langchain_contextkit.retrieval.sources.base import ContextSource, Scope

if TYPE_CHECKING:
    from langchain_core.callbacks import Callbacks

    from langchain_contextkit.notes.model import Note

__all__ = ["NoteSource"]

_MAX_RESULTS = 100  # the most notes one fetch returns when `k` is unset (NoteTool's largest page)


class NoteSource(ContextSource):
    """A context source that supplies notes: open blockers first, then relevant notes.

    Each fetch takes the `max_blockers` most recently updated `blocker` notes (a blocker
    matters whatever the question), then the notes most relevant to the query (BM25),
    without duplicates, at most `k` in all. Each result's content is the note rendered
    with its type and title; its metadata holds the note's id, type, tags and update time.
    The scope is not used: choose the store (or namespace) per user or thread instead.

    ```python
    from langgraph.store.memory import InMemoryStore

    from langchain_contextkit.notes import StoreNoteStore
    from langchain_contextkit.retrieval.sources.notes import NoteSource

    store = StoreNoteStore(InMemoryStore())
    store.create(title="Refactor plan", content="Refactor the models first.")
    store.create(title="CI is red", content="Tests time out.", note_type="blocker")
    for result in NoteSource(name="notes", store=store, k=2).fetch("refactor"):
        print(result.metadata["note_type"], result.content.splitlines()[0])
    # blocker [blocker] CI is red
    # general [general] Refactor plan
    ```
    """

    store: NoteStore
    """Where the notes live."""

    k: int | None = 5
    """Maximum number of notes per fetch (blockers included); `None` for no cap."""

    max_blockers: int = 2
    """Most recent blocker notes put first whatever the query; 0 to rank blockers like
    any other note."""

    def __init__(self, **data: Any) -> None:  # noqa: ANN401 - the model's fields
        """Check the fields, then build the source.

        Args:
            **data: `name`, `store`, and optionally `k`, `max_blockers`, `tags`,
                `metadata`.

        Raises:
            ConfigError: If `store` is not a `NoteStore`, `max_blockers` is negative, or
                `name` / `k` is invalid.
        """
        store = data.get("store")
        if not isinstance(store, NoteStore):
            msg = f"store must be a NoteStore, got {type(store).__name__}"
            raise ConfigError(msg)
        blockers = data.get("max_blockers", 2)
        if isinstance(blockers, bool) or not isinstance(blockers, int) or blockers < 0:
            msg = f"max_blockers must be an integer >= 0, got {blockers!r}"
            raise ConfigError(msg)
        super().__init__(**data)

    def fetch(
        self,
        query: str,
        scope: Scope | None = None,  # noqa: ARG002 - notes are scoped by store, not run
        *,
        callbacks: Callbacks = None,  # noqa: ARG002 - the store makes no LangChain runs
    ) -> list[RetrievalResult]:
        """Return blockers first, then the notes most relevant to `query`.

        Args:
            query: What the run is about.
            scope: Ignored (see the class docstring).
            callbacks: Ignored: reading notes starts no LangChain run.

        Returns:
            At most `k` results labelled with this source's name.
        """
        limit = self.k or _MAX_RESULTS
        pinned = []
        if self.max_blockers:
            blockers = self.store.search("", note_type="blocker", limit=self.max_blockers)
            pinned = [hit.note for hit in blockers]
        hits = self.store.search(query, limit=limit)
        return self._results(pinned, [hit.note for hit in hits], limit)

    async def afetch(
        self,
        query: str,
        scope: Scope | None = None,  # noqa: ARG002
        *,
        callbacks: Callbacks = None,  # noqa: ARG002
    ) -> list[RetrievalResult]:
        """Async twin of `fetch`, through the store's async methods."""
        limit = self.k or _MAX_RESULTS
        pinned = []
        if self.max_blockers:
            blockers = await self.store.asearch("", note_type="blocker", limit=self.max_blockers)
            pinned = [hit.note for hit in blockers]
        hits = await self.store.asearch(query, limit=limit)
        return self._results(pinned, [hit.note for hit in hits], limit)

    def _results(self, pinned: list[Note], ranked: list[Note], limit: int) -> list[RetrievalResult]:
        """Blockers, then ranked notes, without duplicates; scored by rank."""
        seen: set[str] = set()
        notes = []
        for note in [*pinned, *ranked]:
            if note.id not in seen:
                seen.add(note.id)
                notes.append(note)
        return [
            RetrievalResult(
                content=f"[{note.type}] {note.title}\n{note.content}",
                score=1.0 / (rank + 1),
                source=self.name,
                metadata={
                    "note_id": note.id,
                    "note_type": note.type,
                    "tags": list(note.tags),
                    "updated_at": note.to_dict()["updated_at"],
                },
            )
            for rank, note in enumerate(notes[:limit])
        ]
