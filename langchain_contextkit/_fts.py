"""SQLite FTS5 plumbing shared by the note search and the document search.

Both rank with FTS5's `bm25()` (Okapi BM25, k1 = 1.2, b = 0.75) over an in-memory
database. SQLite ships with CPython, so this adds no dependency.

FTS5's `unicode61` tokenizer splits on spaces and punctuation, which leaves a run of
Chinese (or Japanese) text as one giant token. Before indexing, each such run is therefore
spelled out as its characters and its character bigrams (`index_text`), the scheme of
Lucene's CJK analyzer; a query uses the bigrams of each run, or its lone character for a
one-character run (`query_terms`), so "依赖冲突" finds "依赖版本冲突" through 依赖 and 冲突.
Other scripts go through `unicode61` plus the Porter stemmer (`TOKENIZE`), so "locks"
finds "lock".
"""

from __future__ import annotations

import re
import sqlite3

from langchain_contextkit.errors import ContextKitError

__all__ = [
    "TOKENIZE",
    "SearchUnavailableError",
    "connect",
    "index_text",
    "match_expression",
    "query_terms",
]

TOKENIZE = "porter unicode61"
"""The FTS5 `tokenize=` option every index here uses (what `query_terms` assumes)."""

# Han, kana, Hangul and CJK compatibility ideographs: scripts written without spaces.
_CJK_RUN = re.compile(
    r"[\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
    r"\U00020000-\U0002fa1f]+"
)
# Words as unicode61 sees them (letters and digits; `_` separates), minus CJK runs.
_WORD = re.compile(r"[^\W_]+")


class SearchUnavailableError(ContextKitError):
    """This Python's SQLite lacks the FTS5 extension that BM25 search needs."""


def connect(schema: str, *, purpose: str) -> sqlite3.Connection:
    """Open an in-memory database and create `schema` in it.

    The connection may be used from any thread: callers guard it with their own lock.

    Args:
        schema: SQL script creating the tables (at least one FTS5 virtual table).
        purpose: What needs the index, for the error message ("note search").

    Raises:
        SearchUnavailableError: If SQLite here was built without FTS5.
    """
    db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
    try:
        db.executescript(schema)
    except sqlite3.OperationalError as error:
        db.close()
        msg = (
            f"{purpose} needs SQLite's FTS5 extension, which this Python's sqlite3 "
            f"module lacks ({error}); use a CPython build with FTS5 (python.org, "
            "Debian, Ubuntu, Homebrew and conda builds have it)"
        )
        raise SearchUnavailableError(msg) from error
    return db


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


def match_expression(query: str) -> str | None:
    """An FTS5 MATCH expression OR-ing the query's terms; None when it has none.

    Each term is quoted (FTS5 string syntax), so nothing in a query is FTS5 syntax.
    """
    terms = query_terms(query)
    if not terms:
        return None
    return " OR ".join(f'"{term}"' for term in terms)


def _grams(run: str, *, unigrams: bool) -> list[str]:
    """Character bigrams of a CJK run, plus its characters when `unigrams` (or if single)."""
    bigrams = [run[i : i + 2] for i in range(len(run) - 1)]
    if unigrams or not bigrams:
        return list(run) + bigrams
    return bigrams
