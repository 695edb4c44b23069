"""BM25 search over notes: SQLite FTS5 in memory, updated note by note.

Tokenisation is shared with the document search (`langchain_contextkit._fts`). The table
is contentless: a row is deleted by re-deriving its columns from the note, so
`index_text` must stay a pure function of the text.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from langchain_contextkit._fts import TOKENIZE, connect, index_text, match_expression, query_terms
from langchain_contextkit.errors import SearchUnavailableError
from langchain_contextkit.notes.model import Note, format_timestamp

__all__ = ["SearchIndex", "SearchUnavailableError", "index_text", "query_terms"]

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence

    from langchain_contextkit.notes.model import NoteType

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
            f"""
            CREATE TABLE notes (rid INTEGER PRIMARY KEY, id TEXT UNIQUE NOT NULL,
                                type TEXT NOT NULL, updated TEXT NOT NULL);
            CREATE TABLE tags (rid INTEGER NOT NULL, tag TEXT NOT NULL);
            CREATE INDEX tags_by_tag ON tags (tag, rid);
            CREATE INDEX tags_by_rid ON tags (rid);
            CREATE VIRTUAL TABLE fts USING fts5(
                title, tags, content, content='', tokenize='{TOKENIZE}'
            );
            """,
            purpose="note search",
        )
        self._notes: dict[str, tuple[int, Note, Hashable]] = {}
        self._next_rid = 1

    def __len__(self) -> int:
        """Number of notes indexed."""
        return len(self._notes)

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
                # The transaction rolled back but our map moved on: start again from empty.
                self._clear()
                raise

    def _clear(self) -> None:
        self._notes.clear()
        with self._db:
            self._db.execute("BEGIN")
            self._db.execute("DELETE FROM notes")
            self._db.execute("DELETE FROM tags")
            self._db.execute("INSERT INTO fts (fts) VALUES ('delete-all')")

    def put(self, note: Note, version: Hashable) -> None:
        """Index (or re-index) one note the store just wrote."""
        with self._lock, self._db:
            self._db.execute("BEGIN")
            self._put_many([(note, version)])

    def remove(self, note_id: str) -> None:
        """Drop one note the store just deleted."""
        with self._lock, self._db:
            self._db.execute("BEGIN")
            self._remove(note_id)

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
        sql = [
            f"SELECT n.id, bm25(fts, {_TITLE_WEIGHT}, {_TAGS_WEIGHT}, {_CONTENT_WEIGHT}) AS rank",
            "FROM fts JOIN notes AS n ON n.rid = fts.rowid WHERE fts MATCH ?",
        ]
        params: list[object] = [match]
        if note_type is not None:
            sql.append("AND n.type = ?")
            params.append(note_type)
        if tags:
            marks = ", ".join("?" * len(tags))
            # Only `?` placeholders are spliced in: every tag is a bound parameter.
            sql.append(f"AND n.rid IN (SELECT rid FROM tags WHERE tag IN ({marks}))")  # noqa: S608
            params.extend(tags)
        sql.append("ORDER BY rank, n.updated DESC, n.id DESC LIMIT ?")
        params.append(limit)
        with self._lock:
            # Only constants and `?` placeholders are joined: every value is a parameter.
            rows = self._db.execute(" ".join(sql), params).fetchall()
            # bm25() is negative, lower is better; report it as a positive score.
            return [(self._notes[note_id][1], -rank) for note_id, rank in rows]

    # -- internals (called with the lock held, inside a transaction) --------------------

    def _put_many(self, batch: Sequence[tuple[Note, Hashable]]) -> None:
        for note, _ in batch:
            self._remove(note.id)
        rows = []
        for note, version in batch:
            rid = self._next_rid
            self._next_rid += 1
            self._notes[note.id] = (rid, note, version)
            rows.append((rid, note))
        self._db.executemany(
            "INSERT INTO notes (rid, id, type, updated) VALUES (?, ?, ?, ?)",
            [(rid, note.id, note.type, format_timestamp(note.updated_at)) for rid, note in rows],
        )
        self._db.executemany(
            "INSERT INTO tags (rid, tag) VALUES (?, ?)",
            [(rid, tag) for rid, note in rows for tag in note.tags],
        )
        self._db.executemany(
            "INSERT INTO fts (rowid, title, tags, content) VALUES (?, ?, ?, ?)",
            [(rid, *_columns(note)) for rid, note in rows],
        )

    def _remove(self, note_id: str) -> None:
        held = self._notes.pop(note_id, None)
        if held is None:
            return
        rid, note, _ = held
        # A contentless table forgets a row by being told the exact values it indexed.
        self._db.execute(
            "INSERT INTO fts (fts, rowid, title, tags, content) VALUES ('delete', ?, ?, ?, ?)",
            (rid, *_columns(note)),
        )
        self._db.execute("DELETE FROM notes WHERE rid = ?", (rid,))
        self._db.execute("DELETE FROM tags WHERE rid = ?", (rid,))
