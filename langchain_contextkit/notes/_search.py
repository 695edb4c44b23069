"""BM25 search over notes, kept warm in memory and updated note by note.

The ranking is SQLite FTS5's `bm25()` (Okapi BM25, k1 = 1.2, b = 0.75) with per-column
weights, over an in-memory database that lives as long as the store object. SQLite ships
with CPython, so this adds no dependency, and unlike a rebuild-only index (bm25s, rank-bm25)
a changed note costs one delete and one insert, whatever the number of notes.

FTS5's `unicode61` tokenizer splits on spaces and punctuation, which leaves a run of
Chinese (or Japanese) text as one giant token. Before indexing, each such run is therefore
spelled out as its characters and its character bigrams, the scheme of Lucene's CJK
analyzer; a query uses the bigrams of each run (its lone character for a one-character
run), so "依赖冲突" finds "依赖版本冲突" through 依赖 and 冲突. Other scripts go through
`unicode61` plus the Porter stemmer, so "locks" finds "lock".
"""

from __future__ import annotations

import re
import sqlite3
import threading
from typing import TYPE_CHECKING

from langchain_contextkit.errors import ContextKitError
from langchain_contextkit.notes.model import Note, format_timestamp

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence

    from langchain_contextkit.notes.model import NoteType

# Han, kana, Hangul and CJK compatibility ideographs: scripts written without spaces.
_CJK_RUN = re.compile(
    r"[\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
    r"\U00020000-\U0002fa1f]+"
)
# Words as unicode61 sees them (letters and digits; `_` separates), minus CJK runs.
_WORD = re.compile(r"[^\W_]+")
# Column weights: a word in the title or a tag says more about a note than one in its body.
_TITLE_WEIGHT = 2.0
_TAGS_WEIGHT = 2.0
_CONTENT_WEIGHT = 1.0
# Rows inserted per executemany when a cold index is filled.
_BATCH = 500


class SearchUnavailableError(ContextKitError):
    """This Python's SQLite lacks the FTS5 extension that note search needs."""


def index_text(text: str) -> str:
    """Spell out CJK runs as characters plus bigrams, for FTS5 to index word by word."""
    return _CJK_RUN.sub(lambda run: f" {' '.join(_grams(run.group(), unigrams=True))} ", text)


def query_terms(query: str) -> list[str]:
    """The searchable terms of a query: words, and the bigrams of its CJK runs."""
    terms: dict[str, None] = {}
    position = 0
    for run in _CJK_RUN.finditer(query):
        terms.update(dict.fromkeys(_WORD.findall(query[position : run.start()])))
        terms.update(dict.fromkeys(_grams(run.group(), unigrams=False)))
        position = run.end()
    terms.update(dict.fromkeys(_WORD.findall(query[position:])))
    return list(terms)


def _grams(run: str, *, unigrams: bool) -> list[str]:
    """Character bigrams of a CJK run, plus its characters when `unigrams` (or if single)."""
    bigrams = [run[i : i + 2] for i in range(len(run) - 1)]
    if unigrams or not bigrams:
        return list(run) + bigrams
    return bigrams


def _columns(note: Note) -> tuple[str, str, str]:
    """The indexed text of a note's title, tags and content."""
    return index_text(note.title), index_text(" ".join(note.tags)), index_text(note.content)


class SearchIndex:
    """An in-memory FTS5 index of notes, synchronised with a store by version stamps.

    `sync(versions, load)` brings the index in line with the store: notes whose version
    stamp changed are reloaded through `load`, notes that disappeared are removed, and
    nothing else is touched, so keeping it warm costs work in proportion to what changed.
    Thread-safe: one lock guards the connection.
    """

    def __init__(self) -> None:
        """Open the in-memory database.

        Raises:
            SearchUnavailableError: If SQLite here was built without FTS5.
        """
        self._lock = threading.Lock()
        # One connection, guarded by our lock, used from whichever thread runs the store.
        self._db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        try:
            self._db.executescript(
                """
                CREATE TABLE notes (rid INTEGER PRIMARY KEY, id TEXT UNIQUE NOT NULL,
                                    type TEXT NOT NULL, updated TEXT NOT NULL);
                CREATE TABLE tags (rid INTEGER NOT NULL, tag TEXT NOT NULL);
                CREATE INDEX tags_by_tag ON tags (tag, rid);
                CREATE INDEX tags_by_rid ON tags (rid);
                CREATE VIRTUAL TABLE fts USING fts5(
                    title, tags, content, content='', tokenize='porter unicode61'
                );
                """
            )
        except sqlite3.OperationalError as error:
            self._db.close()
            msg = (
                "note search needs SQLite's FTS5 extension, which this Python's sqlite3 "
                f"module lacks ({error}); use a CPython build with FTS5 (python.org, "
                "Debian, Ubuntu, Homebrew and conda builds have it)"
            )
            raise SearchUnavailableError(msg) from error
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
        """Bring the index in line with a store.

        Args:
            versions: Every note id in the store, with a stamp that changes whenever the
                note does (a file's inode and mtime, an item's update time).
            load: Called with the ids whose stamp changed; yields those notes with the
                stamps they were read at (a note that vanished meanwhile is left out).
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
        """Rank notes against `query`, best first, ties broken by recency.

        Args:
            query: Free text; its words and CJK bigrams are OR-ed.
            note_type: Keep only notes of this type.
            tags: Keep only notes with at least one of these tags.
            limit: Maximum number of results.

        Returns:
            `(note, score)` pairs, score > 0. Empty when the query has no searchable word.
        """
        terms = query_terms(query)
        if not terms:
            return []
        # Each term is quoted (FTS5 string syntax), so nothing in a query is FTS5 syntax.
        match = " OR ".join(f'"{term}"' for term in terms)
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
