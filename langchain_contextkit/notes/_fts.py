"""SQLite FTS5 plumbing shared by the note search and the document search (BM25, in memory).

FTS5's `unicode61` tokenizer leaves a run of Chinese or Japanese text as one token and
cannot match ``KestrelConsumerLag`` with ``kestrel_consumer_lag`` or "kestrel consumer lag".
So `index_text` spells a CJK run out as its characters and bigrams (Lucene's CJK scheme) and
each identifier whole, in parts (at ``_``, ``-``, case and digit changes) and run together;
`query_terms` asks for the same terms, plus neighbouring words run together (up to four).
Other scripts go through `unicode61` and the Porter stemmer (`TOKENIZE`).
"""

from __future__ import annotations

import re
import sqlite3
from typing import TYPE_CHECKING

from langchain_contextkit.errors import SearchUnavailableError

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = [
    "TOKENIZE",
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
# Words as unicode61 sees them (letters and digits), joined by single `_` or `-` into
# identifiers; CJK runs are taken out first.
_IDENTIFIER = re.compile(r"[^\W_]+(?:[_-][^\W_]+)*")
_SEPARATOR = re.compile(r"[_-]")
# Most neighbouring query words run together into one term ("kestrel consumer lag").
_MAX_JOINED_WORDS = 4


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
    """Prepare text for FTS5 to index word by word.

    CJK runs are spelled out as characters plus bigrams, and each identifier is followed
    by its parts and its parts run together (``KestrelConsumerLag Kestrel Consumer Lag``),
    whatever `unicode61` would not make of it itself.
    """
    # Identifiers are looked for between CJK runs only: the grams have nothing to cut.
    pieces: list[str] = []
    position = 0
    for run in _CJK_RUN.finditer(text):
        pieces.append(_IDENTIFIER.sub(_with_parts, text[position : run.start()]))
        pieces.append(f" {' '.join(_grams(run.group(), unigrams=True))} ")
        position = run.end()
    pieces.append(_IDENTIFIER.sub(_with_parts, text[position:]))
    return "".join(pieces)


def query_terms(query: str) -> list[str]:
    """The searchable terms of a query, each once (ignoring case), in query order.

    They are its words, each identifier whole and in parts (``maxRetryCount`` gives
    ``maxRetryCount``, ``max``, ``Retry``, ``Count``), runs of two to four words only
    spaces apart put together (``kestrel consumer lag`` gives ``kestrelconsumer``,
    ``consumerlag`` and ``kestrelconsumerlag``, the last of which finds
    ``KestrelConsumerLag``), and the bigrams of its CJK runs. A join may spell another
    word ("on line" asks for ``online`` too), which only ever adds a hit.
    """
    terms: dict[str, str] = {}
    position = 0
    for run in _CJK_RUN.finditer(query):
        _add_terms(terms, _word_terms(query[position : run.start()]))
        _add_terms(terms, _grams(run.group(), unigrams=False))
        position = run.end()
    _add_terms(terms, _word_terms(query[position:]))
    return list(terms.values())


def match_expression(query: str) -> str | None:
    """An FTS5 MATCH expression OR-ing the query's terms; None when it has none.

    Each term is quoted (FTS5 string syntax), so nothing in a query is FTS5 syntax.
    """
    terms = query_terms(query)
    if not terms:
        return None
    return " OR ".join(f'"{term}"' for term in terms)


def _add_terms(terms: dict[str, str], new: Iterable[str]) -> None:
    """Add terms not there yet; FTS5 folds case, so "Lag" and "lag" are one term."""
    for term in new:
        terms.setdefault(term.casefold(), term)


def _word_terms(text: str) -> list[str]:
    """The query terms of text without CJK: identifiers whole and in parts, then joins."""
    terms: list[str] = []
    run: list[str] = []  # the wholes of identifiers only spaces apart, the last one last
    joined: list[str] = []
    end = 0
    for match in _IDENTIFIER.finditer(text):
        pieces = _SEPARATOR.split(match.group())
        whole = "".join(pieces)
        terms.append(whole)
        if len(pieces) > 1:
            terms.extend(pieces)
        terms.extend(
            part for piece in pieces if len(parts := _case_parts(piece)) > 1 for part in parts
        )
        if run and not text[end : match.start()].isspace():
            run = []
        run = [*run[1 - _MAX_JOINED_WORDS :], whole]
        joined.extend("".join(run[start:]) for start in range(len(run) - 2, -1, -1))
        end = match.end()
    return terms + joined


def _with_parts(match: re.Match[str]) -> str:
    """An identifier followed by what FTS5 should index besides its own tokens."""
    identifier = match.group()
    if _plain(identifier):
        return identifier  # most words: a quick look, no split
    pieces = _SEPARATOR.split(identifier)
    # unicode61 indexes the pieces itself (it splits at `_` and `-`), not them run together,
    # nor the case parts of a piece.
    extra = ["".join(pieces)] if len(pieces) > 1 else []
    for piece in pieces:
        if len(parts := _case_parts(piece)) > 1:
            extra.extend(parts)
    return f"{identifier} {' '.join(extra)} " if extra else identifier


def _case_parts(word: str) -> list[str]:
    """A word cut where its case or its letters/digits change: ``HTTPServer2`` → HTTP, Server, 2.

    A capital starts a part after a small letter (``consumerLag``), and the last capital of
    a run of them starts the next part when a small letter follows (``HTTPServer``).
    """
    if _plain(word):
        return [word]
    parts: list[str] = []
    start = 0
    for i in range(1, len(word)):
        before, here = word[i - 1], word[i]
        if (
            (before.islower() and here.isupper())
            or (before.isupper() and here.isupper() and word[i + 1 : i + 2].islower())
            or (before.isdigit() != here.isdigit())
        ):
            parts.append(word[start:i])
            start = i
    parts.append(word[start:])
    return parts


def _plain(word: str) -> bool:
    """Tell (quickly) that a word has nothing to cut: all digits, or letters cased as prose."""
    return word.isdigit() or (word.isalpha() and (word.islower() or word[1:].islower()))


def _grams(run: str, *, unigrams: bool) -> list[str]:
    """Character bigrams of a CJK run, plus its characters when `unigrams` (or if single)."""
    bigrams = [run[i : i + 2] for i in range(len(run) - 1)]
    if unigrams or not bigrams:
        return list(run) + bigrams
    return bigrams
