"""BM25 search over notes: SQLite FTS5 in memory, updated note by note.

Tokenisation is shared with the document search (`langchain_contextkit.notes._fts`). The table
is contentless: a row is deleted by re-deriving its columns from the note, so
`index_text` must stay a pure function of the text.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from langchain_contextkit.errors import SearchUnavailableError
from langchain_contextkit.notes._fts import (
    TOKENIZE,
    connect,
    index_text,
    match_expression,
    query_terms,
)

__all__ = ["SearchIndex", "SearchUnavailableError", "index_text", "query_terms"]

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence

    from langchain_contextkit.notes.model import Note, NoteType

# Column weights: a word in the title or a tag says more about a note than one in its body.
_TITLE_WEIGHT = 2.0
_TAGS_WEIGHT = 2.0
_CONTENT_WEIGHT = 1.0
# Rows inserted per executemany when a cold index is filled.
_BATCH = 500


def _columns(note: Note) -> tuple[str, str, str]:
    """The indexed text of a note's title, tags and content."""
    return index_text(note.title), index_text(" ".join(note.tags)), index_text(note.content)


class SearchIndex:
    """An in-memory FTS5 index of notes, kept in line with a store by version stamps.

    Thread-safe: one lock guards the connection.
    """

    def __init__(self) -> None:
        """Open the in-memory database (`SearchUnavailableError` without FTS5)."""
        self._lock = threading.Lock()
        # One connection, guarded by our lock, used from whichever thread runs the store.
        self._db = connect(
            f"CREATE VIRTUAL TABLE fts USING fts5(title, tags, content, content='', "
            f"tokenize='{TOKENIZE}')",
            purpose="note search",
        )
        self._notes: dict[str, tuple[int, Note, Hashable]] = {}
        self._ids: dict[int, str] = {}
        self._next_rid = 1

    def sync(
        self,
        versions: Mapping[str, Hashable],
        load: Callable[[Sequence[str]], Iterable[tuple[Note, Hashable]]],
    ) -> None:
        """Bring the index in line with a store, touching only what changed.

        Args:
            versions: Every note id in the store, with a stamp that changes with the note.
            load: Yields the notes whose stamp changed, with the stamps they were read at.
        """
        with self._lock:
            gone = [note_id for note_id in self._notes if note_id not in versions]
            stale = [
                note_id
                for note_id, version in versions.items()
                if (held := self._notes.get(note_id)) is None or held[2] != version
            ]
            if not gone and not stale:
                return
            try:
                with self._db:  # one transaction: a cold fill of 10,000 notes stays fast
                    self._db.execute("BEGIN")
                    for note_id in gone:
                        self._remove(note_id)
                    batch: list[tuple[Note, Hashable]] = []
                    for loaded in load(stale):
                        batch.append(loaded)
                        if len(batch) >= _BATCH:
                            self._put_many(batch)
                            batch = []
                    self._put_many(batch)
            except BaseException:
                # The transaction rolled back but our maps moved on: start again from empty.
                self._notes.clear()
                self._ids.clear()
                with self._db:
                    self._db.execute("INSERT INTO fts (fts) VALUES ('delete-all')")
                raise

    def search(
        self,
        query: str,
        *,
        note_type: NoteType | None,
        tags: Sequence[str],
        limit: int,
    ) -> list[tuple[Note, float]]:
        """`(note, score > 0)` pairs, best first, ties newest first; the query's words OR-ed."""
        match = match_expression(query)
        if match is None:
            return []
        weights = f"{_TITLE_WEIGHT}, {_TAGS_WEIGHT}, {_CONTENT_WEIGHT}"
        hits: list[tuple[Note, float]] = []
        with self._lock:
            rows = self._db.execute(
                f"SELECT rowid, bm25(fts, {weights}) AS rank FROM fts WHERE fts MATCH ? "  # noqa: S608 - constants
                "ORDER BY rank",
                (match,),
            )
            for rid, rank in rows:
                if len(hits) >= limit and rank != hits[-1][1]:
                    break  # past the last rank that can still make the cut
                note = self._notes[self._ids[rid]][1]
                if (note_type is None or note.type == note_type) and (
                    not tags or any(tag in note.tags for tag in tags)
                ):
                    hits.append((note, rank))
        hits.sort(key=lambda hit: (hit[0].updated_at, hit[0].id), reverse=True)
        hits.sort(key=lambda hit: hit[1])  # stable: equal ranks stay newest first
        # bm25() is negative, lower is better; report it as a positive score.
        return [(note, -rank) for note, rank in hits[:limit]]

    # -- internals (called with the lock held, inside a transaction) --------------------

    def _put_many(self, batch: Sequence[tuple[Note, Hashable]]) -> None:
        rows = []
        for note, version in batch:
            self._remove(note.id)
            rid = self._next_rid
            self._next_rid += 1
            self._notes[note.id] = (rid, note, version)
            self._ids[rid] = note.id
            rows.append((rid, *_columns(note)))
        self._db.executemany(
            "INSERT INTO fts (rowid, title, tags, content) VALUES (?, ?, ?, ?)", rows
        )

    def _remove(self, note_id: str) -> None:
        held = self._notes.pop(note_id, None)
        if held is None:
            return
        rid, note, _ = held
        del self._ids[rid]
        # A contentless table forgets a row by being told the exact values it indexed.
        self._db.execute(
            "INSERT INTO fts (fts, rowid, title, tags, content) VALUES ('delete', ?, ?, ?, ?)",
            (rid, *_columns(note)),
        )
